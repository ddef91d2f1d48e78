#include "megart/cpu_threads.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <initializer_list>

using ::testing::HasSubstr;

namespace {

cpu_set_t mask(std::initializer_list<int> cores) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cores)
    CPU_SET(c, &set);
  return set;
}

} // namespace

// A container's or a Slurm job's cpuset: the rank's mask is its parent's, narrower than the
// node. The ranks share it, rather than each taking all of it as a launcher's binding.
TEST(CpuThreads, ACpusetIsSharedByTheNodesRanks) {
  const cpu_set_t allowed = mask({4, 5, 6, 7});
  const megart::RankCores cores = megart::rank_cores(allowed, &allowed, 16);
  EXPECT_FALSE(cores.bound);
  EXPECT_EQ(cores.allowed, 4);
  EXPECT_EQ(cores.shared, 4);
  EXPECT_EQ(megart::default_threads(cores, 2), 2);
  const megart::CpuThreadsReport r = megart::describe_cpu_threads(2, megart::ThreadSource::CoresPerRank, cores, 2);
  EXPECT_EQ(r.line, "2 threads per rank (4 cores allowed (of 16) / 2 ranks on this node; OMP_NUM_THREADS sets it)");
  EXPECT_EQ(r.warning, "");
  // Against the allowed cores, not the node's: 2 x 4 threads on 4 cores fight.
  EXPECT_EQ(megart::describe_cpu_threads(4, megart::ThreadSource::Environment, cores, 2).warning,
            "2 ranks x 4 threads exceed the 4 cores allowed on this node (of 16): the ranks will take cores from "
            "each other; set OMP_NUM_THREADS=2 (or leave it unset)");
}

// mpirun (or srun --cpu-bind) narrows each rank's mask below its own: those cores are the rank's.
TEST(CpuThreads, AMaskNarrowerThanTheParentsIsALaunchersBinding) {
  const cpu_set_t parent = mask({0, 1, 2, 3}), own = mask({2, 3});
  const megart::RankCores cores = megart::rank_cores(own, &parent, 4);
  EXPECT_TRUE(cores.bound);
  EXPECT_EQ(cores.shared, 4);
  EXPECT_EQ(megart::default_threads(cores, 2), 2);
  EXPECT_EQ(megart::describe_cpu_threads(2, megart::ThreadSource::CoresPerRank, cores, 2).line,
            "2 threads per rank (2 cores bound to this rank by its launcher; OMP_NUM_THREADS sets it)");
  EXPECT_THAT(megart::describe_cpu_threads(3, megart::ThreadSource::Environment, cores, 2).warning,
              HasSubstr("2 ranks x 3 threads exceed the 4 cores of this node"));
}

TEST(CpuThreads, TheWholeNodeOrAnUnreadableParentIsShared) {
  const cpu_set_t all = mask({0, 1}), other = mask({1, 2});
  for (const megart::RankCores &cores : {megart::rank_cores(all, nullptr, 2), megart::rank_cores(all, &all, 2),
                                         megart::rank_cores(all, &other, 2)}) { // not a subset: not a binding
    EXPECT_FALSE(cores.bound);
    EXPECT_EQ(megart::default_threads(cores, 2), 1);
    EXPECT_EQ(megart::default_threads(cores, 3), 1);
    EXPECT_EQ(megart::describe_cpu_threads(1, megart::ThreadSource::CoresPerRank, cores, 2).line,
              "1 thread per rank (2 cores / 2 ranks on this node; OMP_NUM_THREADS sets it)");
  }
}
