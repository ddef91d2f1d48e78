// ParamStore with a flat layout (the distributed optimizer's buffers) on one rank: where the
// parameters and gradients live, what it allocates, and that its checkpoint files are the ones
// a store without the layout writes. The sharding over several ranks: mpi/train_zero1_test.cpp.
#include "megart/param_store.h"
#include "megart/safetensors.h"

#include "expect_error.h"
#include "flat_programs.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

using megart::MemoryCategory;
using megart::ParamStore;
using train_test::TempDir;

namespace {

int64_t held(MemoryCategory c) { return megart::memory_tracker().usage().current_of(c); }

std::vector<float> values(const float *p, int64_t n) { return std::vector<float>(p, p + n); }

} // namespace

TEST(ParamStoreFlat, ParametersAndGradientsSitAtTheLayoutsOffsets) {
  flat_test::FlatProgram f;
  flat_test::make_bigram<flat_test::kOneBucket>(f, 1);
  megart::SelfCommunicator self;
  const int64_t params0 = held(MemoryCategory::Parameters), grads0 = held(MemoryCategory::Gradients),
                state0 = held(MemoryCategory::OptimizerState), comm0 = held(MemoryCategory::Communication);
  {
    ParamStore store(f.p.params.data(), 2, 0, 1, megart::cpu_device(), &f.layout, &self);
    // Exactly the two flat buffers and the (here unsharded) moments: megac's prediction.
    EXPECT_EQ(held(MemoryCategory::Parameters) - params0, 384 * 4);
    EXPECT_EQ(held(MemoryCategory::Gradients) - grads0, 384 * 4);
    EXPECT_EQ(held(MemoryCategory::OptimizerState) - state0, 2 * 384 * 4);
    ASSERT_NE(store.sharded(), nullptr);
    EXPECT_EQ(store.flat_grads_numel(), 384);
    EXPECT_EQ(store.param(0) - store.param(1), 64); // w at 64, b at 0
    EXPECT_EQ(store.grad(0), store.flat_grads() + 64);
    EXPECT_EQ(store.grad(1), store.flat_grads());
    EXPECT_EQ(store.sharded()->param(0), store.param(0));
    EXPECT_EQ(store.numel(0), 256);
    EXPECT_THROW(store.exp_avg(0), megart::Error);

    // The same weights as a store without the layout, padding zero.
    ParamStore plain(f.p.params.data(), 2);
    store.init(5);
    plain.init(5);
    for (int64_t i = 0; i < 2; ++i)
      EXPECT_EQ(values(store.param(i), store.numel(i)), values(plain.param(i), plain.numel(i)));
    const float *base = store.param(1);
    EXPECT_EQ(values(base + 16, 48), std::vector<float>(48, 0.0f));
    EXPECT_EQ(values(base + 320, 64), std::vector<float>(64, 0.0f));

    // A checkpoint needs the moments whole: gathered (Communication memory) until released.
    EXPECT_THROW(store.gather_tensors(self, megart::StateArray::ExpAvg), megart::Error);
    store.gather_sharded_state();
    EXPECT_EQ(held(MemoryCategory::Communication) - comm0, 2 * 384 * 4);
    EXPECT_EQ(store.gather_tensors(self, megart::StateArray::ExpAvgSq),
              plain.gather_tensors(self, megart::StateArray::ExpAvgSq));
    store.release_gathered_state();
    EXPECT_EQ(held(MemoryCategory::Communication) - comm0, 0);
  }
  EXPECT_EQ(held(MemoryCategory::Parameters), params0);
  EXPECT_EQ(held(MemoryCategory::OptimizerState), state0);
}

TEST(ParamStoreFlat, SavesAndLoadsWhatAStoreWithoutTheLayoutDoes) {
  TempDir dir;
  flat_test::FlatProgram f;
  flat_test::make_bigram<flat_test::kTwoBuckets>(f, 1);
  megart::SelfCommunicator self;
  ParamStore store(f.p.params.data(), 2, 0, 1, megart::cpu_device(), &f.layout, &self);
  ParamStore plain(f.p.params.data(), 2);
  plain.init(3);
  plain.save(dir / "plain.safetensors");
  store.load(dir / "plain.safetensors");
  store.save(dir / "flat.safetensors");
  EXPECT_EQ(train_test::file_bytes(dir / "flat.safetensors"),
            train_test::file_bytes(dir / "plain.safetensors"));
  for (int64_t i = 0; i < 2; ++i)
    EXPECT_EQ(values(store.param(i), store.numel(i)), values(plain.param(i), plain.numel(i)));

  // Moments: whole tensors in, the shard (here all of it) kept, whole tensors out.
  std::vector<float> w_avg(256), w_sq(256), b_avg(16), b_sq(16);
  for (size_t k = 0; k < w_avg.size(); ++k) {
    w_avg[k] = 0.001f * static_cast<float>(k);
    w_sq[k] = 0.002f * static_cast<float>(k);
  }
  for (size_t k = 0; k < b_avg.size(); ++k) {
    b_avg[k] = -0.5f * static_cast<float>(k);
    b_sq[k] = 0.25f * static_cast<float>(k);
  }
  megart::write_safetensors(dir / "optimizer.safetensors",
                            {{"w.exp_avg", {16, 16}, w_avg.data()},
                             {"w.exp_avg_sq", {16, 16}, w_sq.data()},
                             {"b.exp_avg", {16}, b_avg.data()},
                             {"b.exp_avg_sq", {16}, b_sq.data()}});
  store.load_optimizer_state(dir / "optimizer.safetensors");
  store.gather_sharded_state();
  const auto avg = store.gather_tensors(self, megart::StateArray::ExpAvg);
  const auto sq = store.gather_tensors(self, megart::StateArray::ExpAvgSq);
  store.release_gathered_state();
  ASSERT_EQ(store.tensors()[0].name, "w"); // table order
  EXPECT_EQ(avg[0], w_avg);
  EXPECT_EQ(avg[1], b_avg);
  EXPECT_EQ(sq[0], w_sq);
  EXPECT_EQ(sq[1], b_sq);
}

