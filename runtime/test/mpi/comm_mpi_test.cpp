// Every collective of MpiCommunicator against values computed by hand, on the whole world
// (2 or 4 ranks) and on groups of 2.
#include "megart/bf16.h"
#include "megart/comm_counting.h"
#include "megart/error.h"

#include "mpi_test_util.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

using ::testing::HasSubstr;

namespace {

constexpr int64_t kN = 5; // odd: no accidental alignment

void check_collectives(megart::Communicator &c) {
  const int r = c.rank(), n = c.size();
  const float fr = static_cast<float>(r);

  std::vector<float> sum(kN);
  for (int64_t i = 0; i < kN; ++i)
    sum[i] = fr + 1 + 0.5f * i;
  c.all_reduce_sum(sum.data(), kN);
  for (int64_t i = 0; i < kN; ++i)
    EXPECT_EQ(sum[i], n * (n + 1) / 2.0f + n * 0.5f * i) << "all_reduce_sum " << i;

  // Largest on rank 1 (not the first or the last rank): -10 (r - 1)^2 - i.
  std::vector<float> mx(kN);
  for (int64_t i = 0; i < kN; ++i)
    mx[i] = -10.0f * (fr - 1) * (fr - 1) - i;
  c.all_reduce_max(mx.data(), kN);
  for (int64_t i = 0; i < kN; ++i)
    EXPECT_EQ(mx[i], n > 1 ? -1.0f * i : -10.0f - i) << "all_reduce_max " << i;

  std::vector<double> dsum(kN);
  for (int64_t i = 0; i < kN; ++i)
    dsum[i] = 1e-3 * (r + 1) + 1e12 * i; // needs double: 1e12 + 1e-3 is lost in float
  c.all_reduce_sum(dsum.data(), kN);
  for (int64_t i = 0; i < kN; ++i)
    EXPECT_NEAR(dsum[i], 1e-3 * n * (n + 1) / 2 + 1e12 * n * i, 1e-4) << "double sum " << i;

  std::vector<float> in(kN), gathered(kN * n, -1);
  for (int64_t i = 0; i < kN; ++i)
    in[i] = 100.0f * fr + i;
  c.all_gather(gathered.data(), in.data(), kN);
  for (int q = 0; q < n; ++q)
    for (int64_t i = 0; i < kN; ++i)
      EXPECT_EQ(gathered[q * kN + i], 100.0f * q + i) << "all_gather chunk " << q;
  // In place: this rank's chunk already sits at out + rank * n.
  std::vector<float> inplace(kN * n, -1);
  std::copy(in.begin(), in.end(), inplace.begin() + r * kN);
  c.all_gather(inplace.data(), inplace.data() + r * kN, kN);
  EXPECT_EQ(inplace, gathered);

  // Chunk q of every rank's input is summed into rank q's output.
  std::vector<float> rs_in(kN * n), rs_out(kN, -1);
  for (int q = 0; q < n; ++q)
    for (int64_t i = 0; i < kN; ++i)
      rs_in[q * kN + i] = 1000.0f * (fr + 1) + 10.0f * q + i;
  c.reduce_scatter_sum(rs_out.data(), rs_in.data(), kN);
  for (int64_t i = 0; i < kN; ++i)
    EXPECT_EQ(rs_out[i], 1000.0f * n * (n + 1) / 2 + n * (10.0f * r + i)) << "reduce_scatter " << i;
  c.reduce_scatter_sum(rs_in.data(), rs_in.data(), kN); // in place: result in the first chunk
  EXPECT_EQ(std::vector<float>(rs_in.begin(), rs_in.begin() + kN), rs_out);

  // Rank r sends q + r elements (100 r + 10 q + i) to rank q: none from rank 0 to rank 0.
  std::vector<int64_t> send_counts(n), recv_counts(n);
  std::vector<float> a2a_in, a2a_expected;
  for (int q = 0; q < n; ++q) {
    send_counts[q] = q + r, recv_counts[q] = r + q;
    for (int64_t i = 0; i < q + r; ++i) {
      a2a_in.push_back(100.0f * fr + 10.0f * q + i);
      a2a_expected.push_back(100.0f * q + 10.0f * fr + i);
    }
  }
  std::vector<float> a2a_out(a2a_expected.size(), -1);
  c.all_to_all_v(a2a_in.data(), send_counts.data(), a2a_out.data(), recv_counts.data());
  EXPECT_EQ(a2a_out, a2a_expected) << "all_to_all_v";
  std::vector<int32_t> ints_in(2 * n), ints_out(2 * n, -1), ints_expected(2 * n);
  for (int q = 0; q < n; ++q)
    for (int i = 0; i < 2; ++i)
      ints_in[2 * q + i] = 1000 * r + 10 * q + i, ints_expected[2 * q + i] = 1000 * q + 10 * r + i;
  c.all_to_all(ints_in.data(), ints_out.data(), 2);
  EXPECT_EQ(ints_out, ints_expected) << "all_to_all";

  const int root = n - 1;
  std::vector<float> b(kN, r == root ? 7.5f : -1.0f);
  c.broadcast(b.data(), kN, root);
  EXPECT_EQ(b, std::vector<float>(kN, 7.5f));

  c.barrier();
}

} // namespace

