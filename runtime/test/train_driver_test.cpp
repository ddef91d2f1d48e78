// End-to-end runs of train_main on the hand-written bigram program.
#include "megart/param_store.h"
#include "megart/safetensors.h"

#include "train_test_util.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>

using ::testing::HasSubstr;
using ::testing::Not;
using namespace train_test;

namespace {

class TrainDriver : public ::testing::Test {
protected:
  void SetUp() override { write_dataset(dir_ / "data", bigram_documents(40, 50)); }

  std::vector<std::string> args(int iters, std::vector<std::string> extra = {}) const {
    std::vector<std::string> a = {"--data-path", dir_ / "data", "--train-iters",
                                  std::to_string(iters), "--lr", "0.05",
                                  "--metrics-file", dir_ / "m.jsonl"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }

  TempDir dir_;
};

} // namespace

TEST_F(TrainDriver, LossFalls) {
  const Program p = bigram_program<2>();
  RunResult r = run_training(p.desc, args(30, {"--global-batch-size", "4", "--lr", "0.2"}));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  const auto rows = read_jsonl(dir_ / "m.jsonl");
  ASSERT_EQ(rows.size(), 30u);
  const std::vector<double> loss = losses(rows);
  EXPECT_NEAR(loss.front(), std::log(16.0), 0.05); // near-uniform start
  // The data's own entropy is ~0.99 nats (80% of steps are deterministic); the start is ln 16.
  double first = 0, last = 0;
  for (int i = 0; i < 5; ++i) {
    first += loss[i] / 5;
    last += loss[25 + i] / 5;
  }
  EXPECT_LT(last, first - 0.8);
  EXPECT_LT(last, 1.6);
  EXPECT_EQ(rows[29].get("iteration")->integer, 30);
  EXPECT_EQ(rows[29].get("consumed_samples")->integer, 120);
  EXPECT_GT(rows[0].get("grad_norm")->number, 0.0);

  // Header, one Megatron log line per iteration, final line.
  EXPECT_THAT(r.out, HasSubstr("megart: bigram test model\n"));
  EXPECT_THAT(r.out, HasSubstr("  parameters: 272 in 2 tensors; initialised with seed 1234\n"));
  EXPECT_THAT(r.out, HasSubstr("samples of 8+1 tokens; using 120 in shuffled order (1 epoch, partial)\n"));
  EXPECT_THAT(r.out, HasSubstr("global batch 4 = 2 x micro batch 2"));
  const std::regex line(R"( \[[-0-9: ]+\] iteration +\d+/ +30 \| consumed samples: +\d+ \|)");
  auto begin = std::sregex_iterator(r.out.begin(), r.out.end(), line);
  EXPECT_EQ(std::distance(begin, std::sregex_iterator()), 30);
  char final_line[96];
  std::snprintf(final_line, sizeof final_line, "training done: 30 iterations, final lm loss %.6f\n",
                loss.back());
  EXPECT_THAT(r.out, HasSubstr(final_line));
}

// More samples than the data holds: further epochs, each its own shuffle (the loss keeps falling
// on data it has seen).
TEST_F(TrainDriver, RepeatsTheDataForEpochs) {
  write_dataset(dir_ / "small", bigram_documents(4, 50)); // 24 samples
  const Program p = bigram_program<2>();
  RunResult r = run_training(p.desc, {"--data-path", dir_ / "small", "--train-iters", "15", "--global-batch-size",
                                      "4", "--lr", "0.2", "--metrics-file", dir_ / "m.jsonl"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr(": 200 tokens, 24 samples of 8+1 tokens; using 60 in shuffled order "
                               "(3 epochs, the last partial)\n"));
  const std::vector<double> loss = losses(read_jsonl(dir_ / "m.jsonl"));
  ASSERT_EQ(loss.size(), 15u);
  EXPECT_LT(loss.back(), loss.front() - 0.5);
}

TEST_F(TrainDriver, GradientAccumulationMatchesOneBigMicrobatch) {
  const Program two = bigram_program<2>(), four = bigram_program<4>();
  ASSERT_EQ(run_training(two.desc, args(8, {"--global-batch-size", "4", "--metrics-file",
                                            dir_ / "two.jsonl"})).code, 0);
  ASSERT_EQ(run_training(four.desc, args(8, {"--global-batch-size", "4", "--metrics-file",
                                             dir_ / "four.jsonl"})).code, 0);
  const auto a = read_jsonl(dir_ / "two.jsonl"), b = read_jsonl(dir_ / "four.jsonl");
  ASSERT_EQ(a.size(), 8u);
  ASSERT_EQ(b.size(), 8u);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_NEAR(a[i].get("lm_loss")->number, b[i].get("lm_loss")->number, 1e-6) << "iter " << i;
    EXPECT_NEAR(a[i].get("grad_norm")->number, b[i].get("grad_norm")->number, 1e-6);
  }
}

TEST_F(TrainDriver, LoadedWeightsGiveTheSameRunAsTheSeed) {
  // A checkpoint of the seed-7 initial weights, loaded, must train exactly like --seed 7 —
  // with W split into two row blocks on one side, so load also goes through block copies.
  const Program whole = bigram_program<2>(), split = bigram_program<2, true>();
  megart::ParamStore init(whole.params.data(), 2);
  init.init(7);
  init.save(dir_ / "init.safetensors");
  ASSERT_EQ(run_training(whole.desc, args(5, {"--seed", "7", "--metrics-file",
                                              dir_ / "seed.jsonl"})).code, 0);
  RunResult r = run_training(split.desc, args(5, {"--seed", "7", "--load",
                                                  dir_ / "init.safetensors", "--metrics-file",
                                                  dir_ / "load.jsonl"}));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("loaded from " + (dir_ / "init.safetensors")));
  EXPECT_EQ(losses(read_jsonl(dir_ / "seed.jsonl")), losses(read_jsonl(dir_ / "load.jsonl")));
}

