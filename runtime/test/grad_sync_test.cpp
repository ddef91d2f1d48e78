// Data-parallel buckets and the tensor-parallel gradient norm against a communicator that
// records what it is asked to do.
#include "megart/bf16.h"
#include "megart/grad_norm.h"
#include "megart/grad_sync.h"
#include "megart/optimizer.h"
#include "megart/param_store.h"

#include "kernels_test_util.h"
#include "train_test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace {

// Rank `rank` of `size`; all-reduces add nothing (as if the other ranks held zeros) but are
// recorded.
class RecordingComm final : public megart::Communicator {
public:
  RecordingComm(int rank, int size) : rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void all_reduce_sum(float *data, int64_t n) override { float_calls.push_back({data, n}); }
  void all_reduce_max(float *, int64_t) override {}
  void all_reduce_sum(double *, int64_t n) override { double_calls += n; }
  void all_gather(float *, const float *, int64_t) override {}
  void reduce_scatter_sum(float *, const float *, int64_t) override {}
  void broadcast(float *, int64_t, int) override {}
  void barrier() override {}

  std::vector<std::pair<float *, int64_t>> float_calls;
  int64_t double_calls = 0;

private:
  int rank_, size_;
};

} // namespace

// data[0, n) started in consecutive buckets of `bucket` elements, as a compiled sync starts them.
int64_t start_buckets(megart::GradSync &sync, float *data, int64_t n, int64_t bucket) {
  int64_t buckets = 0;
  for (int64_t first = 0; first < n; first += bucket, ++buckets)
    sync.start(data + first, std::min(bucket, n - first));
  return buckets;
}

TEST(GradSync, OneAllReducePerBucket) {
  std::vector<float> g(100);
  RecordingComm dp(0, 2);
  megart::GradSync sync(dp, megart::cpu_device());
  EXPECT_EQ(start_buckets(sync, g.data(), 100, 30), 4);
  EXPECT_EQ(sync.finish(), 4);
  ASSERT_EQ(dp.float_calls.size(), 4u);
  const int64_t sizes[] = {30, 30, 30, 10};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(dp.float_calls[i].first, g.data() + 30 * i);
    EXPECT_EQ(dp.float_calls[i].second, sizes[i]);
  }
  EXPECT_EQ(sync.finish(), 0); // finish forgets what it waited for
}

namespace {
// Rank 0 of 2 whose peer holds `other`: its sums add other's values at the same offset from
// `base`, in fp32 or (the bf16 sum) rounding the sum to bf16, as a 2-rank ring does.
class PeerAdds final : public megart::Communicator {
public:
  PeerAdds(const float *base, std::vector<float> other) : base_(base), other_(std::move(other)) {}
  int rank() const override { return 0; }
  int size() const override { return 2; }
  void all_reduce_sum(float *data, int64_t n) override {
    ++fp32_calls;
    for (int64_t i = 0; i < n; ++i)
      data[i] += other_[offset(data) + i];
  }
  void all_reduce_sum_bf16(uint16_t *data, int64_t n) override {
    ++bf16_calls;
    for (int64_t i = 0; i < n; ++i) // the bf16 scratch mirrors the float buffer's bucket order
      data[i] = megart::float_to_bf16(megart::bf16_to_float(data[i]) +
                                      megart::bf16_to_float(megart::float_to_bf16(other_[next_ + i])));
    next_ += n;
  }
  void all_reduce_max(float *, int64_t) override {}
  void all_reduce_sum(double *, int64_t) override {}
  void all_gather(float *, const float *, int64_t) override {}
  void reduce_scatter_sum(float *, const float *, int64_t) override {}
  void broadcast(float *, int64_t, int) override {}
  void barrier() override {}
  void next_iteration() { next_ = 0; }
  int fp32_calls = 0, bf16_calls = 0;

private:
  int64_t offset(const float *p) const { return p - base_; }
  const float *base_;
  std::vector<float> other_;
  int64_t next_ = 0;
};
} // namespace

