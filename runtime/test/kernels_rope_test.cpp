#include "kernels_test_util.h"
#include "megart/kernels.h"

#include <cmath>
#include <string>

namespace {

using namespace megart::test;
namespace cpu = megart::cpu;

struct RopeShape {
  int64_t batch, seq, heads, head_dim, offset;
};

// The documented angle: HF's float32 steps (exponent, power, reciprocal, product).
double float_angle(int64_t pos, int64_t i, int64_t head_dim, float theta) {
  const float exponent = static_cast<float>(2 * i) / static_cast<float>(head_dim);
  const float inv = 1.0f / static_cast<float>(std::pow(static_cast<double>(theta), exponent));
  return static_cast<double>(static_cast<float>(pos) * inv);
}

// Double reference; float_angles picks the documented float32 angle or exact double math.
DVec ref_rope(const DVec& x, const RopeShape& s, float theta, bool inverse, bool float_angles) {
  DVec y(x.size());
  const int64_t half = s.head_dim / 2;
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t p = 0; p < s.seq; ++p)
      for (int64_t h = 0; h < s.heads; ++h)
        for (int64_t i = 0; i < half; ++i) {
          const int64_t pos = p + s.offset;
          double a = float_angles ? float_angle(pos, i, s.head_dim, theta)
                                  : pos * std::pow(double(theta), -2.0 * i / s.head_dim);
          if (inverse)
            a = -a;
          const int64_t base = ((b * s.seq + p) * s.heads + h) * s.head_dim;
          const double x1 = x[base + i], x2 = x[base + i + half];
          y[base + i] = x1 * std::cos(a) - x2 * std::sin(a);
          y[base + i + half] = x2 * std::cos(a) + x1 * std::sin(a);
        }
  return y;
}

const RopeShape kShapes[] = {{1, 1, 1, 2, 0}, {2, 5, 3, 8, 0}, {1, 9, 4, 6, 7}, {3, 4, 2, 64, 1000}};
constexpr float kTheta = 10000.0f;

int64_t numel(const RopeShape& s) { return s.batch * s.seq * s.heads * s.head_dim; }
std::string name(const RopeShape& s) {
  return std::to_string(s.batch) + "x" + std::to_string(s.seq) + "x" + std::to_string(s.heads) +
         "x" + std::to_string(s.head_dim) + "+" + std::to_string(s.offset);
}

TEST(KernelsRope, ForwardAndInverseMatchReference) {
  for (const RopeShape& s : kShapes)
    for (bool inverse : {false, true}) {
      const Vec x = random_vec(numel(s), 1);
      Vec y(x.size());
      cpu::rope_forward(y.data(), x.data(), s.batch, s.seq, s.heads, s.head_dim, kTheta, s.offset,
                        inverse);
      expect_close(y, ref_rope(to_double(x), s, kTheta, inverse, true), 1e-5,
                   "rope " + name(s) + (inverse ? " inverse" : ""));
    }
}

TEST(KernelsRope, MatchesExactAnglesAtSmallPositions) {
  // The float32 angle differs from the exact one by ~1e-7 relative, so at positions < 16 the
  // output stays within 1e-5 of exact double math (at position 1000 it would not, in HF too).
  const RopeShape s{2, 16, 2, 16, 0};
  const Vec x = random_vec(numel(s), 2);
  Vec y(x.size());
  cpu::rope_forward(y.data(), x.data(), s.batch, s.seq, s.heads, s.head_dim, 500000.0f, 0, false);
  expect_close(y, ref_rope(to_double(x), s, 500000.0f, false, false), 1e-5, "rope exact");
}

TEST(KernelsRope, InverseUndoesForward) {
  for (const RopeShape& s : kShapes) {
    const Vec x = random_vec(numel(s), 3);
    Vec y(x.size()), back(x.size());
    cpu::rope_forward(y.data(), x.data(), s.batch, s.seq, s.heads, s.head_dim, kTheta, s.offset,
                      false);
    cpu::rope_forward(back.data(), y.data(), s.batch, s.seq, s.heads, s.head_dim, kTheta,
                      s.offset, true);
    // Rotation by a float cos/sin pair is orthogonal up to ~1e-7.
    expect_close(back, to_double(x), 1e-6, "rope round trip " + name(s));
  }
}

TEST(KernelsRope, BackwardIsInverseAndMatchesFiniteDifferences) {
  for (const RopeShape& s : kShapes) {
    const Vec x = random_vec(numel(s), 4), dy = random_vec(numel(s), 5);
    Vec dx(x.size());
    cpu::rope_forward(dx.data(), dy.data(), s.batch, s.seq, s.heads, s.head_dim, kTheta,
                      s.offset, true);
    // Linear map: differences are exact up to double rounding; the kernel's dx carries two
    // float roundings per element.
    const DVec want = fd_grad(
        [&](const DVec& v) { return ref_rope(v, s, kTheta, false, true); }, to_double(x),
        to_double(dy));
    expect_close(dx, want, 1e-5, "rope backward " + name(s));
  }
}

// Linear rope scaling: positions divided by f. Position f x p with f rotates as position p
// without (f = 4: both float32 positions exact), and a divisor of 1 changes nothing.
TEST(KernelsRope, PositionDivisorScalesPositions) {
  const int64_t seq = 16, heads = 2, head_dim = 8;
  const Vec x = random_vec(seq * heads * head_dim, 7);
  Vec scaled(x.size()), plain(x.size()), same(x.size());
  cpu::rope_forward(scaled.data(), x.data(), 1, seq, heads, head_dim, kTheta, 0, false, 4.0f);
  cpu::rope_forward(plain.data(), x.data(), 1, seq, heads, head_dim, kTheta, 0, false);
  cpu::rope_forward(same.data(), x.data(), 1, seq, heads, head_dim, kTheta, 0, false, 1.0f);
  EXPECT_EQ(same, plain);
  for (int64_t p = 0; p < seq / 4; ++p) {
    // Row 4p of the scaled table against row p of the plain one, on x's row 4p.
    Vec one(static_cast<size_t>(heads * head_dim));
    cpu::rope_forward(one.data(), x.data() + 4 * p * heads * head_dim, 1, 1, heads, head_dim, kTheta, p, false);
    for (int64_t k = 0; k < heads * head_dim; ++k)
      EXPECT_EQ(scaled[static_cast<size_t>(4 * p * heads * head_dim + k)], one[static_cast<size_t>(k)])
          << "position " << 4 * p << " element " << k;
  }
  EXPECT_NE(scaled, plain); // and it does rotate differently
}

TEST(KernelsRope, InPlaceAndOddHeadDim) {
  const RopeShape s{2, 3, 2, 4, 5};
  const Vec x = random_vec(numel(s), 6);
  Vec want(x.size()), y = x;
  cpu::rope_forward(want.data(), x.data(), s.batch, s.seq, s.heads, s.head_dim, kTheta, s.offset,
                    false);
  cpu::rope_forward(y.data(), y.data(), s.batch, s.seq, s.heads, s.head_dim, kTheta, s.offset,
                    false);
  EXPECT_EQ(y, want);
  EXPECT_THROW(cpu::rope_forward(y.data(), x.data(), 1, 1, 1, 3, kTheta, 0, false), megart::Error);
}

} // namespace
