#include "megart/error.h"

#include "expect_error.h"
#include "megart/optimizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

using ::testing::HasSubstr;

// Two steps on one element, worked by hand (lr 0.1, weight decay 0.1, betas 0.9/0.999,
// eps 1e-8; gradients 0.5 then 0.25):
// step 1: p = 1 * (1 - 0.01) = 0.99; m = 0.1 * 0.5 = 0.05; v = 0.001 * 0.25 = 0.00025;
//         bias corrections 0.1 and 0.001, so m_hat = 0.5, sqrt(v_hat) = 0.5;
//         p = 0.99 - 0.1 * 0.5 / (0.5 + 1e-8) = 0.890000002
// step 2: p = 0.890000002 * 0.99 = 0.88110000198; m = 0.9 * 0.05 + 0.1 * 0.25 = 0.07;
//         v = 0.999 * 0.00025 + 0.001 * 0.0625 = 0.00031225; bias corrections 0.19, 0.001999;
//         denom = sqrt(0.00031225 / 0.001999) + 1e-8 = 0.395225390701667;
//         p = 0.88110000198 - (0.1 / 0.19) * 0.07 / denom = 0.787882040457
TEST(OptimizerAdamW, TwoStepsByHand) {
  float p = 1.0f, m = 0.0f, v = 0.0f;
  float g = 0.5f;
  megart::adamw_step(&p, &g, &m, &v, 1, 0.1, 0.9, 0.999, 1e-8, 0.1, 1);
  EXPECT_NEAR(p, 0.890000002, 1e-7);
  EXPECT_NEAR(m, 0.05, 1e-9);
  EXPECT_NEAR(v, 0.00025, 0.00025 * 1e-6); // float32: relative 1e-6
  g = 0.25f;
  megart::adamw_step(&p, &g, &m, &v, 1, 0.1, 0.9, 0.999, 1e-8, 0.1, 2);
  EXPECT_NEAR(p, 0.787882040457, 1e-7);
  EXPECT_NEAR(m, 0.07, 1e-9);
  EXPECT_NEAR(v, 0.00031225, 0.00031225 * 1e-6);
}

TEST(OptimizerAdamW, ZeroWeightDecayLeavesDecayFactorOne) {
  megart::AdamWConfig c;
  c.weight_decay = 0;
  megart::AdamWScalars s = megart::adamw_scalars(1e-3, c, 1);
  EXPECT_EQ(s.decay_factor, 1.0f);
  EXPECT_EQ(s.beta1, 0.9f);
  EXPECT_EQ(s.one_minus_beta1, static_cast<float>(1 - 0.9)); // rounded from double, like torch
  expect_error([&] { megart::adamw_scalars(1e-3, c, 0); }, {"AdamW step is 0", "from 1"});
}