TEST_F(TrainDriver, SavesAtIntervalsAndAtTheEnd) {
  const Program p = bigram_program<2, true>();
  RunResult r = run_training(p.desc, args(5, {"--save", dir_ / "ck", "--save-interval", "2",
                                              "--log-interval", "2", "--no-shuffle"}));
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char *it : {"iter_0000002", "iter_0000004", "iter_0000005"})
    EXPECT_TRUE(std::filesystem::exists(dir_ / ("ck/" + std::string(it) + "/model.safetensors")))
        << it;
  EXPECT_FALSE(std::filesystem::exists(dir_ / "ck/iter_0000001"));
  std::ifstream tracker(dir_ / "ck/latest_checkpointed_iteration.txt");
  std::string latest;
  tracker >> latest;
  EXPECT_EQ(latest, "5");
  EXPECT_THAT(r.out, HasSubstr("saved checkpoint at iteration 4: " + (dir_ / "ck/iter_0000004")));
  // Log lines at iterations 2, 4 and the last one; metrics for every iteration.
  EXPECT_THAT(r.out, HasSubstr("iteration        2/       5 |"));
  EXPECT_THAT(r.out, HasSubstr("iteration        5/       5 |"));
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("iteration        3/       5 |")));
  EXPECT_EQ(read_jsonl(dir_ / "m.jsonl").size(), 5u);
  // The saved model is a complete Hugging Face-named checkpoint of the whole W.
  const auto file = megart::SafetensorsFile::open(dir_ / "ck/iter_0000005/model.safetensors");
  EXPECT_EQ(file.names(), (std::vector<std::string>{"b", "w"}));
  EXPECT_EQ(file.get("w").shape, (std::vector<int64_t>{16, 16}));
}

