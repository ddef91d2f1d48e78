#include "megart/cpu_threads.h"

#include "megart/launch_env.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace megart {

namespace {

constexpr const char *kRestarted = "MEGART_WAIT_POLICY_SET"; // a restart happens once at most

ThreadSource thread_source = ThreadSource::OpenMPDefault;

int ranks_on_node() { return std::max(1, detect_launch_env().local_size); }

std::string cores_text(int n) { return std::to_string(n) + (n == 1 ? " core" : " cores"); }

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

// The file this program was started from. The path /proc/self/exe names, not the link itself:
// under valgrind the link leads to valgrind's own tool binary (which refuses to run directly),
// while reading it gives the program's path, as valgrind reports it.
std::string own_executable() {
  char path[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  return n > 0 ? std::string(path, static_cast<size_t>(n)) : std::string();
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
  const std::string exe = own_executable();
  if (!exe.empty())
    execv(exe.c_str(), argv.data());
  else // no /proc/self/exe to read: the command's own name, found as the shell found it
    execvp(argv[0], argv.data());
  // Not restarted: carry on with OpenMP's own wait policy.
  unsetenv("OMP_WAIT_POLICY");
}

} // namespace

RankCores rank_cores(const cpu_set_t &own, const cpu_set_t *parent, int node) {
  RankCores c;
  c.node = std::max(1, node);
  c.allowed = std::max(1, CPU_COUNT(&own));
  c.shared = c.allowed;
  if (parent) {
    cpu_set_t both;
    CPU_AND(&both, &own, parent);
    c.bound = CPU_EQUAL(&both, &own) && !CPU_EQUAL(&own, parent);
    if (c.bound)
      c.shared = std::max(1, CPU_COUNT(parent));
  }
  return c;
}

RankCores this_rank_cores() {
  const int node = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  cpu_set_t own, parent;
  if (sched_getaffinity(0, sizeof own, &own) != 0) { // no mask to read: the node's cores
    RankCores c;
    c.node = c.allowed = c.shared = std::max(1, node);
    return c;
  }
  const bool has_parent = sched_getaffinity(getppid(), sizeof parent, &parent) == 0;
  return rank_cores(own, has_parent ? &parent : nullptr, node);
}

int default_threads(const RankCores &cores, int ranks_on_node) {
  return cores.bound ? cores.allowed : std::max(1, cores.allowed / std::max(1, ranks_on_node));
}

void adopt_cpu_thread_defaults() {
  restart_with_passive_wait();
  if (std::getenv("OMP_NUM_THREADS")) {
    thread_source = ThreadSource::Environment;
    return;
  }
  omp_set_num_threads(default_threads(this_rank_cores(), ranks_on_node()));
  thread_source = ThreadSource::CoresPerRank;
}

CpuThreadsReport describe_cpu_threads(int threads, ThreadSource source, const RankCores &cores, int ranks) {
  CpuThreadsReport r;
  r.line = std::to_string(threads) + (threads == 1 ? " thread" : " threads") + " per rank (";
  switch (source) {
  case ThreadSource::Environment:
    r.line += "OMP_NUM_THREADS";
    break;
  case ThreadSource::CoresPerRank:
    if (cores.bound)
      r.line += cores_text(cores.allowed) + " bound to this rank by its launcher";
    else
      r.line += cores_text(cores.allowed) +
                (cores.allowed < cores.node ? " allowed (of " + std::to_string(cores.node) + ")" : "") + " / " +
                std::to_string(ranks) + (ranks == 1 ? " rank" : " ranks") + " on this node";
    r.line += "; OMP_NUM_THREADS sets it";
    break;
  case ThreadSource::OpenMPDefault:
    r.line += "OpenMP's default";
    break;
  }
  r.line += ")";
  // Only threads can be taken back: more ranks than cores at one thread each is the launch's choice.
  if (threads > 1 && static_cast<long>(threads) * ranks > cores.shared)
    r.warning = std::to_string(ranks) + " ranks x " + std::to_string(threads) + " threads exceed the " +
                cores_text(cores.shared) +
                (cores.shared < cores.node ? " allowed on this node (of " + std::to_string(cores.node) + ")"
                                           : " of this node") +
                ": the ranks will take cores from each other; set OMP_NUM_THREADS=" +
                std::to_string(std::max(1, cores.shared / std::max(1, ranks))) + " (or leave it unset)";
  return r;
}

CpuThreadsReport describe_cpu_threads() {
  const ThreadSource source = std::getenv("OMP_NUM_THREADS") ? ThreadSource::Environment : thread_source;
  return describe_cpu_threads(omp_get_max_threads(), source, this_rank_cores(), ranks_on_node());
}

} // namespace megart
