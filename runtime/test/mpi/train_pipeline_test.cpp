// Pipeline parallelism on real ranks with the hand-written toy pipeline (toy_pipeline.h): the
// executor's gradients, losses and stash peaks against the same model on one rank, and whole
// training runs (loss, gradient norm, checkpoints, --load) against the single-rank run.
#include "megart/error.h"
#include "megart/grad_norm.h"
#include "megart/memory_accounting.h"
#include "megart/param_store.h"
#include "megart/pipeline_executor.h"
#include "megart/process_grid.h"
#include "megart/safetensors.h"
#include "megart/train_pipeline.h"

#include "mpi_test_util.h"
#include "toy_pipeline.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

using mpi_test::expect_near;
using mpi_test::grad_norms;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace train_test;

namespace {

// m microbatches of made-up tokens.
std::vector<int32_t> tokens(int64_t salt) {
  std::vector<int32_t> t(static_cast<size_t>(toy::kMicrobatches * toy::kTokens));
  for (size_t i = 0; i < t.size(); ++i)
    t[i] = static_cast<int32_t>((i * 7 + static_cast<size_t>(salt) * i / 3 + salt) % toy::kVocab);
  return t;
}

std::vector<float> grad_of(const megart::ParamStore &s, int64_t i) {
  return std::vector<float>(s.grad(i), s.grad(i) + s.numel(i));
}

void expect_close(const std::vector<float> &a, const std::vector<float> &b, double tol,
                  const std::string &what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_NEAR(a[i], b[i], tol) << what << "[" << i << "]";
}

// One iteration of the pipelined toy program `pipe` (kC chunks over the 2 ranks of a pair)
// against the single-rank toy model: the loss on the last stage, every gradient after the
// tied-weight sum, the gradient norm and the stash peaks.
template <int kC>
void check_one_iteration(const toy::Program &pipe, const std::vector<int64_t> &peaks) {
  auto pair = mpi_test::group_of(2);
  auto grid = megart::ProcessGrid::on(*pair, {2, 1, 1});
  const int64_t rank = grid->coord().pp;
  const megart::PipelineStageDesc &stage = pipe.desc.stages[rank];
  megart::ParamStore store(stage.params, stage.num_params);
  store.init(11);
  const std::vector<int32_t> ids = tokens(1), labels = tokens(2);
  const float dloss = 1.0f / toy::kMicrobatches;

  toy::Program one;
  toy::build<1, kC>(one);
  megart::ParamStore ref(one.stages[0].params, one.stages[0].num_params);
  ref.init(11); // initialisation depends on the names only: the same weights
  megart::SelfCommunicator self;
  const megart::StepContext self_ctx{&self, &self, &self};
  double ref_loss = 0;
  for (int64_t mb = 0; mb < toy::kMicrobatches; ++mb)
    ref_loss += toy::Reference<kC>::step(self_ctx, ref.param_table(), ref.grad_table(),
                                         ids.data() + mb * toy::kTokens, labels.data() + mb * toy::kTokens,
                                         dloss);
  std::map<std::string, int64_t> ref_index;
  for (int64_t i = 0; i < ref.size(); ++i)
    ref_index[ref.desc(i).name] = i;

  megart::PipelineExecutor executor(pipe.desc.stages, rank, 2, pipe.desc.virtual_pipeline_size,
                                    toy::kMicrobatches);
  megart::TiedGradients tied(pipe.desc, store, *grid);
  for (int iteration = 0; iteration < 2; ++iteration) { // buffers are reused the second time
    store.zero_grads();
    const megart::PipelineIterationResult r =
        executor.run(grid->step_context(), store.param_table(), store.grad_table(), ids.data(),
                     labels.data(), toy::kTokens, dloss);
    EXPECT_EQ(r.peak_stash, peaks[rank]) << "pp rank " << rank;
    const bool last = rank == 1; // the last chunk is on rank 1 with 2 or 4 chunks
    EXPECT_EQ(r.loss_count, last ? toy::kMicrobatches : 0);
    EXPECT_EQ(r.loss_sum, last ? ref_loss : 0.0); // same sums in the same order
    // Before the sum each stage holds only its part of the tied embedding's gradient.
    const int64_t wte = 0;
    ASSERT_STREQ(store.desc(wte).name, "transformer.wte.weight");
    const std::vector<float> part = grad_of(store, wte), whole = grad_of(ref, 0);
    double apart = 0;
    for (size_t i = 0; i < part.size(); ++i)
      apart = std::max(apart, std::abs(static_cast<double>(part[i]) - whole[i]));
    EXPECT_GT(apart, 1e-3) << "a stage already had the whole tied gradient";
    tied.sync(store, /*shards=*/false);
    for (int64_t i = 0; i < store.size(); ++i)
      expect_close(grad_of(store, i), grad_of(ref, ref_index.at(store.desc(i).name)), 1e-6,
                   store.desc(i).name);
    EXPECT_NEAR(megart::model_grad_norm(store, grid->tp(), grid->pp(), tied.norm_counted()),
                megart::model_grad_norm(ref, self), 1e-6);
  }
}

} // namespace

