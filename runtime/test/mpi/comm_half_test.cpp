// The 16-bit (bf16_t / fp16_t) collectives of MpiCommunicator against references computed here,
// the axis collectives on them, and what CountingCommunicator counts for them (2 bytes each).
#include "megart/comm_counting.h"
#include "megart/half.h"
#include "megart/parallel_kernels.h"

#include "mpi_test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <type_traits>
#include <vector>

namespace {

using megart::bf16_t;
using megart::fp16_t;
using megart::from_float;
using megart::to_float;

template <typename T> float rounded(float x) { return to_float(from_float<T>(x)); }

// The bits of 16-bit values, to compare vectors of them.
template <typename T> std::vector<uint16_t> bits(const std::vector<T> &v) {
  std::vector<uint16_t> b(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    b[i] = v[i].bits;
  return b;
}

// Rank 0's bits, broadcast (as floats, which hold any uint16_t exactly).
template <typename T> std::vector<uint16_t> root_bits(megart::Communicator &c, const std::vector<T> &v) {
  std::vector<float> f(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    f[i] = v[i].bits;
  c.broadcast(f.data(), static_cast<int64_t>(f.size()), 0);
  std::vector<uint16_t> b(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    b[i] = static_cast<uint16_t>(f[i]);
  return b;
}

template <typename T> class MpiCommHalf : public ::testing::Test {};
using HalfTypes = ::testing::Types<bf16_t, fp16_t>;
TYPED_TEST_SUITE(MpiCommHalf, HalfTypes);

// A value with more bits than T keeps: sums of them round.
float inexact(int64_t i, int q) { return 1.0f + 1.0f / static_cast<float>(3 + (i * 7 + q * 13) % 101); }

TYPED_TEST(MpiCommHalf, AllGather) {
  using T = TypeParam;
  auto w = mpi_test::world();
  const int r = w->rank(), p = w->size();
  for (const int64_t n : {int64_t{5}, int64_t{70001}}) {
    std::vector<T> in(n), out(n * p), want(n * p);
    for (int64_t i = 0; i < n; ++i)
      in[i] = from_float<T>(inexact(i, r));
    for (int q = 0; q < p; ++q)
      for (int64_t i = 0; i < n; ++i)
        want[q * n + i] = from_float<T>(inexact(i, q));
    w->all_gather(out.data(), in.data(), n);
    EXPECT_EQ(bits(out), bits(want)) << "n = " << n;
    std::vector<T> inplace(n * p);
    std::copy(in.begin(), in.end(), inplace.begin() + r * n);
    w->all_gather(inplace.data(), inplace.data() + r * n, n);
    EXPECT_EQ(bits(inplace), bits(want)) << "in place, n = " << n;
  }
}

TYPED_TEST(MpiCommHalf, ReduceScatterSum) {
  using T = TypeParam;
  auto w = mpi_test::world();
  const int r = w->rank(), p = w->size();
  // 70001 > one slice of the ring (65536 elements).
  for (const int64_t n : {int64_t{1}, int64_t{5}, int64_t{70001}}) {
    // Small integers: every partial sum is exact in T.
    std::vector<T> exact(n * p), out(n);
    for (int c = 0; c < p; ++c)
      for (int64_t i = 0; i < n; ++i)
        exact[c * n + i] = from_float<T>(static_cast<float>(((i + c) % 8) * (r + 1)));
    w->reduce_scatter_sum(out.data(), exact.data(), n);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(to_float(out[i]), static_cast<float>(((i + r) % 8) * p * (p + 1) / 2)) << i;

    // Inexact values, in place: chunk c is summed around the ring from rank c + 1 to rank c,
    // adding in fp32 and rounding to T at every hop.
    std::vector<T> data(n * p);
    for (int c = 0; c < p; ++c)
      for (int64_t i = 0; i < n; ++i)
        data[c * n + i] = from_float<T>(inexact(i + c, r));
    w->reduce_scatter_sum(data.data(), data.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      float acc = rounded<T>(inexact(i + r, (r + 1) % p));
      double exact_sum = acc;
      for (int j = 2; j <= p; ++j) {
        const float x = rounded<T>(inexact(i + r, (r + j) % p));
        acc = rounded<T>(acc + x);
        exact_sum += x;
      }
      ASSERT_EQ(to_float(data[i]), acc) << i;
      const double ulp = std::is_same_v<T, bf16_t> ? 0x1p-8 : 0x1p-11;
      ASSERT_NEAR(to_float(data[i]), exact_sum, exact_sum * (p - 1) * ulp) << i;
    }
  }
}

TYPED_TEST(MpiCommHalf, AllReduceSum) {
  using T = TypeParam;
  auto w = mpi_test::world();
  const int r = w->rank(), p = w->size();
  for (const int64_t n : {int64_t{3}, int64_t{100003}}) {
    std::vector<T> exact(n), sum(n);
    for (int64_t i = 0; i < n; ++i) {
      exact[i] = from_float<T>(static_cast<float>((i % 20) * (r + 1))); // sums <= 200: exact in T
      sum[i] = from_float<T>(inexact(i, r));
    }
    w->all_reduce_sum(exact.data(), n);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(to_float(exact[i]), static_cast<float>((i % 20) * p * (p + 1) / 2)) << i;
    w->all_reduce_sum(sum.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      double exact_sum = 0;
      float fp32 = 0;
      for (int q = 0; q < p; ++q) {
        exact_sum += rounded<T>(inexact(i, q));
        fp32 += rounded<T>(inexact(i, q));
      }
      if (p == 2) // one addition: the rounding of the exact sum
        ASSERT_EQ(to_float(sum[i]), rounded<T>(fp32)) << i;
      const double ulp = std::is_same_v<T, bf16_t> ? 0x1p-8 : 0x1p-11;
      ASSERT_NEAR(to_float(sum[i]), exact_sum, exact_sum * (p - 1) * ulp) << i;
    }
    EXPECT_EQ(root_bits(*w, sum), bits(sum)) << "every rank ends with the same bits";
  }
}

TEST(MpiCommHalf, LegacyBf16SumIsTheTypedOne) {
  auto w = mpi_test::world();
  const int64_t n = 20003;
  std::vector<bf16_t> typed(n);
  std::vector<uint16_t> legacy(n);
  for (int64_t i = 0; i < n; ++i) {
    typed[i] = from_float<bf16_t>(inexact(i, w->rank()));
    legacy[i] = typed[i].bits;
  }
  w->all_reduce_sum(typed.data(), n);
  w->all_reduce_sum_bf16(legacy.data(), n);
  EXPECT_EQ(bits(typed), legacy);
}

// The axis collectives on [outer, dim, inner] tensors, against the float ones on the widened
// values (exact sums, so the reduce-scatter has one right answer).
TYPED_TEST(MpiCommHalf, AxisCollectives) {
  using T = TypeParam;
  auto w = mpi_test::world();
  const int r = w->rank(), p = w->size();
  const int64_t outer = 3, dim = 2, inner = 5, local = outer * dim * inner, whole = local * p;
  std::vector<T> in(local), gathered(whole), partial(whole), scattered(local), sliced(local);
  std::vector<float> in_f(local), gathered_f(whole), partial_f(whole), scattered_f(local), sliced_f(local);
  for (int64_t i = 0; i < local; ++i) {
    in[i] = from_float<T>(inexact(i, r));
    in_f[i] = to_float(in[i]);
  }
  for (int64_t i = 0; i < whole; ++i) {
    partial[i] = from_float<T>(static_cast<float>((i % 7) * (r + 1)));
    partial_f[i] = to_float(partial[i]);
  }
  megart::cpu::all_gather_axis(*w, gathered.data(), in.data(), outer, dim, inner);
  megart::cpu::all_gather_axis(*w, gathered_f.data(), in_f.data(), outer, dim, inner);
  megart::cpu::reduce_scatter_axis(*w, scattered.data(), partial.data(), outer, dim, inner);
  megart::cpu::reduce_scatter_axis(*w, scattered_f.data(), partial_f.data(), outer, dim, inner);
  megart::cpu::all_slice_axis(*w, sliced.data(), partial.data(), outer, dim, inner);
  megart::cpu::all_slice_axis(*w, sliced_f.data(), partial_f.data(), outer, dim, inner);
  for (int64_t i = 0; i < whole; ++i)
    ASSERT_EQ(to_float(gathered[i]), gathered_f[i]) << "all_gather_axis " << i;
  for (int64_t i = 0; i < local; ++i) {
    ASSERT_EQ(to_float(scattered[i]), scattered_f[i]) << "reduce_scatter_axis " << i;
    ASSERT_EQ(to_float(sliced[i]), sliced_f[i]) << "all_slice_axis " << i;
  }
}

TYPED_TEST(MpiCommHalf, CountingCountsTwoBytesPerElement) {
  using T = TypeParam;
  const int p = mpi_test::world_size();
  double sent = 0;
  megart::CountingCommunicator c(mpi_test::world(), &sent);
  const int64_t n = 1000;
  std::vector<T> in(n * p, from_float<T>(1.0f)), out(n * p);
  c.all_gather(out.data(), in.data(), n);
  EXPECT_DOUBLE_EQ(sent, megart::gather_bytes(2.0 * n * p, p));
  sent = 0;
  c.reduce_scatter_sum(out.data(), in.data(), n);
  EXPECT_DOUBLE_EQ(sent, megart::gather_bytes(2.0 * n * p, p));
  EXPECT_EQ(to_float(out[0]), static_cast<float>(p));
  sent = 0;
  c.all_reduce_sum(in.data(), n);
  EXPECT_DOUBLE_EQ(sent, megart::all_reduce_bytes(2.0 * n, p));
  EXPECT_EQ(to_float(in[0]), static_cast<float>(p));
}

} // namespace