// Reference values from torch 1.13.1 (Debian's python3-torch), produced once with
//   ATEN_CPU_CAPABILITY=default /usr/bin/python3 adamw_ref.py
// where adamw_ref.py is:
//   import math, torch
//   n = 19
//   p0 = torch.tensor([0.5 * math.sin(1.3 * i + 0.2) for i in range(n)], dtype=torch.float32)
//   grads = [torch.tensor([0.01 * (k + 1) * math.cos(0.7 * i * (k + 1) + k) for i in range(n)],
//                         dtype=torch.float32) for k in range(3)]
//   p = p0.clone().requires_grad_(True)
//   opt = torch.optim.AdamW([p], lr=1e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
//   f = lambda t: ", ".join("%.9gf" % x for x in t.tolist())
//   print("p0:", f(p0)); [print("g%d:" % k, f(g)) for k, g in enumerate(grads)]
//   for k, g in enumerate(grads):
//       p.grad = g.clone(); opt.step(); st = opt.state[p]
//       print("step%d p:" % (k + 1), f(p.detach()))
//       print("step%d m:" % (k + 1), f(st['exp_avg']))
//       print("step%d v:" % (k + 1), f(st['exp_avg_sq']))
// (%.9g round-trips float32 exactly.) ATEN_CPU_CAPABILITY=default makes torch's vectorised
// kernels use separate multiply and add, as its scalar code and ours do; with AVX2/AVX-512 it
// fuses them in add_/addcmul_ and exp_avg / exp_avg_sq differ from these by about 1 ulp.
namespace {
constexpr int kN = 19;
const float kP0[kN] = {
    0.0993346646f, 0.498747498f, 0.167494074f, -0.40913856f, -0.386382252f, 0.202424958f,
    0.494679123f, 0.0622272119f, -0.461387724f, -0.309068561f, 0.29603675f, 0.467447519f,
    -0.0459534265f, -0.492032498f, -0.217282817f, 0.375786722f, 0.418327808f, -0.151982307f,
    -0.499637991f,
};
const float kGrad0[kN] = {
    0.00999999978f, 0.00764842192f, 0.00169967138f, -0.00504846126f, -0.00942222308f,
    -0.00936456677f, -0.00490260823f, 0.00186512375f, 0.00775565859f, 0.00999858603f,
    0.00753902271f, 0.00153373857f, -0.00519288657f, -0.00947721582f, -0.0093042627f,
    -0.00475536939f, 0.00203004875f, 0.00786070339f, 0.00999434572f,
};
const float kGrad1[kN] = {
    0.0108060464f, -0.0147478739f, -0.015819354f, 0.00937033352f, 0.0190046523f, -0.00291000074f,
    -0.0199938603f, -0.00388659816f, 0.018672673f, 0.0102340803f, -0.0151937585f, -0.0153989596f,
    0.00995912403f, 0.0187844075f, -0.00357366004f, -0.0199992172f, -0.00322475936f,
    0.0189030096f, 0.00965054054f,
};
const float kGrad2[kN] = {
    -0.0124844052f, -0.017244719f, 0.029896263f, -0.0129413055f, -0.0168295279f, 0.0299339481f,
    -0.0133945467f, -0.0164095797f, 0.0299631711f, -0.0138440011f, -0.0159849897f, 0.029983921f,
    -0.0142895412f, -0.0155558828f, 0.0299961958f, -0.0147310421f, -0.0151223773f, 0.0299999882f,
    -0.0151683772f,
};
const float kStep1_Param[kN] = {
    0.098324731f, 0.497697622f, 0.166477337f, -0.408097655f, -0.385343611f, 0.20340471f,
    0.495629638f, 0.0612209924f, -0.462341577f, -0.310037643f, 0.295007169f, 0.466400772f,
    -0.0449488312f, -0.490983307f, -0.216261089f, 0.376749128f, 0.417285979f, -0.15296711f,
    -0.500588f,
};
const float kStep1_ExpAvg[kN] = {
    0.00100000005f, 0.000764842203f, 0.000169967141f, -0.000504846161f, -0.000942222308f,
    -0.000936456665f, -0.000490260834f, 0.000186512378f, 0.000775565859f, 0.000999858603f,
    0.000753902306f, 0.000153373854f, -0.000519288646f, -0.000947721594f, -0.000930426293f,
    -0.000475536945f, 0.000203004878f, 0.000786070363f, 0.000999434618f,
};
const float kStep1_ExpAvgSq[kN] = {
    5.00000033e-06f, 2.92491791e-06f, 1.44444144e-07f, 1.27434816e-06f, 4.4389144e-06f,
    4.38475536e-06f, 1.20177845e-06f, 1.73934339e-07f, 3.00751208e-06f, 4.99858606e-06f,
    2.8418433e-06f, 1.17617695e-07f, 1.3483035e-06f, 4.49088111e-06f, 4.32846537e-06f,
    1.13067688e-06f, 2.06054906e-07f, 3.08953304e-06f, 4.99434736e-06f,
};
const float kStep2_Param[kN] = {
    0.0973146036f, 0.497997612f, 0.167120978f, -0.408392012f, -0.385671556f, 0.204254195f,
    0.496452659f, 0.0615930744f, -0.463231236f, -0.311006904f, 0.295343846f, 0.467020065f,
    -0.0452920645f, -0.491294235f, -0.215338603f, 0.377580673f, 0.417515785f, -0.153887868f,
    -0.501537323f,
};
const float kStep2_ExpAvg[kN] = {
    0.0019806046f, -0.000786429388f, -0.00142896501f, 0.000482671865f, 0.00105246517f,
    -0.00113381108f, -0.00244062091f, -0.000220798698f, 0.00256527658f, 0.00192328077f,
    -0.000840863795f, -0.00140185957f, 0.000528552686f, 0.00102549139f, -0.00119474961f,
    -0.0024279051f, -0.000139771553f, 0.00259776437f, 0.00186454528f,
};
const float kStep2_ExpAvgSq[kN] = {
    1.05885319e-05f, 1.3653661e-05f, 1.26498198e-05f, 5.60078843e-06f, 2.22758099e-05f,
    4.58892282e-06f, 2.11294118e-05f, 9.20519881e-07f, 2.02905721e-05f, 9.98547694e-06f,
    1.42422659e-05f, 1.19681354e-05f, 6.24009635e-06f, 2.19090361e-05f, 4.75059414e-06f,
    2.10725775e-05f, 7.15705823e-07f, 2.08012443e-05f, 9.40127757e-06f,
};
const float kStep3_Param[kN] = {
    0.0971287116f, 0.498590201f, 0.166788995f, -0.408027411f, -0.385460466f, 0.203841627f,
    0.497317374f, 0.0622639656f, -0.464107811f, -0.311086386f, 0.295954257f, 0.466650873f,
    -0.044956848f, -0.4910914f, -0.215698227f, 0.378460467f, 0.418129891f, -0.154796854f,
    -0.501536846f,
};
const float kStep3_ExpAvg[kN] = {
    0.000534103485f, -0.00243225833f, 0.00170355779f, -0.000859725871f, -0.00073573424f,
    0.00197296496f, -0.00353601342f, -0.00183967687f, 0.00530506577f, 0.000346552464f,
    -0.00235527637f, 0.00173671846f, -0.000953256793f, -0.000632646086f, 0.00192434492f,
    -0.00365821877f, -0.00163803215f, 0.00533798663f, 0.000161252916f,
};
const float kStep3_ExpAvgSq[kN] = {
    1.78521241e-05f, 2.78399948e-05f, 5.67066563e-05f, 1.36946182e-05f, 3.53236683e-05f,
    4.91615392e-05f, 2.90436346e-05f, 1.43382094e-05f, 6.41656225e-05f, 1.90690225e-05f,
    2.63061484e-05f, 5.63215035e-05f, 1.61376411e-05f, 3.29128598e-05f, 4.95016538e-05f,
    3.08691269e-05f, 1.21142348e-05f, 6.4761145e-05f, 2.04351963e-05f,
};
} // namespace