// ZeRO-3 (optim_grads_params): the parameters live in the shard buffer (all of it on one rank),
// laid out as the gradient shards; a checkpoint gathers them, and loads keep this rank's pieces.
TEST(ParamStoreFlat, Zero3KeepsTheParametersInTheShardBuffer) {
  TempDir dir;
  flat_test::FlatProgram f;
  flat_test::make_bigram<flat_test::kTwoBuckets>(f, 1);
  f.layout.sharding = megart::DataParallelSharding::OptimGradsParams;
  megart::SelfCommunicator self;
  const int64_t params0 = held(MemoryCategory::Parameters), comm0 = held(MemoryCategory::Communication);
  ParamStore store(f.p.params.data(), 2, 0, 1, megart::cpu_device(), &f.layout, &self);
  EXPECT_EQ(held(MemoryCategory::Parameters) - params0, 384 * 4);
  ASSERT_TRUE(store.params_sharded());
  EXPECT_EQ(store.param(0), nullptr);
  EXPECT_EQ(store.grad(0), nullptr);
  ParamStore plain(f.p.params.data(), 2);
  plain.init(7);
  store.init(7);
  // b's bucket (0..128) then w's (128..384): at d = 1 the shards are the layout itself.
  EXPECT_EQ(values(store.flat_params() + 128, 256), values(plain.param(0), 256));
  EXPECT_EQ(values(store.flat_params(), 16), values(plain.param(1), 16));
  EXPECT_THROW(store.save(dir / "x.safetensors"), megart::Error); // not gathered
  store.gather_sharded_state();
  EXPECT_EQ(held(MemoryCategory::Communication) - comm0, 3 * 384 * 4); // moments and parameters
  store.save(dir / "zero3.safetensors");
  store.release_gathered_state();
  EXPECT_EQ(held(MemoryCategory::Communication) - comm0, 0);
  plain.save(dir / "plain.safetensors");
  EXPECT_EQ(train_test::file_bytes(dir / "zero3.safetensors"), train_test::file_bytes(dir / "plain.safetensors"));
  plain.init(8);
  plain.save(dir / "other.safetensors");
  store.load(dir / "other.safetensors");
  EXPECT_EQ(values(store.flat_params() + 128, 256), values(plain.param(0), 256));
}

TEST(ParamStoreFlat, RefusesALayoutThatDoesNotFit) {
  megart::SelfCommunicator self;
  auto make = [&](const megart::FlatLayoutDesc &layout, megart::Communicator *group) {
    const train_test::Program p = train_test::bigram_program<2>();
    ParamStore store(p.params.data(), 2, 0, 1, megart::cpu_device(), &layout, group);
  };
  const megart::FlatLayoutDesc good = flat_test::layout_desc<flat_test::kOneBucket>(1);
  expect_error([&] { make(good, nullptr); }, {"flat_layout", "no shard group"});
  megart::FlatLayoutDesc two = good;
  two.shard_degree = 2;
  expect_error([&] { make(two, &self); }, {"shard_degree is 2", "group has 1 ranks"});
  const int64_t unaligned[] = {72, 0};
  megart::FlatLayoutDesc odd = good;
  odd.param_offsets = unaligned;
  expect_error([&] { make(odd, &self); }, {"parameter 0 ('w') starts at element 72", "64 bytes"});
  const int64_t outside[] = {192, 0}; // w at 192..448 runs past the 384-element bucket
  megart::FlatLayoutDesc past = good;
  past.param_offsets = outside;
  expect_error([&] { make(past, &self); }, {"lies in no single bucket"});
}

// Expert parallelism: an expert bucket shards over the expert-data-parallel group, which must be
// given and be expert_shard_degree ranks; the shards follow each other in bucket order.
TEST(ParamStoreFlat, ExpertBucketsShardOverTheirOwnGroup) {
  megart::SelfCommunicator self;
  const train_test::Program p = train_test::bigram_program<2>();
  const megart::FlatBucket buckets[] = {{0, 128}, {128, 256, /*experts=*/true}}; // kTwoBuckets', the second experts
  megart::FlatLayoutDesc layout = flat_test::layout_desc<flat_test::kTwoBuckets>(1);
  layout.buckets = buckets;
  auto make = [&](const megart::FlatLayoutDesc &l, megart::Communicator *experts) {
    return ParamStore(p.params.data(), 2, 0, 1, megart::cpu_device(), &l, &self, 0, 1, experts);
  };
  expect_error([&] { make(layout, &self); }, {"bucket 1 holds experts", "no expert-data-parallel group"});
  megart::FlatLayoutDesc three = layout;
  three.expert_shard_degree = 3;
  expect_error([&] { make(three, &self); }, {"expert_shard_degree is 3", "expert-data-parallel group has 1 ranks"});
  layout.expert_shard_degree = 1;
  expect_error([&] { make(layout, nullptr); }, {"expert_shard_degree is 1", "no expert-data-parallel group"});
  const ParamStore store = make(layout, &self);
  const megart::DistributedOptimizerState &state = *store.sharded();
  EXPECT_EQ(state.shard_numel(), 384);
  EXPECT_EQ(state.shard_offset(0), 0);
  EXPECT_EQ(state.shard_offset(1), 128);
  EXPECT_EQ(&state.group_of(1), &self);
}
