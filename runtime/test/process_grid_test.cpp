// The process grid without MPI: Megatron's rank order, the --rank-layout table, and what a run
// started without mpirun does (a 1-rank plan never starts MPI; a bigger one is refused).
#include "megart/comm_mpi.h"
#include "megart/error.h"
#include "megart/launch_env.h"
#include "megart/process_grid.h"

#include "train_test_util.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

using megart::GridCoord;
using megart::GridShape;
using ::testing::HasSubstr;
using namespace train_test;

namespace {

std::vector<std::tuple<int64_t, int64_t, int64_t>> coords(const GridShape &s) {
  std::vector<std::tuple<int64_t, int64_t, int64_t>> out; // (pp, dp, tp) by global rank
  for (int64_t g = 0; g < s.world(); ++g) {
    const GridCoord c = megart::grid_coord_of(s, g);
    EXPECT_EQ(megart::global_rank_of(s, c), g);
    out.emplace_back(c.pp, c.dp, c.tp);
  }
  return out;
}

} // namespace

TEST(ProcessGrid, MegatronRankOrder) {
  using T = std::tuple<int64_t, int64_t, int64_t>;
  // tp fastest, then dp, then pp.
  // Shapes and coordinates (pp, dp, tp).
  EXPECT_EQ(coords({1, 2, 2}), (std::vector<T>{{0, 0, 0}, {0, 0, 1}, {0, 1, 0}, {0, 1, 1}}));
  EXPECT_EQ(coords({1, 1, 4}), (std::vector<T>{{0, 0, 0}, {0, 0, 1}, {0, 0, 2}, {0, 0, 3}}));
  EXPECT_EQ(coords({1, 4, 1}), (std::vector<T>{{0, 0, 0}, {0, 1, 0}, {0, 2, 0}, {0, 3, 0}}));
  EXPECT_EQ(coords({2, 2, 2}), (std::vector<T>{{0, 0, 0}, {0, 0, 1}, {0, 1, 0}, {0, 1, 1},
                                               {1, 0, 0}, {1, 0, 1}, {1, 1, 0}, {1, 1, 1}}));
}

TEST(ProcessGrid, RankLayoutTable) {
  EXPECT_EQ(megart::format_rank_layout({1, 2, 2}),
            "rank layout: pp 1 x dp 2 x tp 2 = 4 ranks (global rank = tp_rank + tp * (dp_rank "
            "+ dp * pp_rank))\n"
            "  global rank    pp    dp    tp\n"
            "            0     0     0     0\n"
            "            1     0     0     1\n"
            "            2     0     1     0\n"
            "            3     0     1     1\n");
  EXPECT_EQ(GridShape{}.describe(), "pp 1 x dp 1 x tp 1 = 1 rank");
}

TEST(ProcessGrid, ShapeOfProgramRejectsZero) {
  Program p = bigram_program<2>();
  p.desc.data_parallel_size = 0;
  try {
    megart::grid_shape_of(p.desc);
    FAIL() << "accepted dp 0";
  } catch (const megart::Error &e) {
    EXPECT_THAT(e.what(), HasSubstr("data_parallel_size is 0; it must be at least 1"));
  }
}

// These run as a plain process: the launcher's variables must be absent.
class ProcessGridNoLauncher : public ::testing::Test {
protected:
  void SetUp() override {
    if (megart::detect_launch_env().under_launcher)
      GTEST_SKIP() << "started by an MPI launcher";
  }
};

TEST_F(ProcessGridNoLauncher, OneRankPlanDoesNotStartMpi) {
  auto grid = megart::ProcessGrid::launch({1, 1, 1}, "./train");
  EXPECT_FALSE(grid->uses_mpi());
  EXPECT_FALSE(megart::mpi_running());
  EXPECT_EQ(grid->world_size(), 1);
  EXPECT_EQ(grid->tp().size(), 1);
  EXPECT_EQ(grid->dp().size(), 1);
  const megart::StepContext ctx = grid->step_context();
  EXPECT_EQ(ctx.tp, &grid->tp());
  EXPECT_EQ(ctx.dp, &grid->dp());
  EXPECT_EQ(ctx.pp, &grid->pp());
}

