// Threads of the CPU backend. OpenMP's defaults suit one process per machine: N ranks on a node
// would each start a thread per core and spin at every barrier (2 ranks on 2 cores trained 14x
// slower than with one thread each). A program instead gives each rank its share of the node's
// cores and waits passively, unless OMP_NUM_THREADS / OMP_WAIT_POLICY say otherwise.
#pragma once

#include <string>

namespace megart {

// Called first thing by a program's main. OpenMP reads OMP_WAIT_POLICY before main runs, so when
// it is unset the process restarts itself once with it set to passive (same command line,
// nothing started yet: no MPI, no files). Then, without OMP_NUM_THREADS, the thread count
// becomes the cores a launcher bound this rank to, or else the node's cores divided by the ranks
// on it (at least 1).
void adopt_cpu_thread_defaults();

struct CpuThreadsReport {
  std::string line;    // "1 thread per rank (2 cores / 2 ranks on this node)"
  std::string warning; // empty, or "ranks x threads exceed the node's cores ..."
};
// What the header prints about threads on the CPU backend.
CpuThreadsReport describe_cpu_threads();

} // namespace megart