TEST(MpiComm, CollectivesOnTheWorld) {
  auto w = mpi_test::world();
  EXPECT_EQ(w->size(), mpi_test::world_size());
  EXPECT_EQ(w->rank(), mpi_test::world_rank());
  check_collectives(*w);
}

TEST(MpiComm, CollectivesOnGroupsOfTwo) {
  if (mpi_test::world_size() % 2 != 0)
    GTEST_SKIP() << "needs an even number of ranks";
  auto pair = mpi_test::group_of(2);
  EXPECT_EQ(pair->size(), 2);
  EXPECT_EQ(pair->rank(), mpi_test::world_rank() % 2);
  EXPECT_EQ(pair->axis(), "group of 2");
  check_collectives(*pair);
}

TEST(MpiComm, LongAllReduceAndEmptyCalls) {
  auto w = mpi_test::world();
  std::vector<float> big(1 << 20, 1.0f);
  w->all_reduce_sum(big.data(), static_cast<int64_t>(big.size()));
  EXPECT_EQ(big.front(), static_cast<float>(w->size()));
  EXPECT_EQ(big.back(), static_cast<float>(w->size()));
  w->all_reduce_sum(big.data(), 0); // nothing to do, nothing fails
}

TEST(MpiComm, ErrorsNameTheCallAndTheAxis) {
  auto pair = mpi_test::world()->split(0, mpi_test::world_rank(), "tp");
  float x = 0;
  try {
    pair->broadcast(&x, 1, pair->size());
    FAIL() << "broadcast from a rank outside the axis";
  } catch (const megart::Error &e) {
    EXPECT_THAT(e.what(), HasSubstr("broadcast over the tp axis from root " +
                                    std::to_string(pair->size())));
  }
  try {
    pair->all_gather(&x, &x, int64_t{1} << 32);
    FAIL() << "an all_gather beyond MPI's int count";
  } catch (const megart::Error &e) {
    EXPECT_THAT(e.what(), HasSubstr("all_gather over the tp axis got 4294967296 elements"));
  }
}

void ring_sums(int64_t n);

TEST(MpiComm, LargeAllReduceSumsOnTheRing) {
  // Large float sums take the ring; an odd size leaves chunks of different lengths, and chunks
  // past 64 Ki floats pass in several slices (the last one short).
  for (const int64_t n : {int64_t{100003}, int64_t{300007}}) {
    SCOPED_TRACE(n);
    ring_sums(n);
  }
}

void ring_sums(int64_t n) {
  auto w = mpi_test::world();
  const int r = w->rank(), p = w->size();
  std::vector<float> exact(n), inexact(n);
  for (int64_t i = 0; i < n; ++i) {
    exact[i] = static_cast<float>((i % 1000) * (r + 1));
    inexact[i] = 1.0f / static_cast<float>(1 + (i * 7 + r * 13) % 101);
  }
  w->all_reduce_sum(exact.data(), n);
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(exact[i], static_cast<float>((i % 1000) * p * (p + 1) / 2)) << i;
  w->all_reduce_sum(inexact.data(), n);
  for (int64_t i = 0; i < n; i += 997) {
    double sum = 0;
    for (int q = 0; q < p; ++q)
      sum += 1.0 / (1 + (i * 7 + q * 13) % 101);
    EXPECT_NEAR(inexact[i], sum, 1e-5) << i;
  }
  // Every rank ends with the same bits (replicas must not drift apart).
  std::vector<float> root = inexact;
  w->broadcast(root.data(), n, 0);
  EXPECT_EQ(root, inexact);
}