TEST(OptimizerAdamW, MatchesTorchBitForBit) {
  std::vector<float> p(kP0, kP0 + kN), m(kN, 0.0f), v(kN, 0.0f);
  const float *grads[3] = {kGrad0, kGrad1, kGrad2};
  const float *want_p[3] = {kStep1_Param, kStep2_Param, kStep3_Param};
  const float *want_m[3] = {kStep1_ExpAvg, kStep2_ExpAvg, kStep3_ExpAvg};
  const float *want_v[3] = {kStep1_ExpAvgSq, kStep2_ExpAvgSq, kStep3_ExpAvgSq};
  megart::AdamWConfig config{0.9, 0.95, 1e-8, 0.1};
  for (int step = 1; step <= 3; ++step) {
    megart::adamw_update(megart::adamw_scalars(1e-3, config, step), p.data(), grads[step - 1],
                         m.data(), v.data(), kN);
    for (int i = 0; i < kN; ++i) {
      EXPECT_EQ(p[i], want_p[step - 1][i]) << "param " << i << " step " << step;
      EXPECT_EQ(m[i], want_m[step - 1][i]) << "exp_avg " << i << " step " << step;
      EXPECT_EQ(v[i], want_v[step - 1][i]) << "exp_avg_sq " << i << " step " << step;
    }
  }
}

TEST(OptimizerClip, GlobalNormAndCoefficient) {
  std::vector<float> a = {3, 4}, b = {12};
  const double norm = megart::global_grad_norm({{a.data(), 2}, {b.data(), 1}});
  EXPECT_DOUBLE_EQ(norm, 13.0);
  EXPECT_FLOAT_EQ(megart::clip_coefficient(norm, 1.0f), static_cast<float>(1.0 / (13.0 + 1e-6)));
  EXPECT_GT(megart::clip_coefficient(0.5, 1.0f), 1.0f); // below max_norm: no clipping
  EXPECT_EQ(megart::clip_coefficient(norm, 0.0f), 1.0f); // clipping off
  EXPECT_EQ(megart::global_grad_norm({}), 0.0);
}

TEST(OptimizerClip, ClipGradNormScalesOnlyAboveMax) {
  std::vector<float> a = {3, 4};
  double norm = megart::clip_grad_norm({{a.data(), 2}}, 1.0f);
  EXPECT_DOUBLE_EQ(norm, 5.0); // the norm before clipping, as Megatron logs it
  EXPECT_NEAR(a[0], 0.6, 1e-6);
  EXPECT_NEAR(a[1], 0.8, 1e-6);
  std::vector<float> c = {0.3f, 0.4f};
  megart::clip_grad_norm({{c.data(), 2}}, 1.0f);
  EXPECT_EQ(c[0], 0.3f); // untouched
  EXPECT_EQ(c[1], 0.4f);
  std::vector<float> bad = {INFINITY, 1.0f};
  EXPECT_TRUE(std::isinf(megart::clip_grad_norm({{bad.data(), 2}}, 1.0f)));
  EXPECT_EQ(bad[1], 1.0f); // left alone: the step will be skipped
}