TEST(PipelineExecutor, OneFOneBMatchesOneRank) {
  if (mpi_test::world_size() % 2 != 0)
    GTEST_SKIP() << "needs an even number of ranks";
  toy::Program pipe;
  toy::build<2, 2>(pipe, toy::one_f_one_b());
  check_one_iteration<2>(pipe, {2, 1});
}

TEST(PipelineExecutor, InterleavedMatchesOneRank) {
  if (mpi_test::world_size() % 2 != 0)
    GTEST_SKIP() << "needs an even number of ranks";
  toy::Program pipe;
  toy::build<2, 4>(pipe, toy::interleaved());
  check_one_iteration<4>(pipe, {5, 3});
}

// An iteration of twice the schedule's microbatches runs it twice (pipe.schedule's rounds: a
// one-stage schedule is compiled for one microbatch): the same losses and gradients as the
// single-rank model over all of them.
TEST(PipelineExecutor, RoundsRunTheScheduleOncePerItsMicrobatches) {
  if (mpi_test::world_size() % 2 != 0)
    GTEST_SKIP() << "needs an even number of ranks";
  toy::Program pipe;
  toy::build<2, 2>(pipe, toy::one_f_one_b());
  auto pair = mpi_test::group_of(2);
  auto grid = megart::ProcessGrid::on(*pair, {2, 1, 1});
  const int64_t rank = grid->coord().pp;
  const megart::PipelineStageDesc &stage = pipe.desc.stages[rank];
  megart::ParamStore store(stage.params, stage.num_params);
  store.init(11);
  std::vector<int32_t> ids = tokens(1), labels = tokens(2);
  for (int64_t salt : {3, 4}) // a second round's microbatches
    for (int32_t t : tokens(salt))
      (salt == 3 ? ids : labels).push_back(t);
  const int64_t microbatches = 2 * toy::kMicrobatches;
  const float dloss = 1.0f / static_cast<float>(microbatches);

  toy::Program one;
  toy::build<1, 2>(one);
  megart::ParamStore ref(one.stages[0].params, one.stages[0].num_params);
  ref.init(11);
  megart::SelfCommunicator self;
  const megart::StepContext self_ctx{&self, &self, &self};
  double ref_loss = 0;
  for (int64_t mb = 0; mb < microbatches; ++mb)
    ref_loss += toy::Reference<2>::step(self_ctx, ref.param_table(), ref.grad_table(),
                                        ids.data() + mb * toy::kTokens, labels.data() + mb * toy::kTokens, dloss);

  megart::PipelineExecutor executor(pipe.desc.stages, rank, 2, 1, toy::kMicrobatches);
  megart::TiedGradients tied(pipe.desc, store, *grid);
  const megart::PipelineIterationResult r = executor.run(grid->step_context(), store.param_table(),
                                                         store.grad_table(), ids.data(), labels.data(),
                                                         toy::kTokens, dloss, microbatches);
  EXPECT_EQ(r.loss_count, rank == 1 ? microbatches : 0);
  EXPECT_EQ(r.loss_sum, rank == 1 ? ref_loss : 0.0);
  EXPECT_EQ(r.peak_stash, rank == 0 ? 2 : 1); // a round's, not the iteration's
  tied.sync(store, /*shards=*/false);
  EXPECT_NEAR(megart::model_grad_norm(store, grid->tp(), grid->pp(), tied.norm_counted()),
              megart::model_grad_norm(ref, self), 1e-6);
  EXPECT_THROW(executor.run(grid->step_context(), store.param_table(), store.grad_table(), ids.data(),
                            labels.data(), toy::kTokens, dloss, toy::kMicrobatches + 1),
               megart::Error);
}

// ---------------------------------------------------------------------------------------------
// Whole training runs through train_on_grid.

