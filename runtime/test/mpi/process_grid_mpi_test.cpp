// Grids on real ranks: each rank's coordinates, and which ranks each axis communicator joins.
#include "megart/error.h"
#include "megart/process_grid.h"

#include "mpi_test_util.h"

#include <gtest/gtest.h>

using megart::GridCoord;
using megart::GridShape;

namespace {

// The global ranks of the members of `axis`, in the axis's rank order.
std::vector<int64_t> members(megart::Communicator &axis, int64_t global_rank) {
  std::vector<float> all(static_cast<size_t>(axis.size()));
  const float mine = static_cast<float>(global_rank);
  axis.all_gather(all.data(), &mine, 1);
  return std::vector<int64_t>(all.begin(), all.end());
}

void check_grid(const GridShape &shape, const std::vector<GridCoord> &expected) {
  auto w = mpi_test::world();
  auto grid = megart::ProcessGrid::on(*w, shape);
  const int64_t g = w->rank();
  ASSERT_EQ(grid->global_rank(), g);
  EXPECT_TRUE(grid->uses_mpi());
  const GridCoord c = grid->coord();
  EXPECT_EQ(c.tp, expected[g].tp) << shape.describe() << " rank " << g;
  EXPECT_EQ(c.pp, expected[g].pp) << shape.describe() << " rank " << g;
  EXPECT_EQ(c.dp, expected[g].dp) << shape.describe() << " rank " << g;
  EXPECT_EQ(grid->tp().rank(), c.tp);
  EXPECT_EQ(grid->dp().rank(), c.dp);
  EXPECT_EQ(grid->pp().rank(), c.pp);
  // Each axis joins the ranks that differ from this one only in that axis, in axis order.
  std::vector<int64_t> tp, dp, pp, world;
  for (int64_t t = 0; t < shape.tp; ++t)
    tp.push_back(megart::global_rank_of(shape, {c.pp, c.dp, t}));
  for (int64_t d = 0; d < shape.dp; ++d)
    dp.push_back(megart::global_rank_of(shape, {c.pp, d, c.tp}));
  for (int64_t p = 0; p < shape.pp; ++p)
    pp.push_back(megart::global_rank_of(shape, {p, c.dp, c.tp}));
  for (int64_t r = 0; r < shape.world(); ++r)
    world.push_back(r);
  EXPECT_EQ(members(grid->tp(), g), tp) << shape.describe();
  EXPECT_EQ(members(grid->dp(), g), dp) << shape.describe();
  EXPECT_EQ(members(grid->pp(), g), pp) << shape.describe();
  EXPECT_EQ(members(grid->world(), g), world) << shape.describe();
  const megart::StepContext ctx = grid->step_context();
  EXPECT_EQ(ctx.tp, &grid->tp());
}

// {pp, dp, tp} per global rank.
GridCoord at(int64_t pp, int64_t dp, int64_t tp) { return {pp, dp, tp}; }

} // namespace

TEST(MpiGrid, FourRanks) {
  if (mpi_test::world_size() != 4)
    GTEST_SKIP() << "needs 4 ranks";
  check_grid({1, 2, 2}, {at(0, 0, 0), at(0, 0, 1), at(0, 1, 0), at(0, 1, 1)});
  check_grid({1, 1, 4}, {at(0, 0, 0), at(0, 0, 1), at(0, 0, 2), at(0, 0, 3)});
  check_grid({1, 4, 1}, {at(0, 0, 0), at(0, 1, 0), at(0, 2, 0), at(0, 3, 0)});
  check_grid({2, 2, 1}, {at(0, 0, 0), at(0, 1, 0), at(1, 0, 0), at(1, 1, 0)});
}

TEST(MpiGrid, TwoRanks) {
  if (mpi_test::world_size() != 2)
    GTEST_SKIP() << "needs 2 ranks";
  check_grid({1, 1, 2}, {at(0, 0, 0), at(0, 0, 1)});
  check_grid({1, 2, 1}, {at(0, 0, 0), at(0, 1, 0)});
  check_grid({2, 1, 1}, {at(0, 0, 0), at(1, 0, 0)});
}

TEST(MpiGrid, WorldSizeMismatch) {
  auto w = mpi_test::world();
  const int64_t n = w->size();
  const GridShape plan{1, n, 2}; // twice the ranks there are
  try {
    megart::ProcessGrid::on(*w, plan, "./train");
    FAIL() << "built a grid of " << plan.world() << " on " << n << " ranks";
  } catch (const megart::Error &e) {
    EXPECT_EQ(std::string(e.what()),
              "the program was compiled for pp 1 x dp " + std::to_string(n) + " x tp 2 = " +
                  std::to_string(2 * n) + " ranks, but mpirun started " + std::to_string(n) +
                  "; run mpirun -np " + std::to_string(2 * n) + " ./train ...");
  }
}