TEST_F(ProcessGridNoLauncher, BiggerPlanNeedsMpirun) {
  try {
    megart::ProcessGrid::launch({1, 2, 2}, "./train");
    FAIL() << "a 4-rank plan started as one process";
  } catch (const megart::Error &e) {
    EXPECT_STREQ(e.what(), "the program was compiled for pp 1 x dp 2 x tp 2 = 4 ranks, but it "
                           "was started without mpirun; run mpirun -np 4 ./train ...");
  }
  EXPECT_FALSE(megart::mpi_running());
}

TEST_F(ProcessGridNoLauncher, TrainMainRefusesAndPrintsTheLayout) {
  TempDir dir;
  const Program p = bigram_tp_program<2>(2, 2);
  RunResult r = run_training(p.desc, {"--data-path", dir / "data", "--train-iters", "1", "--lr",
                                      "0.1", "--metrics-file", dir / "m.jsonl"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "error: the program was compiled for pp 1 x dp 2 x tp 2 = 4 ranks, but it was "
                   "started without mpirun; run mpirun -np 4 train ...\n");
  EXPECT_FALSE(std::filesystem::exists(dir / "m.jsonl"));

  // --rank-layout needs neither mpirun nor the training flags.
  RunResult layout = run_training(p.desc, {"--rank-layout"});
  EXPECT_EQ(layout.code, 0) << layout.err;
  EXPECT_EQ(layout.out, megart::format_rank_layout({1, 2, 2}));
  EXPECT_FALSE(megart::mpi_running());
}

namespace {
// Sets environment variables for one test and restores them after.
class ScopedEnv {
public:
  ScopedEnv(std::initializer_list<std::pair<const char *, const char *>> vars) {
    for (const auto &[name, value] : vars) {
      const char *old = std::getenv(name);
      saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
      setenv(name, value, 1);
    }
  }
  ~ScopedEnv() {
    for (const auto &[name, old] : saved_)
      old ? setenv(name.c_str(), old->c_str(), 1) : unsetenv(name.c_str());
  }

private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};
} // namespace

TEST_F(ProcessGridNoLauncher, TorchrunWithSeveralProcessesIsRefused) {
  ScopedEnv env{{"WORLD_SIZE", "2"}, {"RANK", "1"}};
  const megart::LaunchEnv launch = megart::detect_launch_env();
  EXPECT_EQ(launch.foreign_launcher, "torchrun");
  EXPECT_EQ(launch.size, 2);
  EXPECT_EQ(launch.rank, 1);
  // A one-rank program would run twice, writing the same files: it stops, saying what works.
  try {
    megart::ProcessGrid::launch({1, 1, 1}, "./train");
    FAIL() << "two copies of a one-rank program were allowed";
  } catch (const megart::Error &e) {
    EXPECT_STREQ(e.what(), "started by torchrun as 2 processes, which MPI cannot connect: megac "
                           "programs communicate over MPI. The program was compiled for pp 1 x dp 1 "
                           "x tp 1 = 1 rank; run mpirun -np 1 ./train ...");
  }
  EXPECT_FALSE(megart::mpi_running());
}

TEST_F(ProcessGridNoLauncher, SrunWithoutPmiIsRefusedAndOneProcessIsFine) {
  {
    ScopedEnv env{{"SLURM_STEP_NUM_TASKS", "4"}, {"SLURM_PROCID", "0"}};
    try {
      megart::ProcessGrid::launch({1, 2, 2}, "./train");
      FAIL() << "srun's processes were not refused";
    } catch (const megart::Error &e) {
      EXPECT_THAT(e.what(), HasSubstr("started by srun as 4 processes, which MPI cannot connect"));
      EXPECT_THAT(e.what(), HasSubstr("Run mpirun -np 4 ./train ... (or srun --mpi=pmix -n 4)"));
    }
  }
  ScopedEnv one{{"WORLD_SIZE", "1"}, {"RANK", "0"}};
  EXPECT_EQ(megart::ProcessGrid::launch({1, 1, 1}, "./train")->world_size(), 1);
}