TEST(MpiComm, Bf16SumsRoundEveryPartialSum) {
  auto w = mpi_test::world();
  const int r = w->rank(), p = w->size();
  for (const int64_t n : {int64_t{3}, int64_t{100003}}) { // fewer elements than ranks, and many
    std::vector<uint16_t> exact(n), inexact(n);
    auto value = [](int64_t i, int q) { return 1.0f + 1.0f / static_cast<float>(3 + (i * 7 + q * 13) % 101); };
    for (int64_t i = 0; i < n; ++i) {
      exact[i] = megart::float_to_bf16(static_cast<float>((i % 20) * (r + 1))); // sums <= 190: exact in bf16
      inexact[i] = megart::float_to_bf16(value(i, r));
    }
    w->all_reduce_sum_bf16(exact.data(), n);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(megart::bf16_to_float(exact[i]), static_cast<float>((i % 20) * p * (p + 1) / 2)) << i;
    w->all_reduce_sum_bf16(inexact.data(), n);
    int64_t differs_from_fp32_sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      float fp32 = 0;
      double exact_sum = 0;
      for (int q = 0; q < p; ++q) {
        fp32 += megart::bf16_to_float(megart::float_to_bf16(value(i, q)));
        exact_sum += megart::bf16_to_float(megart::float_to_bf16(value(i, q)));
      }
      const float got = megart::bf16_to_float(inexact[i]);
      if (p == 2) // one addition, whatever the order: the bf16 rounding of the exact sum
        ASSERT_EQ(got, megart::bf16_to_float(megart::float_to_bf16(fp32))) << i;
      // p - 1 roundings of at most half a bf16 ulp (2^-8 relative) each.
      ASSERT_NEAR(got, exact_sum, exact_sum * (p - 1) * 0x1p-8) << i;
      differs_from_fp32_sum += got != fp32;
    }
    if (n > 1000)
      EXPECT_GT(differs_from_fp32_sum, n / 4) << "the sums were not rounded to bf16";
    // Every rank ends with the same bits.
    std::vector<float> mine(inexact.begin(), inexact.end()), root = mine;
    w->broadcast(root.data(), n, 0);
    EXPECT_EQ(root, mine);
  }
}

TEST(MpiComm, LargeAllGatherOnTheRing) {
  auto w = mpi_test::world();
  const int64_t n = 20001;
  const int r = w->rank(), p = w->size();
  std::vector<float> in(n), out(n * p, -1), expected(n * p);
  for (int64_t i = 0; i < n; ++i)
    in[i] = static_cast<float>(r * 100000 + i);
  for (int q = 0; q < p; ++q)
    for (int64_t i = 0; i < n; ++i)
      expected[q * n + i] = static_cast<float>(q * 100000 + i);
  w->all_gather(out.data(), in.data(), n);
  EXPECT_EQ(out, expected);
  std::vector<float> inplace(n * p, -1);
  std::copy(in.begin(), in.end(), inplace.begin() + r * n);
  w->all_gather(inplace.data(), inplace.data() + r * n, n);
  EXPECT_EQ(inplace, expected);
  // The input overlapping the output elsewhere than in place (it starts at chunk 0).
  std::vector<float> shifted(n * p, -1);
  std::copy(in.begin(), in.end(), shifted.begin());
  w->all_gather(shifted.data(), shifted.data(), n);
  EXPECT_EQ(shifted, expected);
}

// The bytes a rank sends, as comm_counting.h counts them: 2 (p-1)/p of an all-reduce, (p-1)/p of
// the whole of a reduce-scatter or all-gather, a send's own bytes, nothing for a receive.
TEST(CountingCommunicator, CountsWhatARingSends) {
  auto w = mpi_test::world();
  const int p = w->size(), r = w->rank();
  double sent = 0;
  megart::CountingCommunicator c(mpi_test::world(), &sent);
  std::vector<float> a(12 * p, 1.0f), out(12 * p);
  std::vector<double> d(3, 1.0);
  c.all_reduce_sum(a.data(), 10);
  EXPECT_DOUBLE_EQ(sent, 2.0 * (p - 1) / p * 40);
  c.all_reduce_sum(d.data(), 3);
  EXPECT_DOUBLE_EQ(sent, 2.0 * (p - 1) / p * (40 + 24));
  sent = 0;
  c.reduce_scatter_sum(out.data(), a.data(), 12); // 12 floats each, 12 p in all
  c.all_gather(out.data(), a.data(), 12);
  EXPECT_DOUBLE_EQ(sent, 2.0 * (p - 1) / p * 12 * p * 4);
  sent = 0;
  if (p > 1) {
    const int right = (r + 1) % p, left = (r + p - 1) % p;
    auto recv = c.irecv(out.data(), 5, left, 7);
    auto send = c.isend(a.data(), 5, right, 7);
    c.wait(*recv);
    c.wait(*send);
  }
  EXPECT_DOUBLE_EQ(sent, p > 1 ? 20.0 : 0.0);
}
