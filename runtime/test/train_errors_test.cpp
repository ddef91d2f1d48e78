// Every rejected run: the message it prints, its exit code, and that it wrote nothing.
#include "megart/param_store.h"
#include "megart/safetensors.h"

#include "train_test_util.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

using ::testing::HasSubstr;
using namespace train_test;

namespace {

class TrainErrors : public ::testing::Test {
protected:
  void SetUp() override { write_dataset(dir_ / "data", bigram_documents(4, 50)); } // 24 samples

  // Runs with --save and --metrics-file in the temp dir and checks neither appeared.
  RunResult run_rejected(const megart::ProgramDesc &program, std::vector<std::string> extra,
                         int expected_code = 2) {
    std::vector<std::string> a = {"--data-path", dir_ / "data", "--train-iters", "3", "--lr",
                                  "0.01", "--save", dir_ / "ck", "--metrics-file",
                                  dir_ / "m.jsonl"};
    a.insert(a.end(), extra.begin(), extra.end());
    RunResult r = run_training(program, a);
    EXPECT_EQ(r.code, expected_code) << r.out << r.err;
    EXPECT_EQ(r.out.find("iteration"), std::string::npos) << r.out;
    EXPECT_FALSE(std::filesystem::exists(dir_ / "ck"));
    EXPECT_FALSE(std::filesystem::exists(dir_ / "m.jsonl"));
    return r;
  }

  // A checkpoint for the bigram program with `w` replaced/extended as given.
  std::string checkpoint(std::vector<megart::NamedTensor> tensors) {
    const std::string path = dir_ / "ck.safetensors";
    megart::write_safetensors(path, tensors, {{"format", "pt"}});
    return path;
  }

  TempDir dir_;
  const Program p_ = bigram_program<2>();
  std::vector<float> zeros_ = std::vector<float>(1024, 0.0f);
};

} // namespace

TEST_F(TrainErrors, GlobalBatchNotMultipleOfMicroBatch) {
  RunResult r = run_rejected(p_.desc, {"--global-batch-size", "5"});
  EXPECT_EQ(r.err, "error: --global-batch-size (5) is not a multiple of the micro batch size "
                   "(2); use a multiple of 2, e.g. 6\n");
}

TEST_F(TrainErrors, MicroBatchDiffersFromCompiled) {
  RunResult r = run_rejected(p_.desc, {"--micro-batch-size", "8"});
  EXPECT_EQ(r.err, "error: --micro-batch-size 8 does not match the compiled program (2): "
                   "recompile with `megac compile SPEC --micro-batch-size 8`\n");
}

TEST_F(TrainErrors, MissingDataFile) {
  RunResult r = run_rejected(p_.desc, {"--data-path", dir_ / "nothing"});
  EXPECT_THAT(r.err, HasSubstr("error: "));
  EXPECT_THAT(r.err, HasSubstr(dir_ / "nothing.idx"));
}

TEST_F(TrainErrors, DataWithoutOneSample) {
  write_dataset(dir_ / "data", {{1, 2, 3, 4, 5, 6, 7, 8}}); // in place of the fixture's
  RunResult r = run_rejected(p_.desc, {});
  EXPECT_THAT(r.err, HasSubstr("error: " + (dir_ / "data") + ": documents 0..1 hold 8 tokens, fewer than one "
                               "sample of 8+1 tokens; use more data, or compile a spec with a smaller seq_length"));
}

TEST_F(TrainErrors, TokenOutsideVocab) {
  write_dataset(dir_ / "wide", {{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18}});
  RunResult r = run_rejected(p_.desc, {"--data-path", dir_ / "wide", "--train-iters", "1"});
  EXPECT_THAT(r.err, HasSubstr("token id 16 at position 15 is outside the compiled vocabulary "
                               "[0, 16)"));
}

TEST_F(TrainErrors, CheckpointMissingTensor) {
  const std::string ck = checkpoint({{"w", {16, 16}, zeros_.data()}});
  RunResult r = run_rejected(p_.desc, {"--load", ck});
  EXPECT_THAT(r.err, HasSubstr("checkpoint does not match the compiled program"));
  EXPECT_THAT(r.err, HasSubstr("missing tensor 'b' [16]"));
}

TEST_F(TrainErrors, CheckpointWrongShape) {
  const std::string ck = checkpoint({{"w", {16, 15}, zeros_.data()}, {"b", {16}, zeros_.data()}});
  RunResult r = run_rejected(p_.desc, {"--load", ck});
  EXPECT_THAT(r.err, HasSubstr("tensor 'w' has shape [16, 15], the program needs [16, 16]"));
}

TEST_F(TrainErrors, CheckpointExtraTensor) {
  const std::string ck = checkpoint({{"w", {16, 16}, zeros_.data()},
                                     {"b", {16}, zeros_.data()},
                                     {"lm_head.weight", {16, 16}, zeros_.data()}});
  RunResult r = run_rejected(p_.desc, {"--load", ck});
  EXPECT_THAT(r.err, HasSubstr("1 tensor not used by the program: 'lm_head.weight'"));
}

TEST_F(TrainErrors, CheckpointFileMissing) {
  RunResult r = run_rejected(p_.desc, {"--load", dir_ / "absent.safetensors"});
  EXPECT_THAT(r.err, HasSubstr(dir_ / "absent.safetensors"));
}

TEST_F(TrainErrors, UnknownFlagIsAParseError) {
  RunResult r = run_rejected(p_.desc, {"--tensor-model-parallel-size", "2"}, 1);
  EXPECT_THAT(r.err, HasSubstr("--tensor-model-parallel-size"));
}

TEST_F(TrainErrors, SaveIsAFile) {
  write_dataset(dir_ / "x", {{1, 2}}); // any existing non-folder path
  std::vector<std::string> a = {"--data-path", dir_ / "data", "--train-iters", "1", "--lr",
                                "0.01", "--save", dir_ / "x.bin"};
  RunResult r = run_training(p_.desc, a);
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("exists and is not a folder"));
}

TEST_F(TrainErrors, MetricsFolderMissing) {
  std::vector<std::string> a = {"--data-path", dir_ / "data", "--train-iters", "1", "--lr",
                                "0.01", "--metrics-file", dir_ / "no/such/m.jsonl"};
  RunResult r = run_training(p_.desc, a);
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("no/such/m.jsonl"));
  EXPECT_EQ(r.out, "");
}

// (--bf16 / --fp16 alone are accepted on the CPU, which emulates them:
// train_mixed_precision_test.cpp.)
TEST_F(TrainErrors, Fp16FlagCombinationIsCheckedFirst) {
  RunResult r = run_rejected(p_.desc, {"--bf16", "--fp16"});
  EXPECT_THAT(r.err, HasSubstr("--bf16 and --fp16 are both given"));
}
