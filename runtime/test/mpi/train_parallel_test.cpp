// Data and tensor parallelism end to end: the hand-written bigram programs trained on 2 and 4
// ranks give the single-rank run's losses and gradient norms, and checkpoints move between
// plans. Every rank keeps its own copy of the data (a private TempDir); files one rank writes
// and others read go to a SharedTempDir.
#include "megart/grad_norm.h"
#include "megart/optimizer.h"
#include "megart/param_store.h"
#include "megart/process_grid.h"
#include "megart/safetensors.h"
#include "megart/train_checkpoint.h"

#include "mpi_test_util.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

using ::testing::HasSubstr;
using namespace train_test;

namespace {

using mpi_test::run_on;

using mpi_test::expect_near;
using mpi_test::expect_same_tensors;
using mpi_test::grad_norms;

class TrainParallel : public ::testing::Test {
protected:
  void SetUp() override { write_dataset(dir_ / "data", bigram_documents(40, 50)); }

  std::vector<std::string> args(const std::string &metrics, std::vector<std::string> extra = {}) {
    std::vector<std::string> a = {"--data-path", dir_ / "data", "--train-iters", "6",
                                  "--global-batch-size", "8", "--lr", "0.1", "--clip-grad",
                                  "0.5", "--metrics-file", metrics};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }

  // The single-rank run every plan is compared with, on this rank alone.
  std::vector<megart::JsonValue> reference(std::vector<std::string> extra = {}) {
    const Program one = bigram_program<2>();
    return mpi_test::run_alone(one.desc, args(dir_ / "ref.jsonl", extra), dir_ / "ref.jsonl");
  }

  TempDir dir_; // this rank's own
};

} // namespace

TEST_F(TrainParallel, DataParallelMatchesOneRank) {
  if (mpi_test::world_size() % 2 != 0)
    GTEST_SKIP() << "needs an even number of ranks";
  const auto ref = reference();
  auto pair = mpi_test::group_of(2);
  auto grid = megart::ProcessGrid::on(*pair, {1, 2, 1});
  Program dp2 = bigram_program<2>();
  dp2.desc.data_parallel_size = 2;
  // 272 gradient elements in two buckets, as megac compiles a small --ddp-bucket-size: b, then w.
  dp2.stage0().sync_gradients = [](const megart::StepContext &ctx, float *const *grads) {
    ctx.grad_sync->start(grads[1], kVocab);
    ctx.grad_sync->start(grads[0], kVocab * kVocab);
  };
  RunResult r = run_on(dp2.desc, *grid, args(dir_ / "dp2.jsonl"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  if (pair->rank() != 0) { // only global rank 0 prints and writes metrics
    EXPECT_EQ(r.out, "");
    EXPECT_FALSE(std::filesystem::exists(dir_ / "dp2.jsonl"));
    return;
  }
  EXPECT_THAT(r.out, HasSubstr("  parallel: pp 1 x dp 2 x tp 1 = 2 ranks"));
  EXPECT_THAT(r.out, HasSubstr("global batch 8 = dp 2 x 2 x micro batch 2"));
  const auto rows = read_jsonl(dir_ / "dp2.jsonl");
  expect_near(losses(rows), losses(ref), 1e-6, "lm loss");
  expect_near(grad_norms(rows), grad_norms(ref), 1e-6, "grad norm");
  EXPECT_EQ(rows.back().get("consumed_samples")->integer, 48);
}

TEST_F(TrainParallel, TensorParallelMatchesOneRank) {
  if (mpi_test::world_size() % 2 != 0)
    GTEST_SKIP() << "needs an even number of ranks";
  const auto ref = reference({"--save", dir_ / "ref-ck"});
  auto pair = mpi_test::group_of(2);
  mpi_test::SharedTempDir shared(*pair);
  auto grid = megart::ProcessGrid::on(*pair, {1, 1, 2});
  const Program tp2 = bigram_tp_program<2>(2);
  RunResult r = run_on(tp2.desc, *grid, args(dir_ / "tp2.jsonl", {"--save", shared / "ck"}));
  ASSERT_EQ(r.code, 0) << r.err;
  pair->barrier(); // the checkpoint is complete
  if (pair->rank() != 0)
    return;
  const auto rows = read_jsonl(dir_ / "tp2.jsonl");
  expect_near(losses(rows), losses(ref), 1e-6, "lm loss");
  expect_near(grad_norms(rows), grad_norms(ref), 1e-6, "grad norm");
  // The tp checkpoint holds the full W, assembled from both ranks' row blocks.
  expect_same_tensors(shared / "ck/iter_0000006/model.safetensors",
                      dir_ / "ref-ck/iter_0000006/model.safetensors", 1e-6);
}

TEST_F(TrainParallel, WholeWorldThroughTrainMain) {
  // The production entry point on every rank mpirun started: dp over 2 ranks, tp 2 x dp 2 on 4.
  const int n = mpi_test::world_size();
  if (n != 2 && n != 4)
    GTEST_SKIP() << "needs 2 or 4 ranks";
  const auto ref = reference();
  const Program plan = n == 4 ? bigram_tp_program<2>(2, 2) : bigram_tp_program<2>(1, 2);
  RunResult r = run_training(plan.desc, args(dir_ / "world.jsonl"));
  ASSERT_EQ(r.code, 0) << r.err;
  if (mpi_test::world_rank() != 0) {
    EXPECT_EQ(r.out, "");
    return;
  }
  const auto rows = read_jsonl(dir_ / "world.jsonl");
  expect_near(losses(rows), losses(ref), 1e-6, "lm loss");
  expect_near(grad_norms(rows), grad_norms(ref), 1e-6, "grad norm");
}

TEST_F(TrainParallel, TrainMainRefusesTheWrongWorldSize) {
  const int n = mpi_test::world_size();
  const Program plan = bigram_tp_program<2>(2, n); // twice the ranks mpirun started
  RunResult r = run_training(plan.desc, args(dir_ / "m.jsonl", {"--save", dir_ / "ck"}));
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out, "");
  if (mpi_test::world_rank() == 0)
    EXPECT_EQ(r.err, "error: the program was compiled for pp 1 x dp " + std::to_string(n) + " x tp 2" +
                         " = " + std::to_string(2 * n) + " ranks, but mpirun started " +
                         std::to_string(n) + "; run mpirun -np " + std::to_string(2 * n) +
                         " train ...\n");
  else
    EXPECT_EQ(r.err, ""); // said once, by rank 0
  EXPECT_FALSE(std::filesystem::exists(dir_ / "m.jsonl"));
  EXPECT_FALSE(std::filesystem::exists(dir_ / "ck"));
}

TEST_F(TrainParallel, AFailureOnOneRankStopsAllBeforeTraining) {
  if (mpi_test::world_size() % 2 != 0)
    GTEST_SKIP() << "needs an even number of ranks";
  auto pair = mpi_test::group_of(2);
  auto grid = megart::ProcessGrid::on(*pair, {1, 2, 1});
  Program dp2 = bigram_program<2>();
  dp2.desc.data_parallel_size = 2;
  std::vector<std::string> a = args(dir_ / "m.jsonl");
  if (pair->rank() == 1)
    a[1] = dir_ / "nothing"; // only rank 1's data is missing
  RunResult r = run_on(dp2.desc, *grid, a);
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out.find("iteration"), std::string::npos);
  if (pair->rank() == 1) {
    EXPECT_THAT(r.err, ::testing::StartsWith("error (rank 1 of 2): "));
    EXPECT_THAT(r.err, HasSubstr(dir_ / "nothing.idx"));
  } else {
    EXPECT_EQ(r.err, "");
    EXPECT_FALSE(std::filesystem::exists(dir_ / "m.jsonl")); // never opened
  }
}