TEST_F(TrainDriver, ShufflingChangesTheOrderNotTheStart) {
  const Program p = bigram_program<2>();
  ASSERT_EQ(run_training(p.desc, args(3, {"--metrics-file", dir_ / "a.jsonl"})).code, 0);
  ASSERT_EQ(run_training(p.desc, args(3, {"--no-shuffle", "--metrics-file", dir_ / "b.jsonl"}))
                .code, 0);
  EXPECT_NE(losses(read_jsonl(dir_ / "a.jsonl")), losses(read_jsonl(dir_ / "b.jsonl")));
}

namespace {
// Gives non-finite gradients on every call: every step must be skipped.
void nan_backward(const megart::StepContext &ctx, float *const *params, float *const *grads, char *arena,
                  const int32_t *ids, const int32_t *labels, float dloss, const char *stash, const float *output_grad,
                  float *input_grad) {
  bigram_backward<2, false>(ctx, params, grads, arena, ids, labels, dloss, stash, output_grad, input_grad);
  grads[1][0] = std::numeric_limits<float>::infinity();
}
} // namespace

TEST_F(TrainDriver, NonFiniteGradientsSkipTheStep) {
  Program p = bigram_program<2>();
  p.chunk[0].backward = &nan_backward;
  RunResult r = run_training(p.desc, args(3, {"--log-interval", "3", "--save", dir_ / "ck",
                                              "--save-interval", "1"}));
  // A run that never updated the weights failed, and saved nothing.
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("every iteration of this run was skipped (3 with a non-finite "
                               "gradient norm)"));
  EXPECT_THAT(r.out, HasSubstr("not saving at iteration 2"));
  EXPECT_FALSE(std::filesystem::exists(dir_ / "ck"));
  EXPECT_THAT(r.out, HasSubstr("number of skipped iterations:   3 |"));
  // Megatron's nan count is of skipped iterations whose loss is not finite; these losses are.
  EXPECT_THAT(r.out, HasSubstr("number of nan iterations:   0 |"));
  EXPECT_THAT(r.out, HasSubstr(", 3 skipped (non-finite gradient norm)"));
  // Nor does the learning-rate schedule move (Megatron steps it after an update only): the
  // linear decay would be at a third of --lr by iteration 3.
  EXPECT_THAT(r.out, HasSubstr("learning rate: 5.000000E-02 |"));
  // No update: every iteration sees the initial weights, so the same-ish loss (~ln 16).
  for (double loss : losses(read_jsonl(dir_ / "m.jsonl")))
    EXPECT_NEAR(loss, std::log(16.0), 0.05);
}

TEST_F(TrainDriver, ThroughputAndMfuFollowTheProgramsFlops) {
  Program p = bigram_program<2>();
  RunResult unknown = run_training(p.desc, args(2, {"--global-batch-size", "4", "--peak-tflops", "2"}));
  ASSERT_EQ(unknown.code, 0) << unknown.err;
  EXPECT_THAT(unknown.out, Not(HasSubstr("MFU"))); // no FLOPs count: no figure
  EXPECT_EQ(read_jsonl(dir_ / "m.jsonl")[0].get("mfu"), nullptr);

  p.desc.model_flops_per_sample = 3e9;
  RunResult r = run_training(p.desc, args(2, {"--global-batch-size", "4", "--peak-tflops", "2"}));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("| MFU: "));
  for (const megart::JsonValue &row : read_jsonl(dir_ / "m.jsonl")) {
    // 4 samples x 3 GFLOP in the iteration's time, on one rank; MFU against the 2 TFLOP/s peak.
    // 1e-7: the metrics file writes 9 significant digits.
    const double seconds = row.get("ms_per_iter")->number / 1e3;
    const double tflops = 4 * 3e9 / seconds / 1e12;
    EXPECT_NEAR(row.get("tflops_per_gpu")->number, tflops, 1e-7 * tflops);
    EXPECT_NEAR(row.get("mfu")->number, tflops / 2, 1e-7 * tflops);
  }
}
