#include "megart/cpu_threads.h"

#include "megart/launch_env.h"

#include <omp.h>
#include <sched.h>
#include <string>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <vector>

namespace megart {

namespace {

constexpr const char *kRestarted = "MEGART_WAIT_POLICY_SET"; // a restart happens once at most

enum class ThreadSource { Environment, CoresPerRank, OpenMPDefault };
ThreadSource thread_source = ThreadSource::OpenMPDefault;

int node_cores() { return std::max(1, static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN))); }

// The cores this process may run on (a launcher's binding), else the node's.
int usable_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    return std::max(1, CPU_COUNT(&set));
  return node_cores();
}

int ranks_on_node() { return std::max(1, detect_launch_env().local_size); }

// This process's own command line, as the kernel recorded it (not a test's argv).
std::vector<std::string> own_command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  size_t start = 0;
  for (size_t i = 0; i < all.size(); ++i)
    if (all[i] == '\0') {
      args.push_back(all.substr(start, i - start));
      start = i + 1;
    }
  return args;
}

void restart_with_passive_wait() {
  if (std::getenv("OMP_WAIT_POLICY") || std::getenv(kRestarted))
    return;
  std::vector<std::string> args = own_command_line();
  if (args.empty())
    return;
  setenv("OMP_WAIT_POLICY", "passive", 1);
  setenv(kRestarted, "1", 1);
  std::vector<char *> argv;
  for (std::string &a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  execv("/proc/self/exe", argv.data());
  // Not restarted (no /proc): carry on with OpenMP's own wait policy.
  unsetenv("OMP_WAIT_POLICY");
}

} // namespace

void adopt_cpu_thread_defaults() {
  restart_with_passive_wait();
  if (std::getenv("OMP_NUM_THREADS")) {
    thread_source = ThreadSource::Environment;
    return;
  }
  // Bound by the launcher to fewer cores than the node has: those are this rank's share.
  const int usable = usable_cores();
  const int share = usable < node_cores() ? usable : std::max(1, usable / ranks_on_node());
  omp_set_num_threads(share);
  thread_source = ThreadSource::CoresPerRank;
}

CpuThreadsReport describe_cpu_threads() {
  const int threads = omp_get_max_threads(), ranks = ranks_on_node(), cores = node_cores();
  CpuThreadsReport r;
  r.line = std::to_string(threads) + (threads == 1 ? " thread" : " threads") + " per rank (";
  switch (std::getenv("OMP_NUM_THREADS") ? ThreadSource::Environment : thread_source) {
  case ThreadSource::Environment:
    r.line += "OMP_NUM_THREADS";
    break;
  case ThreadSource::CoresPerRank:
    if (usable_cores() < cores)
      r.line += std::to_string(usable_cores()) + (usable_cores() == 1 ? " core" : " cores") +
                " bound to this rank by its launcher";
    else
      r.line += std::to_string(cores) + (cores == 1 ? " core / " : " cores / ") + std::to_string(ranks) +
                (ranks == 1 ? " rank" : " ranks") + " on this node";
    r.line += "; OMP_NUM_THREADS sets it";
    break;
  case ThreadSource::OpenMPDefault:
    r.line += "OpenMP's default";
    break;
  }
  r.line += ")";
  // Only threads can be taken back: more ranks than cores at one thread each is the launch's choice.
  if (threads > 1 && static_cast<long>(threads) * ranks > cores)
    r.warning = std::to_string(ranks) + " ranks x " + std::to_string(threads) + " threads exceed the " +
                std::to_string(cores) + " cores of this node: the ranks will take cores from each other; set "
                "OMP_NUM_THREADS=" + std::to_string(std::max(1, cores / ranks)) + " (or leave it unset)";
  return r;
}

} // namespace megart
