#include "megart/launch_env.h"

#include <algorithm>
#include <cstdlib>
#include <initializer_list>
#include <tuple>
#include <utility>

namespace megart {

namespace {
// A variable's value as a non-negative int, or -1 when unset or not a number.
int env_int(const char *name) {
  const char *v = std::getenv(name);
  if (!v || !*v)
    return -1;
  char *end = nullptr;
  const long x = std::strtol(v, &end, 10);
  return (*end == '\0' && x >= 0 && x <= 1 << 30) ? static_cast<int>(x) : -1;
}

// The first of `vars` that holds a number; -1 when none does.
int first_env_int(std::initializer_list<const char *> vars) {
  for (const char *name : vars)
    if (const int v = env_int(name); v >= 0)
      return v;
  return -1;
}
} // namespace

LaunchEnv detect_launch_env() {
  LaunchEnv env;
  env.local_rank = first_env_int({"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "PMI_LOCAL_RANK",
                                  "MV2_COMM_WORLD_LOCAL_RANK", "PALS_LOCAL_RANKID", "SLURM_LOCALID", "LOCAL_RANK"});
  env.local_size = first_env_int({"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "PMI_LOCAL_SIZE",
                                  "MV2_COMM_WORLD_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE", "LOCAL_WORLD_SIZE"});
  for (const auto &[size_var, rank_var] : {std::pair{"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"},
                                           std::pair{"PMI_SIZE", "PMI_RANK"}}) {
    const int size = env_int(size_var);
    if (size < 1)
      continue;
    env.under_launcher = true;
    env.size = size;
    env.rank = std::max(env_int(rank_var), 0);
    return env;
  }
  // srun --mpi=pmix (and other PMIx launchers): MPI connects the ranks; the size comes later.
  if (const int rank = env_int("PMIX_RANK"); rank >= 0) {
    env.under_launcher = true;
    env.rank = rank;
    env.size = std::max(first_env_int({"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"}), 1);
    return env;
  }
  // Launchers that start processes MPI does not connect: they only say how many there are.
  for (const auto &[name, size_var, rank_var] :
       {std::tuple{"torchrun", "WORLD_SIZE", "RANK"},
        std::tuple{"srun", "SLURM_STEP_NUM_TASKS", "SLURM_PROCID"}}) {
    const int size = env_int(size_var);
    if (size < 1)
      continue;
    env.foreign_launcher = name;
    env.size = size;
    env.rank = std::max(env_int(rank_var), 0);
    return env;
  }
  return env;
}

} // namespace megart