namespace {

class TrainPipeline : public ::testing::Test {
protected:
  void SetUp() override { write_dataset(dir_ / "data", bigram_documents(40, 50)); }

  std::vector<std::string> args(const std::string &metrics, std::vector<std::string> extra = {}) {
    std::vector<std::string> a = {"--data-path", dir_ / "data", "--train-iters", "4", "--lr",
                                  "0.05", "--clip-grad", "0.5", "--metrics-file", metrics,
                                  "--distributed-timeout-minutes", "1"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }

  // The toy model with kC chunks' layers on this rank alone, for global batch B.
  template <int kC>
  std::vector<megart::JsonValue> reference(int64_t B, std::vector<std::string> extra = {}) {
    toy::Program one;
    toy::build<1, kC>(one);
    extra.insert(extra.end(), {"--global-batch-size", std::to_string(B)});
    return mpi_test::run_alone(one.desc, args(dir_ / "ref.jsonl", extra), dir_ / "ref.jsonl");
  }

  TempDir dir_; // this rank's own
};

// The memory report of OneFOneB below: every pp stage's, exact where the schedule fixes it.
void expect_pipeline_memory(const std::vector<megart::JsonValue> &rows, const std::string &out) {
  const megart::JsonValue *stages = rows[0].get("memory_per_pp_stage");
  ASSERT_TRUE(stages && stages->is_array());
  ASSERT_EQ(stages->array.size(), 2u);
  const megart::JsonValue *mine = rows[0].get("memory"); // global rank 0's: stage 0's
  ASSERT_TRUE(mine && mine->is_object());
  for (const auto &[key, value] : stages->array[0].object)
    EXPECT_EQ(mine->get(key) ? mine->get(key)->integer : -1, value.integer) << key;
  for (int s = 0; s < 2; ++s) {
    const megart::JsonValue &m = stages->array[s];
    auto bytes = [&](const char *key) { return m.get(key) ? m.get(key)->integer : -1; };
    // wte [16, 4] and the stage's w_c [4] (its gradient padded to 16 floats).
    EXPECT_EQ(bytes("parameters"), 68 * 4) << "stage " << s;
    EXPECT_EQ(bytes("gradients"), 80 * 4) << "stage " << s;
    EXPECT_EQ(bytes("optimizer_state"), 2 * 68 * 4) << "stage " << s;
    EXPECT_EQ(bytes("workspace"), 0) << "stage " << s;
    EXPECT_EQ(bytes("data"), 2 * 4 * toy::kTokens * 4) << "stage " << s; // 4 microbatches
    // The stash peak [2, 1] times the chunk's stash.
    EXPECT_EQ(bytes("activations"), s == 0 ? 2 * 4 * toy::kActNumel : 4 * toy::kHeadStashFloats);
    // Send and receive buffers (how many depends on when sends complete: at least one, which
    // serves both ways) and one float per point-to-point channel (two per stage).
    EXPECT_GE(bytes("communication"), 4 * toy::kActNumel + 2 * 4) << "stage " << s;
    // Nothing is freed during a run: the categories add up to the peak.
    int64_t sum = 0;
    for (megart::MemoryCategory c : megart::memory_categories())
      sum += bytes(megart::memory_category_key(c));
    EXPECT_EQ(bytes("peak_total"), sum) << "stage " << s;
    EXPECT_THAT(out, HasSubstr("\nmemory (pp stage " + std::to_string(s) + "): parameters 272 B, "
                               "gradients 320 B, optimizer state 544 B, master weights 0 B, "));
  }
}

} // namespace

TEST_F(TrainPipeline, OneFOneBTrainsLikeOneRankAndSavesItsCheckpoint) {
  if (mpi_test::world_size() % 2 != 0)
    GTEST_SKIP() << "needs an even number of ranks";
  const auto ref = reference<2>(8, {"--save", dir_ / "ref-ck"});
  auto pair = mpi_test::group_of(2);
  mpi_test::SharedTempDir shared(*pair);
  auto grid = megart::ProcessGrid::on(*pair, {2, 1, 1});
  toy::Program pipe;
  toy::build<2, 2>(pipe, toy::one_f_one_b(), {2, 1});
  // No --global-batch-size: the compiled 2 x 4 microbatches.
  RunResult r = mpi_test::run_on(pipe.desc, *grid, args(dir_ / "pp.jsonl", {"--save", shared / "ck"}));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  pair->barrier(); // the checkpoint is complete
  if (pair->rank() != 0) {
    EXPECT_EQ(r.out, "");
    return;
  }
  EXPECT_THAT(r.out, HasSubstr("  parallel: pp 2 x dp 1 x tp 1 = 2 ranks"));
  EXPECT_THAT(r.out, HasSubstr("  parameters: 72 in 3 tensors;"));
  EXPECT_THAT(r.out, HasSubstr("  pipeline: pp 2 x vpp 1, 1f1b schedule, 4 microbatches; stage 0 "
                               "holds chunk 0 (68 parameters); stage 1 holds chunk 1 (68 "
                               "parameters)\n"));
  EXPECT_THAT(r.out, HasSubstr("global batch 8 = 4 x micro batch 2"));
  EXPECT_THAT(r.out, HasSubstr("\npipeline: stashed activations peak per pp rank: measured [2, "
                               "1], predicted [2, 1]\n"));
  EXPECT_THAT(r.out, Not(HasSubstr("warning")));
  const auto rows = read_jsonl(dir_ / "pp.jsonl");
  expect_near(losses(rows), losses(ref), 1e-6, "lm loss");
  expect_near(grad_norms(rows), grad_norms(ref), 1e-6, "grad norm");
  ASSERT_EQ(rows.size(), 4u);
  const megart::JsonValue *measured = rows[0].get("pipeline_stash_peak_measured");
  ASSERT_TRUE(measured && measured->is_array());
  ASSERT_EQ(measured->array.size(), 2u);
  EXPECT_EQ(measured->array[0].integer, 2);
  EXPECT_EQ(measured->array[1].integer, 1);
  EXPECT_EQ(rows[0].get("pipeline_stash_peak_predicted")->array[0].integer, 2);
  EXPECT_EQ(rows[1].get("pipeline_stash_peak_measured"), nullptr); // first iteration only
  expect_pipeline_memory(rows, r.out);
  // One file with every tensor, as the single rank saved it.
  mpi_test::expect_same_tensors(shared / "ck/iter_0000004/model.safetensors",
                                dir_ / "ref-ck/iter_0000004/model.safetensors", 1e-5);
  EXPECT_EQ(file_bytes(shared / "ck/latest_checkpointed_iteration.txt"), "4");
}

TEST_F(TrainPipeline, InterleavedTrainsLikeOneRank) {
  if (mpi_test::world_size() % 2 != 0)
    GTEST_SKIP() << "needs an even number of ranks";
  const auto ref = reference<4>(8);
  auto pair = mpi_test::group_of(2);
  auto grid = megart::ProcessGrid::on(*pair, {2, 1, 1});
  toy::Program pipe;
  toy::build<2, 4>(pipe, toy::interleaved(), {5, 4}); // rank 1's prediction is wrong
  RunResult r = mpi_test::run_on(pipe.desc, *grid, args(dir_ / "pp.jsonl"));
  ASSERT_EQ(r.code, 0) << r.err;
  if (pair->rank() != 0)
    return;
  EXPECT_THAT(r.out, HasSubstr("pp 2 x vpp 2, interleaved schedule, 4 microbatches; stage 0 holds "
                               "chunks 0, 2 (72 parameters); stage 1 holds chunks 1, 3 (72 "
                               "parameters)"));
  EXPECT_THAT(r.out, HasSubstr("measured [5, 3], predicted [5, 4]\nwarning: pipeline: the "
                               "measured stash peaks differ from the compiler's predictions"));
  const auto rows = read_jsonl(dir_ / "pp.jsonl");
  expect_near(losses(rows), losses(ref), 1e-6, "lm loss");
  expect_near(grad_norms(rows), grad_norms(ref), 1e-6, "grad norm");
}

TEST_F(TrainPipeline, EachStageLoadsItsTensorsFromOneFile) {
  if (mpi_test::world_size() % 2 != 0)
    GTEST_SKIP() << "needs an even number of ranks";
  reference<2>(8, {"--save", dir_ / "start", "--train-iters", "1"});
  const std::string start = dir_ / "start/iter_0000001/model.safetensors";
  const auto ref = reference<2>(8, {"--load", start});
  auto pair = mpi_test::group_of(2);
  auto grid = megart::ProcessGrid::on(*pair, {2, 1, 1});
  toy::Program pipe;
  toy::build<2, 2>(pipe, toy::one_f_one_b(), {2, 1});
  RunResult r = mpi_test::run_on(pipe.desc, *grid, args(dir_ / "pp.jsonl", {"--load", start}));
  ASSERT_EQ(r.code, 0) << r.err;
  if (pair->rank() == 0)
    expect_near(losses(read_jsonl(dir_ / "pp.jsonl")), losses(ref), 1e-6, "lm loss");

  // A tensor no stage holds is still an error; one only stage 1 needs is that stage's error.
  const auto file = megart::SafetensorsFile::open(start);
  auto write_without = [&](const std::string &path, const std::string &skip,
                           const std::string &extra) {
    std::vector<std::vector<float>> data;
    std::vector<megart::NamedTensor> named;
    for (const std::string &name : file.names())
      if (name != skip)
        data.push_back(file.read_f32(name, file.get(name).shape));
    size_t k = 0;
    for (const std::string &name : file.names())
      if (name != skip)
        named.push_back({name, file.get(name).shape, data[k++].data()});
    const float one = 1;
    if (!extra.empty())
      named.push_back({extra, {1}, &one});
    megart::write_safetensors(path, named);
  };
  write_without(dir_ / "extra.safetensors", "", "h.9.w");
  r = mpi_test::run_on(pipe.desc, *grid, args(dir_ / "x.jsonl", {"--load", dir_ / "extra.safetensors"}));
  EXPECT_EQ(r.code, 2);
  if (pair->rank() == 0)
    EXPECT_THAT(r.err, HasSubstr("1 tensor not used by the program: 'h.9.w'"));
  write_without(dir_ / "missing.safetensors", "h.1.w", "");
  r = mpi_test::run_on(pipe.desc, *grid, args(dir_ / "x.jsonl", {"--load", dir_ / "missing.safetensors"}));
  EXPECT_EQ(r.code, 2);
  if (pair->rank() == 1) {
    EXPECT_THAT(r.err, ::testing::StartsWith("error (rank 1 of 2): "));
    EXPECT_THAT(r.err, HasSubstr("missing tensor 'h.1.w' [4]"));
  } else {
    EXPECT_EQ(r.err, "");
  }
}

TEST_F(TrainPipeline, FourRanks) {
  if (mpi_test::world_size() != 4)
    GTEST_SKIP() << "needs 4 ranks";
  // pp 2 x dp 2 (1F1B) and tp 2 x pp 2 (interleaved; the toy's weights are replicated over tp).
  auto w = mpi_test::world();
  {
    const auto ref = reference<2>(16);
    auto grid = megart::ProcessGrid::on(*w, {2, 2, 1}); // pp 2 x dp 2
    toy::Program pipe;
    toy::build<2, 2>(pipe, toy::one_f_one_b(), {2, 1}, 2);
    RunResult r = mpi_test::run_on(pipe.desc, *grid, args(dir_ / "pp.jsonl"));
    ASSERT_EQ(r.code, 0) << r.err;
    if (w->rank() == 0) {
      EXPECT_THAT(r.out, HasSubstr("global batch 16 = dp 2 x 4 x micro batch 2"));
      const auto rows = read_jsonl(dir_ / "pp.jsonl");
      expect_near(losses(rows), losses(ref), 1e-6, "lm loss (pp 2 x dp 2)");
      expect_near(grad_norms(rows), grad_norms(ref), 1e-6, "grad norm (pp 2 x dp 2)");
    }
  }
  {
    mpi_test::SharedTempDir shared(*w);
    const auto ref = reference<4>(8, {"--save", dir_ / "ref-ck"});
    auto grid = megart::ProcessGrid::on(*w, {2, 1, 2}); // pp 2 x tp 2
    toy::Program pipe;
    toy::build<2, 4>(pipe, toy::interleaved(), {5, 3}, 1, 2);
    RunResult r = mpi_test::run_on(pipe.desc, *grid, args(dir_ / "pp.jsonl", {"--save", shared / "ck"}));
    ASSERT_EQ(r.code, 0) << r.err;
    w->barrier();
    if (w->rank() == 0) {
      const auto rows = read_jsonl(dir_ / "pp.jsonl");
      expect_near(losses(rows), losses(ref), 1e-6, "lm loss (tp 2 x pp 2)");
      expect_near(grad_norms(rows), grad_norms(ref), 1e-6, "grad norm (tp 2 x pp 2)");
      mpi_test::expect_same_tensors(shared / "ck/iter_0000004/model.safetensors",
                                    dir_ / "ref-ck/iter_0000004/model.safetensors", 1e-5);
    }
  }
}
