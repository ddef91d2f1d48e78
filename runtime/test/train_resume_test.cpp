// Checkpoints on the hand-written bigram program: what each resume flag restores, which folders
// --keep-latest-k keeps, replacing a checkpoint in place, and the refusals that protect a run.
#include "megart/safetensors.h"
#include "megart/train_checkpoint.h"

#include "train_test_util.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

using ::testing::HasSubstr;
using namespace train_test;
namespace fs = std::filesystem;

namespace {

class TrainResume : public ::testing::Test {
protected:
  void SetUp() override { write_dataset(dir_ / "data", bigram_documents(40, 50)); }

  // 12 iterations of warmup + cosine; the schedule does not depend on where a run stops.
  std::vector<std::string> args(std::vector<std::string> extra) const {
    std::vector<std::string> a = {"--data-path", dir_ / "data", "--train-iters", "12", "--lr", "0.05",
                                  "--lr-decay-style", "cosine", "--lr-warmup-iters", "2",
                                  "--global-batch-size", "4"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
  RunResult train(std::vector<std::string> extra) { return run_training(program_.desc, args(extra)); }

  std::vector<double> metrics_losses(const std::string &name) const { return losses(read_jsonl(dir_ / name)); }

  std::set<std::string> entries(const fs::path &folder) const {
    std::set<std::string> names;
    for (const auto &e : fs::directory_iterator(folder))
      names.insert(e.path().filename().string());
    return names;
  }

  TempDir dir_;
  const Program program_ = bigram_program<2>();
};

} // namespace

TEST_F(TrainResume, EachFlagRestoresWhatItSays) {
  ASSERT_EQ(train({"--save", dir_ / "ck", "--save-interval", "6", "--metrics-file", dir_ / "all.jsonl"}).code, 0);
  const std::vector<double> straight = metrics_losses("all.jsonl"); // iterations 1-12
  // Whole state: iterations 7-12 as in the straight run.
  RunResult r = train({"--load", dir_ / "ck", "--ckpt-step", "6", "--metrics-file", dir_ / "r.jsonl"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("resumed from " + (dir_ / "ck/iter_0000006") + " at iteration 6"));
  EXPECT_EQ(metrics_losses("r.jsonl"), std::vector<double>(straight.begin() + 6, straight.end()));
  // --no-load-optim: the same first step (same weights, same data), then another course
  // (fresh moments, the warmup again).
  r = train({"--load", dir_ / "ck", "--ckpt-step", "6", "--no-load-optim", "--metrics-file", dir_ / "o.jsonl"});
  ASSERT_EQ(r.code, 0) << r.err;
  const std::vector<double> no_optim = metrics_losses("o.jsonl");
  EXPECT_EQ(no_optim.front(), straight[6]);
  EXPECT_NE(no_optim.back(), straight.back());
  // --no-load-rng: this run's seed draws another order over the same weights.
  r = train({"--load", dir_ / "ck", "--ckpt-step", "6", "--no-load-rng", "--seed", "5", "--metrics-file",
             dir_ / "g.jsonl"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(metrics_losses("g.jsonl").front(), straight[6]);
  // --finetune: the weights only: a new run of iterations 1-12, as one started from iteration
  // 12's weights file.
  r = train({"--load", dir_ / "ck", "--finetune", "--metrics-file", dir_ / "f.jsonl"});
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_EQ(train({"--load", dir_ / "ck/iter_0000012/model.safetensors", "--metrics-file", dir_ / "w.jsonl"}).code, 0);
  EXPECT_EQ(metrics_losses("f.jsonl").size(), 12u);
  EXPECT_EQ(metrics_losses("f.jsonl"), metrics_losses("w.jsonl"));
  EXPECT_NE(metrics_losses("f.jsonl").front(), straight.front());
}

// 12 iterations of 4 over 24 samples are two epochs: a run resumed inside the first (at 5, the
// boundary ahead) or inside the second (at 10) reads on as the straight run did, bit for bit.
TEST_F(TrainResume, ContinuesAcrossEpochs) {
  write_dataset(dir_ / "small", bigram_documents(4, 50)); // 24 samples
  auto run = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = args(extra);
    a[1] = dir_ / "small"; // --data-path's value (a second --data-path would blend the two)
    return run_training(program_.desc, a);
  };
  ASSERT_EQ(run({"--save", dir_ / "ck", "--save-interval", "5", "--metrics-file", dir_ / "all.jsonl"}).code, 0);
  const std::vector<double> straight = metrics_losses("all.jsonl");
  ASSERT_EQ(straight.size(), 12u);
  for (int at : {5, 10}) {
    const std::string name = "r" + std::to_string(at) + ".jsonl";
    RunResult r = run({"--load", dir_ / "ck", "--ckpt-step", std::to_string(at), "--metrics-file", dir_ / name});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_THAT(r.out, HasSubstr("from sample " + std::to_string(4 * at) + " (epoch" + (at == 5 ? "s 1 to 2)" : " 2)")));
    EXPECT_EQ(metrics_losses(name), std::vector<double>(straight.begin() + at, straight.end())) << "from " << at;
  }
}

TEST_F(TrainResume, ChangedScheduleIsRefusedUnlessOverridden) {
  ASSERT_EQ(train({"--save", dir_ / "ck", "--exit-interval", "4"}).code, 0);
  RunResult r = train({"--load", dir_ / "ck", "--lr", "0.1"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("this run's schedule differs from the checkpoint's: --lr 0.1 (checkpoint: 0.05)"));
  // --train-iters moves the default --lr-decay-iters with it.
  r = run_training(program_.desc, {"--data-path", dir_ / "data", "--train-iters", "20", "--lr", "0.05",
                                   "--lr-decay-style", "cosine", "--lr-warmup-iters", "2",
                                   "--global-batch-size", "4", "--load", dir_ / "ck"});
  EXPECT_THAT(r.err, HasSubstr("--lr-decay-iters 20 (checkpoint: 12)"));
  r = train({"--load", dir_ / "ck", "--lr", "0.1", "--override-opt_param-scheduler"});
  EXPECT_EQ(r.code, 0) << r.err;
}

TEST_F(TrainResume, KeepLatestKeepsTheNewestAndNothingPastTheRun) {
  ASSERT_EQ(train({"--save", dir_ / "ck", "--save-interval", "2", "--keep-latest-k", "2"}).code, 0);
  EXPECT_EQ(entries(dir_ / "ck"),
            (std::set<std::string>{".megac-save.lock", "iter_0000010", "iter_0000012", "latest_checkpointed_iteration.txt"}));
  // A run resumed from iteration 10 with --overwrite-checkpoints replaces iteration 12 in place
  // and never counts a folder past the iteration it saved.
  ASSERT_EQ(train({"--save", dir_ / "ck2", "--save-interval", "2"}).code, 0);
  RunResult r = train({"--load", dir_ / "ck2", "--ckpt-step", "8", "--save", dir_ / "ck2", "--keep-latest-k", "1",
                       "--exit-interval", "10"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("already holds a checkpoint at iteration 12, and this run starts at iteration 8"));
  r = train({"--load", dir_ / "ck2", "--ckpt-step", "8", "--save", dir_ / "ck2", "--keep-latest-k", "1",
             "--exit-interval", "10", "--overwrite-checkpoints"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(entries(dir_ / "ck2"),
            (std::set<std::string>{".megac-save.lock", "iter_0000010", "iter_0000012", "latest_checkpointed_iteration.txt"}));
  EXPECT_EQ(megart::read_tracker(dir_ / "ck2"), 10);
  // Saving iteration 12 again exchanges the folders: the new one is complete, nothing is left.
  r = train({"--load", dir_ / "ck2", "--save", dir_ / "ck2", "--overwrite-checkpoints"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(megart::read_tracker(dir_ / "ck2"), 12);
  EXPECT_EQ(entries(dir_ / "ck2"),
            (std::set<std::string>{".megac-save.lock", "iter_0000010", "iter_0000012", "latest_checkpointed_iteration.txt"}));
  EXPECT_EQ(entries(dir_ / "ck2/iter_0000012"),
            (std::set<std::string>{"model.safetensors", "optimizer.safetensors", "train_state.json"}));
}

TEST_F(TrainResume, RequeuedJobStartsFreshThenResumes) {
  // The same command twice, as a requeued job runs it: the first finds nothing and starts anew.
  const std::vector<std::string> job = {"--load", dir_ / "ck", "--save", dir_ / "ck", "--exit-interval", "5"};
  RunResult r = train(job);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("no checkpoint in --load " + (dir_ / "ck") + " yet: a new run"));
  r = train(job);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("at iteration 5"));
  EXPECT_EQ(megart::read_tracker(dir_ / "ck"), 10);
}

TEST_F(TrainResume, StaleTemporariesAreRemovedAtStart) {
  ASSERT_EQ(train({"--save", dir_ / "ck", "--exit-interval", "3"}).code, 0);
  fs::create_directories(dir_ / "ck/iter_0000004.tmp.999");
  std::ofstream(dir_ / "ck/iter_0000004.tmp.999/model.safetensors") << "partial";
  std::ofstream(dir_ / "ck/latest_checkpointed_iteration.txt.tmp.999.0") << "4";
  fs::create_directories(dir_ / "ck/iter_0000002");
  std::ofstream(dir_ / "ck/iter_0000002/model.safetensors.tmp.999.1") << "partial";
  RunResult r = train({"--load", dir_ / "ck", "--save", dir_ / "ck", "--exit-interval", "6"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("removed 4 leftovers of an interrupted save"));
  EXPECT_EQ(entries(dir_ / "ck"),
            (std::set<std::string>{".megac-save.lock", "iter_0000003", "iter_0000006", "latest_checkpointed_iteration.txt"}));
}

TEST_F(TrainResume, LinksInTheSaveFolderAreNeverFollowed) {
  // Folders that look like a killed save's, but are links to someone else's files: the links
  // may go, what they point to stays.
  fs::create_directories(dir_ / "elsewhere");
  std::ofstream(dir_ / "elsewhere/weights.tmp.7") << "not ours";
  std::ofstream(dir_ / "elsewhere/keep.txt") << "not ours";
  fs::create_directories(dir_ / "ck");
  fs::create_directory_symlink(dir_ / "elsewhere", dir_ / "ck/iter_0000004");
  fs::create_directory_symlink(dir_ / "elsewhere", dir_ / "ck/iter_0000005.tmp.999");
  ASSERT_EQ(train({"--save", dir_ / "ck", "--exit-interval", "3", "--keep-latest-k", "1"}).code, 0);
  EXPECT_TRUE(fs::exists(dir_ / "elsewhere/weights.tmp.7"));
  EXPECT_TRUE(fs::exists(dir_ / "elsewhere/keep.txt"));
}
