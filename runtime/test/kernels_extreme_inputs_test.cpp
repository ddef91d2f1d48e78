// Extreme inputs through every activation, norm, softmax (attention), loss and rope kernel:
// +-1e4 and larger, +-inf where the result is defined, subnormals, +-0. Each test fails if an
// output is not finite although the mathematical result is. This holds the kernels to IEEE
// arithmetic whatever the vector unit and the compiler flags (-ffast-math's reciprocal
// approximation of 1 / inf once made silu(-100) NaN).
#include "kernels_test_util.h"
#include "megart/kernels.h"
#include "megart/parallel_kernels.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

namespace {

using namespace megart::test;
namespace cpu = megart::cpu;

constexpr float kInf = INFINITY;
constexpr float kSub = 1e-40f; // subnormal (below FLT_MIN = 1.2e-38)
constexpr float kEps = 1e-5f;

// Values as printed by iostream (std::to_string would show 1e-40 as 0.000000).
std::string str(float x) {
  std::ostringstream os;
  os << x;
  return os.str();
}

std::string show(const Vec& v) {
  std::string s;
  for (float x : v)
    s += str(x) + " ";
  return s;
}

// Fails naming the kernel, the case and the first non-finite output.
void expect_finite(const Vec& out, const std::string& what) {
  for (size_t i = 0; i < out.size(); ++i)
    if (!std::isfinite(out[i])) {
      ADD_FAILURE() << what << ": output[" << i << "] = " << out[i];
      return;
    }
}

// n elements cycling through value * {1, -1, 0.5, -0.25}: mixed signs and sizes, never larger
// than |value| (so no case overflows by construction).
Vec spread(int64_t n, float value) {
  const float f[] = {1.0f, -1.0f, 0.5f, -0.25f};
  Vec v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[i] = value * f[i % 4];
  return v;
}

// ---- Activations ---------------------------------------------------------------------------

// Each elementwise activation and its derivative are finite for every finite input, including
// past exp's overflow (|x| > 88.7) and past the overflow of x^2 and x^3 (1e20, FLT_MAX). At
// +-inf gelu and silu are +inf or limits, not values (torch gives NaN there): not tested.
const float kActivationInputs[] = {
    0.0f, -0.0f, kSub, -kSub, 1.0f, -1.0f, 88.0f, -88.0f, 89.0f, -89.0f, 100.0f, -100.0f,
    1000.0f, -1000.0f, 1e4f, -1e4f, 1e20f, -1e20f, FLT_MAX, -FLT_MAX};

// Each value fills 37 elements: GCC's vector loop (16, 8 or 4 wide) and its scalar remainder
// both see it.
constexpr int64_t kFill = 37;

TEST(KernelsExtremeInputs, GeluTanh) {
  for (float x : kActivationInputs) {
    const Vec in(kFill, x), dy(kFill, 1.0f);
    Vec y(kFill), dx(kFill);
    cpu::gelu_tanh_forward(y.data(), in.data(), kFill);
    expect_finite(y, "gelu_tanh_forward x=" + str(x));
    cpu::gelu_tanh_backward(dx.data(), dy.data(), in.data(), kFill);
    expect_finite(dx, "gelu_tanh_backward x=" + str(x));
  }
}

TEST(KernelsExtremeInputs, GeluErf) {
  for (float x : kActivationInputs) {
    const Vec in(kFill, x), dy(kFill, 1.0f);
    Vec y(kFill), dx(kFill);
    cpu::gelu_erf_forward(y.data(), in.data(), kFill);
    expect_finite(y, "gelu_erf_forward x=" + str(x));
    cpu::gelu_erf_backward(dx.data(), dy.data(), in.data(), kFill);
    expect_finite(dx, "gelu_erf_backward x=" + str(x));
  }
}

TEST(KernelsExtremeInputs, SwiGlu) {
  for (float g : kActivationInputs) {
    const Vec gate(kFill, g), up(kFill, 1.0f), dy(kFill, 1.0f);
    Vec y(kFill), dgate(kFill), dup(kFill);
    cpu::swiglu_forward(y.data(), gate.data(), up.data(), kFill);
    expect_finite(y, "swiglu_forward gate=" + str(g));
    cpu::swiglu_backward(dgate.data(), dup.data(), dy.data(), gate.data(), up.data(), kFill);
    expect_finite(dgate, "swiglu_backward dgate, gate=" + str(g));
    expect_finite(dup, "swiglu_backward dup, gate=" + str(g));
  }
}

// ---- Norms ---------------------------------------------------------------------------------

// One row each (dim 4) with its output gradient. Finite for finite rows whose deviations from
// the mean fit in float (up to 1e30 here; near FLT_MAX, x - mean itself overflows).
struct NormCase {
  Vec x, dy;
};
const NormCase kNormCases[] = {
    {{1e4f, -1e4f, 1e4f, -1e4f}, {1.0f, -1.0f, 0.5f, 2.0f}},
    {{1e4f, 1e4f, 1e4f, 1e4f}, {1.0f, 1.0f, 1.0f, 1.0f}}, // zero variance
    {{1e30f, -1e30f, 0.0f, 1.0f}, {1e4f, -1e4f, 1.0f, 0.0f}},
    {{1e30f, 0.0f, 0.0f, 0.0f}, {1.0f, 1.0f, 1.0f, 1.0f}}, // one outlier
    {{kSub, -kSub, kSub, 0.0f}, {kSub, 1.0f, -kSub, 0.0f}},
    {{0.0f, -0.0f, 0.0f, -0.0f}, {1e4f, -1e4f, -0.0f, 0.0f}},
};

TEST(KernelsExtremeInputs, LayerNorm) {
  const int64_t dim = 4;
  const Vec w = {1.0f, -2.0f, 0.5f, 1e4f}, b = {0.0f, 1.0f, -1.0f, kSub};
  for (const NormCase& c : kNormCases) {
    Vec y(dim), dx(dim), dw(dim), db(dim);
    cpu::layer_norm_forward(y.data(), c.x.data(), w.data(), b.data(), 1, dim, kEps);
    expect_finite(y, "layer_norm_forward x=" + show(c.x));
    cpu::layer_norm_backward(dx.data(), dw.data(), db.data(), c.dy.data(), c.x.data(), w.data(),
                             1, dim, kEps);
    expect_finite(dx, "layer_norm_backward dx, x=" + show(c.x));
    expect_finite(dw, "layer_norm_backward dw, x=" + show(c.x));
    expect_finite(db, "layer_norm_backward db, x=" + show(c.x));
  }
}

TEST(KernelsExtremeInputs, RmsNorm) {
  const int64_t dim = 4;
  const Vec w = {1.0f, -2.0f, 0.5f, 1e4f};
  for (const NormCase& c : kNormCases) {
    Vec y(dim), dx(dim), dw(dim);
    cpu::rms_norm_forward(y.data(), c.x.data(), w.data(), 1, dim, kEps);
    expect_finite(y, "rms_norm_forward x=" + show(c.x));
    cpu::rms_norm_backward(dx.data(), dw.data(), c.dy.data(), c.x.data(), w.data(), 1, dim, kEps);
    expect_finite(dx, "rms_norm_backward dx, x=" + show(c.x));
    expect_finite(dw, "rms_norm_backward dw, x=" + show(c.x));
  }
}

// ---- Attention (softmax inside) ------------------------------------------------------------

// q, k, v filled with spread(value). Scores up to ~1e8 make the softmax one-hot (exp
// underflows to 0 for every other key); subnormal and zero scores make it uniform. Finite
// whenever the scores themselves fit in float.
struct AttentionCase {
  float q, k, v;
};
const AttentionCase kAttentionCases[] = {
    {1e4f, 1e4f, 1e4f}, {-1e4f, 1e4f, -1e4f}, {1e4f, -1e4f, 1e30f}, {1e4f, 0.0f, -1e4f},
    {kSub, kSub, kSub}, {1.0f, kSub, 1e30f},  {0.0f, 0.0f, 0.0f},   {-0.0f, -0.0f, -0.0f},
};

TEST(KernelsExtremeInputs, Attention) {
  // Grouped query heads (4 query heads on 2 kv heads), odd sequence length.
  const int64_t batch = 1, seq = 5, q_heads = 4, kv_heads = 2, head_dim = 4;
  const int64_t nq = batch * seq * q_heads * head_dim, nkv = batch * seq * kv_heads * head_dim;
  const float scale = 0.5f;
  for (const AttentionCase& c : kAttentionCases)
    for (bool causal : {false, true}) {
      const Vec q = spread(nq, c.q), k = spread(nkv, c.k), v = spread(nkv, c.v),
                dout = spread(nq, 1.0f);
      Vec out(nq), dq(nq), dk(nkv), dv(nkv);
      const std::string what =
          " q=" + str(c.q) + " k=" + str(c.k) + " v=" + str(c.v) + (causal ? " causal" : "");
      cpu::attention_forward(out.data(), q.data(), k.data(), v.data(), batch, seq, q_heads,
                             kv_heads, head_dim, scale, causal);
      expect_finite(out, "attention_forward" + what);
      cpu::attention_backward(dq.data(), dk.data(), dv.data(), dout.data(), q.data(), k.data(),
                              v.data(), batch, seq, q_heads, kv_heads, head_dim, scale, causal);
      expect_finite(dq, "attention_backward dq" + what);
      expect_finite(dk, "attention_backward dk" + what);
      expect_finite(dv, "attention_backward dv" + what);
    }
}

// ---- Cross-entropy -------------------------------------------------------------------------

// One token each: 4 real logits, then 2 padding columns holding NaN (they take no part). The
// loss is finite when the label's logit is finite and no logit is +inf; -inf logits (masked
// classes) are defined and contribute exp(-inf) = 0.
constexpr int64_t kVocab = 6, kValidVocab = 4;
constexpr float kPad = NAN;
struct LossCase {
  Vec logits;
  int32_t label;
};
const LossCase kLossCases[] = {
    {{1e4f, -1e4f, 0.0f, kSub, kPad, kPad}, 0},
    {{1e4f, -1e4f, 0.0f, kSub, kPad, kPad}, 1}, // loss 2e4
    {{1e30f, -1e30f, 1.0f, 0.0f, kPad, kPad}, 1},
    {{-kInf, 0.0f, 1.0f, -kInf, kPad, kPad}, 2},
    {{-kInf, -1e30f, -kInf, -kInf, kPad, kPad}, 1}, // the one finite logit
    {{1e4f, 1e4f, 1e4f, 1e4f, kPad, kPad}, 3},
    {{kSub, -kSub, 0.0f, -0.0f, kPad, kPad}, 3},
};

TEST(KernelsExtremeInputs, CrossEntropy) {
  for (const LossCase& c : kLossCases) {
    const std::string what = " logits=" + show(c.logits) + "label=" + std::to_string(c.label);
    const float loss =
        cpu::cross_entropy_forward(c.logits.data(), &c.label, 1, kVocab, kValidVocab);
    expect_finite({loss}, "cross_entropy_forward" + what);
    Vec dlogits(kVocab);
    cpu::cross_entropy_backward(dlogits.data(), 1.0f, c.logits.data(), &c.label, 1, kVocab,
                                kValidVocab);
    expect_finite(dlogits, "cross_entropy_backward" + what);
  }
}

// The same cases through the vocabulary-parallel pieces, the vocabulary split over 2 shards of
// 3 columns as on 2 tensor-parallel ranks (shard 1: 1 real column and 2 padding columns). The
// all-reduces (max, sums) are done here by hand.
TEST(KernelsExtremeInputs, VocabParallelCrossEntropy) {
  const int64_t shards = 2, local = kVocab / shards;
  for (const LossCase& c : kLossCases) {
    const std::string what = " logits=" + show(c.logits) + "label=" + std::to_string(c.label);
    std::vector<Vec> shard(shards);
    std::vector<int64_t> valid(shards);
    float max = -kInf, sum_exp = 0.0f, target = 0.0f;
    for (int64_t s = 0; s < shards; ++s) {
      shard[s].assign(c.logits.begin() + s * local, c.logits.begin() + (s + 1) * local);
      valid[s] = cpu::valid_columns(kValidVocab, s * local, local);
      float m;
      cpu::logits_max(&m, shard[s].data(), 1, local, valid[s]);
      max = std::max(max, m);
    }
    for (int64_t s = 0; s < shards; ++s) {
      float se, tg;
      cpu::logits_sum_exp(&se, shard[s].data(), &max, 1, local, valid[s]);
      expect_finite({se}, "logits_sum_exp shard " + std::to_string(s) + what);
      cpu::target_logit(&tg, shard[s].data(), &c.label, 1, local, s * local);
      sum_exp += se;
      target += tg;
    }
    const float loss = cpu::cross_entropy_from_stats(&max, &sum_exp, &target, 1);
    expect_finite({loss}, "cross_entropy_from_stats" + what);
    for (int64_t s = 0; s < shards; ++s) {
      Vec dlogits(local);
      cpu::cross_entropy_backward_from_stats(dlogits.data(), 1.0f, shard[s].data(), &c.label, &max,
                                             &sum_exp, 1, local, s * local, valid[s]);
      expect_finite(dlogits, "cross_entropy_backward_from_stats shard " + std::to_string(s) + what);
    }
  }
}

// ---- Rotary embedding ----------------------------------------------------------------------

// A rotation keeps the norm: finite for every input whose rotated pairs fit in float.
TEST(KernelsExtremeInputs, Rope) {
  const int64_t batch = 1, seq = 3, heads = 2, head_dim = 8, n = batch * seq * heads * head_dim;
  const float values[] = {1e4f, -1e4f, 1e30f, kSub, 0.0f, -0.0f};
  for (float value : values)
    for (int64_t offset : {int64_t{0}, int64_t{1} << 20})
      for (bool inverse : {false, true}) {
        const Vec x = spread(n, value);
        Vec y(n);
        cpu::rope_forward(y.data(), x.data(), batch, seq, heads, head_dim, 10000.0f, offset,
                          inverse);
        expect_finite(y, "rope_forward x=" + str(value) + " offset=" + std::to_string(offset) +
                             (inverse ? " inverse" : ""));
      }
}

} // namespace