// GradSync's side of the bf16 sum (the rounding of every partial sum is the communicators',
// MpiComm.Bf16SumsRoundEveryPartialSum): buckets go to the sum as bf16 and come back as fp32.
TEST(GradSync, Bf16SumsRoundTripThroughTheBf16Copy) {
  const int64_t n = 1000;
  const std::vector<float> mine = megart::test::random_vec(n, 11), other = megart::test::random_vec(n, 12);
  auto bf16 = [](float x) { return megart::bf16_to_float(megart::float_to_bf16(x)); };

  std::vector<float> fp32 = mine;
  PeerAdds fp32_peer(fp32.data(), other);
  megart::GradSync fp32_sync(fp32_peer, megart::cpu_device());
  start_buckets(fp32_sync, fp32.data(), n, 300);
  fp32_sync.finish();
  EXPECT_EQ(fp32_peer.bf16_calls, 0);
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(fp32[i], mine[i] + other[i]) << i;

  std::vector<float> g = mine;
  PeerAdds peer(g.data(), other);
  megart::GradSync sync(peer, megart::cpu_device());
  sync.reduce_in_bf16(g.data(), n);
  for (int iteration = 0; iteration < 2; ++iteration) {
    g = mine;
    peer.next_iteration();
    EXPECT_EQ(start_buckets(sync, g.data(), n, 300), 4);
    EXPECT_EQ(sync.finish(), 4);
    int64_t rounded = 0;
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(g[i], bf16(bf16(mine[i]) + bf16(other[i]))) << i;
      rounded += g[i] != fp32[i];
    }
    EXPECT_GT(rounded, n / 2) << "the sum was not taken in bf16";
  }
  EXPECT_EQ(peer.fp32_calls, 0);
  std::vector<float> elsewhere(4);
  EXPECT_THROW(sync.start(elsewhere.data(), 4), megart::Error); // not in the buffer given
  EXPECT_THROW(sync.start(g.data() + n - 2, 4), megart::Error); // runs past its end
}

TEST(GradSync, GradientsShareOneAlignedAllocation) {
  const train_test::Program p = train_test::bigram_program<2, true>(); // 3 params: 128, 128, 16
  megart::ParamStore store(p.params.data(), 3);
  const float *begin = store.flat_grads(), *end = begin + store.flat_grads_numel();
  for (int64_t i = 0; i < store.size(); ++i) {
    EXPECT_GE(store.grad(i), begin);
    EXPECT_LE(store.grad(i) + store.numel(i), end);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(store.grad(i)) % 64, 0u) << "grad " << i;
    EXPECT_EQ(store.grad_table()[i], store.grad(i));
  }
  store.grad(2)[3] = 1.0f;
  store.zero_grads();
  EXPECT_EQ(store.grad(2)[3], 0.0f);
}

TEST(GradNorm, ReplicatedParametersCountOnceOverTp) {
  // tp rank 1 of 2 holds rows 8..15 of w and the whole (replicated) bias b.
  const train_test::Program p = train_test::bigram_tp_program<2>(2);
  megart::ParamStore store(p.params.data(), 2, /*tp_rank=*/1, /*tp_size=*/2);
  EXPECT_TRUE(store.tp_split(0));
  EXPECT_FALSE(store.tp_split(1));
  EXPECT_EQ(store.desc(0).offsets[0], 8);
  std::fill(store.grad(0), store.grad(0) + store.numel(0), 0.5f);
  std::fill(store.grad(1), store.grad(1) + store.numel(1), 3.0f);
  RecordingComm rank1(1, 2), rank0(0, 2);
  // The recording all-reduce adds nothing: the result is this rank's share alone.
  EXPECT_DOUBLE_EQ(megart::model_grad_norm(store, rank1), std::sqrt(128 * 0.25));
  EXPECT_DOUBLE_EQ(megart::model_grad_norm(store, rank0), std::sqrt(128 * 0.25 + 16 * 9.0));
  EXPECT_EQ(rank1.double_calls, 1);
}

TEST(GradNorm, OneRankIsTheGlobalNorm) {
  const train_test::Program p = train_test::bigram_program<2, true>();
  megart::ParamStore store(p.params.data(), 3);
  std::vector<std::pair<const float *, int64_t>> all;
  for (int64_t i = 0; i < store.size(); ++i) {
    for (int64_t j = 0; j < store.numel(i); ++j)
      store.grad(i)[j] = 0.01f * static_cast<float>((i + 1) * (j % 7) - 3);
    all.emplace_back(store.grad(i), store.numel(i));
  }
  megart::SelfCommunicator self;
  EXPECT_EQ(megart::model_grad_norm(store, self), megart::global_grad_norm(all));
}
