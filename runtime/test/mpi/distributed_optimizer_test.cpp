// The distributed optimizer (ZeRO-1) against the plain path on the same ranks: gradients summed
// by all-reduce and AdamW applied to every whole parameter on every rank. Two steps, with
// padding between parameters and bucket ends, a bucket cutting through shards of several
// parameters, and parameters with and without weight decay.
#include "megart/distributed_optimizer.h"
#include "megart/error.h"

#include "mpi_test_util.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

namespace {

// Four parameters in reverse order, starts at multiples of 64, bucket ends at multiples of 128
// (lcm(d, 128) for d = 2 and 4): {3: 0..64, 2: 64..71, 1: 128..258 | pad to 384} {0: 384..389 | 512}.
megart::FlatLayout test_layout() {
  megart::FlatLayout l;
  l.param_numels = {5, 130, 7, 64};
  l.param_offsets = {384, 128, 64, 0};
  l.weight_decay = {0, 1, 0, 1};
  l.buckets = {{0, 384}, {384, 128}};
  l.numel = 512;
  return l;
}

// The flat buffers the state works on (a ParamStore's with a flat layout).
struct FlatBuffers {
  explicit FlatBuffers(const megart::FlatLayout &l)
      : params(megart::cpu_device(), l.numel * sizeof(float), megart::MemoryCategory::Parameters),
        grads(megart::cpu_device(), l.numel * sizeof(float), megart::MemoryCategory::Gradients) {}
  megart::DeviceBuffer params, grads;
};

float initial_param(int64_t i, int64_t j) { return std::sin(0.7f * i + 0.013f * j); }
float rank_grad(int r, int step, int64_t i, int64_t j) {
  return 0.01f * std::cos(1.3f * r + 0.5f * step + 0.3f * i + 0.021f * j) * (1 + r);
}

TEST(DistributedOptimizer, MatchesAllReduceAndFullAdamW) {
  auto group = mpi_test::world();
  const int r = group->rank(), d = group->size();
  const megart::FlatLayout layout = test_layout();
  FlatBuffers flat(layout);
  megart::DistributedOptimizerState sharded(layout, flat.params.as<float>(), flat.grads.as<float>(),
                                            *group, megart::cpu_device());
  EXPECT_EQ(sharded.shard_numel(), layout.numel / d);
  const int64_t n = static_cast<int64_t>(layout.param_numels.size());
  std::vector<std::vector<float>> params(n), exp_avg(n), exp_avg_sq(n);
  for (int64_t i = 0; i < n; ++i) {
    params[i].resize(layout.param_numels[i]);
    for (int64_t j = 0; j < layout.param_numels[i]; ++j)
      params[i][j] = sharded.param(i)[j] = initial_param(i, j);
    exp_avg[i].assign(layout.param_numels[i], 0.0f);
    exp_avg_sq[i].assign(layout.param_numels[i], 0.0f);
  }
  const megart::AdamWConfig config{0.9, 0.95, 1e-8, 0.1};
  megart::AdamWConfig no_decay = config;
  no_decay.weight_decay = 0;
  for (int step = 1; step <= 2; ++step) {
    megart::cpu_device().zero(flat.grads.data(), flat.grads.bytes());
    std::vector<std::vector<float>> grads(n);
    for (int64_t i = 0; i < n; ++i) {
      grads[i].resize(layout.param_numels[i]);
      for (int64_t j = 0; j < layout.param_numels[i]; ++j)
        grads[i][j] = sharded.grad(i)[j] = rank_grad(r, step, i, j);
      group->all_reduce_sum(grads[i].data(), layout.param_numels[i]);
    }
    // What the compiled sync does: each bucket reduce-scattered in place.
    for (const megart::FlatBucket &k : layout.buckets)
      group->reduce_scatter_sum(flat.grads.as<float>() + k.offset, flat.grads.as<float>() + k.offset, k.numel / d);
    // The pieces hold exactly this rank's share of every parameter's summed gradient.
    int64_t covered = 0;
    for (size_t k = 0; k < sharded.shard_grads().size(); ++k)
      covered += sharded.shard_grads()[k].second;
    std::vector<double> total{static_cast<double>(covered)};
    group->all_reduce_sum(total.data(), 1);
    EXPECT_EQ(total[0], 5 + 130 + 7 + 64) << "every parameter element in exactly one shard";
    const double lr = 1e-2;
    const auto with = megart::adamw_scalars(lr, config, step), without = megart::adamw_scalars(lr, no_decay, step);
    sharded.step(with, without);
    sharded.start_all_gather_params();
    sharded.wait_all();
    for (int64_t i = 0; i < n; ++i)
      megart::adamw_update(layout.weight_decay[i] ? with : without, params[i].data(), grads[i].data(),
                           exp_avg[i].data(), exp_avg_sq[i].data(), layout.param_numels[i]);
    // Two ranks add two numbers either way (bit-equal); with four the sums' order may differ.
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < layout.param_numels[i]; ++j) {
        if (d == 2)
          ASSERT_EQ(sharded.param(i)[j], params[i][j]) << "step " << step << " param " << i << " [" << j << "]";
        else
          ASSERT_NEAR(sharded.param(i)[j], params[i][j], 1e-6) << "step " << step << " param " << i << " [" << j << "]";
      }
  }
  // The moments gathered whole are the full AdamW's (a checkpoint writes them), and a state
  // given them whole keeps its shard: gathered again, they are the same.
  std::vector<float> avg(layout.numel), sq(layout.numel);
  sharded.all_gather_moments(avg.data(), sq.data());
  megart::DistributedOptimizerState loaded(layout, flat.params.as<float>(), flat.grads.as<float>(),
                                           *group, megart::cpu_device());
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < layout.param_numels[i]; ++j) {
      const int64_t at = layout.param_offsets[i] + j;
      if (d == 2) {
        ASSERT_EQ(avg[at], exp_avg[i][j]) << "param " << i << " [" << j << "]";
        ASSERT_EQ(sq[at], exp_avg_sq[i][j]) << "param " << i << " [" << j << "]";
      } else {
        ASSERT_NEAR(avg[at], exp_avg[i][j], 1e-7) << "param " << i << " [" << j << "]";
        ASSERT_NEAR(sq[at], exp_avg_sq[i][j], 1e-9) << "param " << i << " [" << j << "]";
      }
    }
    loaded.set_moment_pieces(i, false, avg.data() + layout.param_offsets[i]);
    loaded.set_moment_pieces(i, true, sq.data() + layout.param_offsets[i]);
  }
  std::vector<float> avg2(layout.numel), sq2(layout.numel);
  loaded.all_gather_moments(avg2.data(), sq2.data());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < layout.param_numels[i]; ++j) {
      const int64_t at = layout.param_offsets[i] + j;
      ASSERT_EQ(avg2[at], avg[at]) << "param " << i << " [" << j << "]";
      ASSERT_EQ(sq2[at], sq[at]) << "param " << i << " [" << j << "]";
    }
}

TEST(DistributedOptimizer, RefusesLayoutsThatDoNotShard) {
  auto group = mpi_test::world();
  FlatBuffers flat(test_layout());
  auto make = [&](const megart::FlatLayout &l) {
    megart::DistributedOptimizerState(l, flat.params.as<float>(), flat.grads.as<float>(), *group,
                                      megart::cpu_device());
  };
  megart::FlatLayout odd = test_layout();
  odd.buckets[1].numel = 127; // not a multiple of any group size > 1
  odd.numel = 511;
  EXPECT_THROW(make(odd), megart::Error);
  megart::FlatLayout outside = test_layout();
  outside.param_offsets[0] = 510; // 510..515 runs past the last bucket's end (512)
  EXPECT_THROW(make(outside), megart::Error);
  megart::FlatLayout overlap = test_layout();
  overlap.param_offsets[2] = 60; // 60..67 overlaps parameter 3 (0..64)
  EXPECT_THROW(make(overlap), megart::Error);
}

} // namespace
