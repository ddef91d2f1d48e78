#include "kernels_test_util.h"
#include "megart/kernels.h"
#include "megart/program.h"

#include <omp.h>

#include <cmath>
#include <string>

namespace {

using namespace megart::test;
namespace cpu = megart::cpu;
using megart::DropoutBlock;

constexpr uint64_t kSeed = 1234;

// A [samples, seq, hidden] site's block: `shape` at `offset` of a tensor of `extent`.
DropoutBlock block(float rate, uint64_t key, std::initializer_list<int64_t> shape,
                   std::initializer_list<int64_t> offset, std::initializer_list<int64_t> extent) {
  DropoutBlock b;
  b.rate = rate;
  b.key = key;
  b.rank = static_cast<int32_t>(shape.size());
  for (int d = 0; d < b.rank; ++d) {
    b.shape[d] = shape.begin()[d];
    b.offset[d] = offset.begin()[d];
    b.extent[d] = extent.begin()[d];
  }
  return b;
}

// The documented mask of global element e, in double.
double reference_scale(uint64_t key, uint64_t e, float rate) {
  return megart::dropout_bits(key, e) >= megart::dropout_keep_threshold(rate) ? 1.0 / (1.0 - rate) : 0.0;
}

// Fraction of elements dropped under `key` over n global elements.
double drop_rate(uint64_t key, int64_t n, float rate) {
  int64_t dropped = 0;
  for (int64_t e = 0; e < n; ++e)
    dropped += reference_scale(key, static_cast<uint64_t>(e), rate) == 0.0;
  return static_cast<double>(dropped) / static_cast<double>(n);
}

TEST(KernelsDropout, MaskIsTheDocumentedFunctionOfTheGlobalIndex) {
  const int64_t S = 7, H = 11, n = 3 * S * H;
  const float rate = 0.3f;
  const Vec x = random_vec(n, 1, 0.5f, 1.5f); // never zero, so zeros in y are dropped elements
  Vec y(n);
  cpu::apply_dropout(y.data(), x.data(), block(rate, kSeed, {3, S, H}, {5, 0, 0}, {0, S, H}));
  for (int64_t i = 0; i < n; ++i) // sample 5 + i / (S H): global index 5 S H + i
    EXPECT_EQ(y[i], x[i] * static_cast<float>(reference_scale(kSeed, 5 * S * H + i, rate))) << i;
}

// The statistics the issue asks for: over 2^20 elements the dropped fraction is the rate within
// 5 standard deviations (sqrt(0.09 / 2^20) = 2.9e-4), and another layer, site or iteration
// draws an independent mask (masks differ in 2 x 0.1 x 0.9 = 18% of the elements).
TEST(KernelsDropout, MaskStatistics) {
  const int64_t n = 1 << 20;
  const float rate = 0.1f;
  const double sigma = std::sqrt(rate * (1.0 - rate) / n);
  const uint64_t it1 = megart::dropout_iteration_key(kSeed, 1), it2 = megart::dropout_iteration_key(kSeed, 2);
  const uint64_t keys[] = {megart::dropout_site_key(it1, -1, 0), megart::dropout_site_key(it1, 0, 2),
                           megart::dropout_site_key(it1, 1, 2), megart::dropout_site_key(it1, 0, 3),
                           megart::dropout_site_key(it2, 0, 2),
                           megart::dropout_site_key(megart::dropout_iteration_key(kSeed + 1, 1), 0, 2)};
  for (uint64_t key : keys)
    EXPECT_NEAR(drop_rate(key, n, rate), rate, 5 * sigma) << key;
  const double differ_sigma = std::sqrt(0.18 * 0.82 / n);
  for (size_t a = 0; a < std::size(keys); ++a)
    for (size_t b = a + 1; b < std::size(keys); ++b) {
      ASSERT_NE(keys[a], keys[b]);
      int64_t differ = 0;
      for (int64_t e = 0; e < n; ++e)
        differ += (reference_scale(keys[a], e, rate) == 0.0) != (reference_scale(keys[b], e, rate) == 0.0);
      EXPECT_NEAR(static_cast<double>(differ) / n, 2 * rate * (1 - rate), 5 * differ_sigma) << a << " vs " << b;
    }
}

// Every plan's block of a [4, 6, 10] site drops what the whole tensor drops: dp (samples),
// sp (sequence) and tp (hidden) splits.
TEST(KernelsDropout, BlocksDropWhatTheWholeDrops) {
  const int64_t B = 4, S = 6, H = 10;
  const Vec x = random_vec(B * S * H, 2, 0.5f, 1.5f);
  Vec whole(x.size());
  cpu::apply_dropout(whole.data(), x.data(), block(0.5f, kSeed, {B, S, H}, {0, 0, 0}, {0, S, H}));
  auto at = [&](int64_t b, int64_t s, int64_t h) { return (b * S + s) * H + h; };
  struct Split { int64_t shape[3], offset[3]; };
  for (const Split &p : {Split{{2, S, H}, {2, 0, 0}}, Split{{B, 3, H}, {0, 3, 0}}, Split{{B, S, 5}, {0, 0, 5}},
                         Split{{1, 2, 5}, {3, 4, 0}}}) {
    Vec in, out;
    for (int64_t b = 0; b < p.shape[0]; ++b)
      for (int64_t s = 0; s < p.shape[1]; ++s)
        for (int64_t h = 0; h < p.shape[2]; ++h)
          in.push_back(x[at(b + p.offset[0], s + p.offset[1], h + p.offset[2])]);
    out.resize(in.size());
    cpu::apply_dropout(out.data(), in.data(),
                       block(0.5f, kSeed, {p.shape[0], p.shape[1], p.shape[2]},
                             {p.offset[0], p.offset[1], p.offset[2]}, {0, S, H}));
    size_t i = 0;
    for (int64_t b = 0; b < p.shape[0]; ++b)
      for (int64_t s = 0; s < p.shape[1]; ++s)
        for (int64_t h = 0; h < p.shape[2]; ++h, ++i)
          ASSERT_EQ(out[i], whole[at(b + p.offset[0], s + p.offset[1], h + p.offset[2])]) << b << s << h;
  }
}

TEST(KernelsDropout, RateZeroCopiesAndOffMeansIdentity) {
  const Vec x = random_vec(77, 3);
  Vec y(x.size());
  cpu::apply_dropout(y.data(), x.data(), block(0.0f, kSeed, {7, 11}, {0, 0}, {0, 11}));
  EXPECT_EQ(y, x);
  megart::StepContext ctx{}; // evaluation: dropout off
  cpu::apply_dropout(y.data(), x.data(), megart::dropout_block(ctx, 0.5f, 2, {7, 11}, {0, 0}, {0, 11}));
  EXPECT_EQ(y, x);
  ctx.dropout.on = true;
  cpu::apply_dropout(y.data(), x.data(), megart::dropout_block(ctx, 0.5f, 2, {7, 11}, {0, 0}, {0, 11}));
  EXPECT_NE(y, x);
}

// The compiled site's helper: the step's key, layer and first sample place the block.
TEST(KernelsDropout, StepContextPlacesTheBlock) {
  megart::StepContext ctx{};
  ctx.dropout.on = true;
  ctx.dropout.iteration_key = megart::dropout_iteration_key(kSeed, 3);
  ctx.dropout.rank_first_sample = 4; // dp rank 1 of a global batch of 8
  ctx.dropout.micro_batch_size = 2;
  ctx = ctx.for_microbatch(1);
  EXPECT_EQ(ctx.dropout.first_sample, 6);
  const DropoutBlock b = megart::dropout_block(ctx.for_layer(2), 0.25f, 3, {2, 4, 8}, {0, 4, 0}, {0, 8, 8});
  EXPECT_EQ(b.key, megart::dropout_site_key(megart::dropout_iteration_key(kSeed, 3), 2, 3));
  EXPECT_EQ(b.offset[0], 6);
  EXPECT_EQ(b.offset[1], 4);
  EXPECT_EQ(b.rate, 0.25f);
  EXPECT_EQ(megart::dropout_block(ctx.for_microbatch(0), 0.25f, 3, {2, 4, 8}, {0, 4, 0}, {0, 8, 8}).offset[0], 4);
}

TEST(KernelsDropout, BackwardMatchesFiniteDifferencesOfForward) {
  const int64_t n = 300;
  const float rate = 0.25f;
  const Vec x = random_vec(n, 4), dy = random_vec(n, 5);
  Vec dx(n);
  // The backward is the forward's map applied to the gradient.
  cpu::apply_dropout(dx.data(), dy.data(), block(rate, kSeed, {n}, {17}, {0}));
  auto ref = [&](const DVec& v) {
    DVec y(v.size());
    for (size_t i = 0; i < v.size(); ++i)
      y[i] = v[i] * reference_scale(kSeed, 17 + i, rate);
    return y;
  };
  // Linear map: differences are exact to double rounding; the kernel rounds 1/(1-rate) to float.
  expect_close(dx, fd_grad(ref, to_double(x), to_double(dy)), 1e-6, "dropout backward");
}

TEST(KernelsDropout, IndependentOfThreadCountAndInPlace) {
  const int64_t n = 40000; // above the parallel threshold
  const Vec x = random_vec(n, 6);
  const int saved = omp_get_max_threads();
  Vec one(n), two = x;
  omp_set_num_threads(1);
  cpu::apply_dropout(one.data(), x.data(), block(0.1f, kSeed, {40, 1000}, {0, 0}, {0, 1000}));
  omp_set_num_threads(2);
  cpu::apply_dropout(two.data(), two.data(), block(0.1f, kSeed, {40, 1000}, {0, 0}, {0, 1000}));
  omp_set_num_threads(saved);
  EXPECT_EQ(one, two);
}

TEST(KernelsDropout, SixteenBitDropsTheSameElements) {
  const Vec x = random_vec(200, 8, 0.5f, 1.5f);
  std::vector<megart::bf16_t> xb(x.size()), yb(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    xb[i] = megart::from_float<megart::bf16_t>(x[i]);
  Vec y(x.size());
  const DropoutBlock b = block(0.2f, kSeed, {10, 20}, {0, 0}, {0, 20});
  cpu::apply_dropout(y.data(), x.data(), b);
  cpu::apply_dropout(yb.data(), xb.data(), b);
  for (size_t i = 0; i < x.size(); ++i) // kept: x / 0.8 rounded once to bf16
    EXPECT_EQ(megart::to_float(yb[i]),
              y[i] == 0.0f ? 0.0f : megart::to_float(megart::from_float<megart::bf16_t>(megart::to_float(xb[i]) * 1.25f)))
        << i;
}

TEST(KernelsDropout, BadBlocksThrow) {
  Vec x(4, 1.0f), y(4);
  for (float rate : {-0.1f, 1.0f, 1.5f, NAN})
    EXPECT_THROW(cpu::apply_dropout(y.data(), x.data(), block(rate, kSeed, {4}, {0}, {0})), megart::Error) << rate;
  EXPECT_THROW(cpu::apply_dropout(y.data(), x.data(), block(0.1f, kSeed, {1, 4}, {0, 1}, {0, 4})), megart::Error);
  EXPECT_THROW(cpu::apply_dropout(y.data(), x.data(), block(0.1f, kSeed, {}, {}, {})), megart::Error);
}

} // namespace