TEST(TrainParallelCheckpoint, SaveAtTp2LoadAtTp1AndBack) {
  if (mpi_test::world_size() % 2 != 0)
    GTEST_SKIP() << "needs an even number of ranks";
  auto pair = mpi_test::group_of(2);
  mpi_test::SharedTempDir shared(*pair);
  auto grid = megart::ProcessGrid::on(*pair, {1, 1, 2});
  const Program tp2 = bigram_tp_program<2>(2), tp1 = bigram_program<2>();

  // tp 2 -> file -> tp 1: the full tensors are the ones a single rank initialises.
  megart::ParamStore split(tp2.params.data(), 2, grid->coord().tp, 2);
  split.init(7);
  split.save(shared / "tp2.safetensors", grid->tp());
  pair->barrier();
  megart::ParamStore whole(tp1.params.data(), 2), expected(tp1.params.data(), 2);
  whole.load(shared / "tp2.safetensors");
  expected.init(7);
  for (int64_t i = 0; i < 2; ++i)
    EXPECT_EQ(std::vector<float>(whole.param(i), whole.param(i) + whole.numel(i)),
              std::vector<float>(expected.param(i), expected.param(i) + expected.numel(i)));

  // tp 1 -> file -> tp 2 -> file: each rank reads its rows, and saving them again gives the
  // same tensors bit for bit.
  for (int64_t i = 0; i < whole.numel(0); ++i)
    whole.param(0)[i] = 0.001f * static_cast<float>(i) - 0.1f;
  if (pair->rank() == 0)
    whole.save(shared / "tp1.safetensors");
  pair->barrier();
  megart::ParamStore loaded(tp2.params.data(), 2, grid->coord().tp, 2);
  loaded.load(shared / "tp1.safetensors");
  const int64_t first = grid->coord().tp * (kVocab / 2) * kVocab;
  EXPECT_EQ(std::vector<float>(loaded.param(0), loaded.param(0) + loaded.numel(0)),
            std::vector<float>(whole.param(0) + first, whole.param(0) + first + loaded.numel(0)));
  megart::TrainState state;
  state.iteration = 3;
  const std::string path = megart::save_checkpoint(shared / "ck", state, loaded, {grid->tp()}) +
                           "/model.safetensors"; // the folder layout too
  pair->barrier();
  if (pair->rank() == 0)
    expect_same_tensors(path, shared / "tp1.safetensors", 0);
}

TEST(TrainParallelGradNorm, TensorParallelNormIsTheSingleRankNorm) {
  if (mpi_test::world_size() % 2 != 0)
    GTEST_SKIP() << "needs an even number of ranks";
  auto pair = mpi_test::group_of(2);
  auto grid = megart::ProcessGrid::on(*pair, {1, 1, 2});
  const Program tp2 = bigram_tp_program<2>(2), tp1 = bigram_program<2>();
  megart::ParamStore split(tp2.params.data(), 2, grid->coord().tp, 2), whole(tp1.params.data(), 2);
  auto value = [](int64_t param, int64_t full_index) {
    return 0.01f * static_cast<float>((full_index * 7 + param * 3) % 11) - 0.05f;
  };
  for (int64_t i = 0; i < 2; ++i) {
    megart::for_each_block_row(split.desc(i), [&](int64_t f, int64_t b, int64_t n) {
      for (int64_t k = 0; k < n; ++k)
        split.grad(i)[b + k] = value(i, f + k);
    });
    for (int64_t k = 0; k < whole.numel(i); ++k)
      whole.grad(i)[k] = value(i, k);
  }
  megart::SelfCommunicator self;
  EXPECT_NEAR(megart::model_grad_norm(split, grid->tp()), megart::model_grad_norm(whole, self),
              1e-12);
}
