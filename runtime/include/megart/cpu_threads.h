// Threads of the CPU backend. OpenMP's defaults suit one process per machine: N ranks on a node
// would each start a thread per core and spin at every barrier (2 ranks on 2 cores trained 14x
// slower than with one thread each). A program instead gives each rank its share of the cores it
// may use and waits passively, unless OMP_NUM_THREADS / OMP_WAIT_POLICY say otherwise.
#pragma once

#include <sched.h>

#include <string>

namespace megart {

// Called first thing by a program's main. OpenMP reads OMP_WAIT_POLICY before main runs, so when
// it is unset the process restarts itself once with it set to passive (same command line,
// nothing started yet: no MPI, no files). Then, without OMP_NUM_THREADS, the thread count
// becomes the cores a launcher bound this rank to, or else the cores this rank may use divided by
// the ranks on its node (at least 1).
void adopt_cpu_thread_defaults();

// The cores a rank may use, and who chose them. A launcher binds a rank by narrowing its mask
// below its parent's (mpirun's or prted's, slurmstepd's); a container's or a Slurm job's cpuset
// narrows the parent's as well, so a mask equal to the parent's is all the node's ranks' to share.
// (A wrapper script between launcher and rank inherits the binding: the rank then reads as
// unbound and divides its few cores further, never taking more than it was given.)
struct RankCores {
  int node = 1;       // cores online
  int allowed = 1;    // in this rank's mask
  bool bound = false; // the mask is a proper subset of the parent's: a launcher's binding
  int shared = 1;     // the cores this node's ranks share: the parent's mask when bound, else this rank's
};
// `parent` null: its mask could not be read (the rank then counts as unbound).
RankCores rank_cores(const cpu_set_t &own, const cpu_set_t *parent, int node);
// This process's, read from the kernel.
RankCores this_rank_cores();

// Threads for a rank without OMP_NUM_THREADS: its bound cores, or its share of the allowed ones.
int default_threads(const RankCores &cores, int ranks_on_node);

enum class ThreadSource { Environment, CoresPerRank, OpenMPDefault };

struct CpuThreadsReport {
  std::string line;    // "1 thread per rank (2 cores / 2 ranks on this node)"
  std::string warning; // empty, or "ranks x threads exceed the cores allowed on this node ..."
};
CpuThreadsReport describe_cpu_threads(int threads, ThreadSource source, const RankCores &cores, int ranks_on_node);
// What the header prints about threads on the CPU backend.
CpuThreadsReport describe_cpu_threads();

} // namespace megart