TEST(OptimizerClip, LargeNormIsAccumulatedInDouble) {
  // More elements than one chunk; 1e8 ones would lose precision in float32.
  std::vector<float> g(300000, 0.5f);
  EXPECT_DOUBLE_EQ(megart::global_grad_norm({{g.data(), 300000}}), std::sqrt(300000 * 0.25));
}

TEST(OptimizerLrSchedule, Constant) {
  megart::LrSchedule s{"constant", 1e-3, 0, 0, 0};
  EXPECT_EQ(s.lr_at(0), 1e-3);
  EXPECT_EQ(s.lr_at(1000), 1e-3);
  s.warmup_iters = 10;
  EXPECT_EQ(s.lr_at(0), 0.0);
  EXPECT_DOUBLE_EQ(s.lr_at(5), 5e-4);
  EXPECT_EQ(s.lr_at(10), 1e-3);
  EXPECT_EQ(s.lr_at(11), 1e-3);
  // Megatron steps the scheduler after each iteration: iteration 1 uses step 0.
  EXPECT_EQ(s.lr_for_iteration(1), 0.0);
  EXPECT_DOUBLE_EQ(s.lr_for_iteration(6), 5e-4);
}

TEST(OptimizerLrSchedule, Linear) {
  megart::LrSchedule s{"linear", 1e-3, 1e-4, 10, 110};
  EXPECT_DOUBLE_EQ(s.lr_at(1), 1e-4);  // warmup: 1e-3 * 1 / 10
  EXPECT_EQ(s.lr_at(10), 1e-3);        // end of warmup
  EXPECT_DOUBLE_EQ(s.lr_at(60), 5.5e-4); // halfway through decay
  EXPECT_DOUBLE_EQ(s.lr_at(85), 1e-4 + 0.25 * 9e-4);
  EXPECT_DOUBLE_EQ(s.lr_at(110), 1e-4);
  EXPECT_EQ(s.lr_at(111), 1e-4);
  EXPECT_EQ(s.lr_at(100000), 1e-4);
}

TEST(OptimizerLrSchedule, Cosine) {
  megart::LrSchedule s{"cosine", 1e-3, 1e-4, 10, 110};
  EXPECT_DOUBLE_EQ(s.lr_at(5), 5e-4);
  EXPECT_EQ(s.lr_at(10), 1e-3);
  EXPECT_DOUBLE_EQ(s.lr_at(35), 1e-4 + 0.5 * (std::cos(M_PI * 0.25) + 1) * 9e-4);
  EXPECT_DOUBLE_EQ(s.lr_at(60), 5.5e-4);
  EXPECT_NEAR(s.lr_at(110), 1e-4, 1e-18);
  EXPECT_EQ(s.lr_at(111), 1e-4);
  megart::LrSchedule no_warmup{"cosine", 6e-4, 0, 0, 100};
  EXPECT_EQ(no_warmup.lr_at(0), 6e-4); // no warmup: the first iteration uses max_lr
  EXPECT_DOUBLE_EQ(no_warmup.lr_at(50), 3e-4);
}

TEST(OptimizerLrSchedule, Validation) {
  expect_error([] { megart::LrSchedule{"exponential", 1e-3, 0, 0, 10}.lr_at(0); },
               {"'exponential' is not supported", "constant, linear, cosine"});
  expect_error([] { megart::LrSchedule{"linear", 1e-4, 1e-3, 0, 10}.validate(); },
               {"min_lr (0.001000) is greater than max_lr (0.000100)"});
  expect_error([] { megart::LrSchedule{"cosine", 1e-3, 0, 20, 10}.validate(); },
               {"warmup iters (20) is greater than lr decay iters (10)"});
  expect_error([] { megart::LrSchedule{"cosine", 1e-3, 0, 0, 0}.validate(); },
               {"lr decay iters is 0", "must be > 0"});
  expect_error([] { megart::LrSchedule{"constant", 1e-3, 0, 0, 0}.lr_at(-1); },
               {"step -1"});
  megart::LrSchedule{"constant", 1e-3, 0, 5, 0}.validate(); // decay iters unused when constant
}
