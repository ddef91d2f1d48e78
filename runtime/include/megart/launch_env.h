// How this process was started: by an MPI launcher (OpenMPI's mpirun/mpiexec, or a PMI launcher
// such as MPICH's or Slurm's) or directly. Read from the environment the launcher sets, so it is
// known before MPI starts and single-rank runs never start MPI.
#pragma once

#include <string>

namespace megart {

struct LaunchEnv {
  bool under_launcher = false; // OMPI_COMM_WORLD_SIZE (or PMI_SIZE) is set: MPI will see the ranks
  int rank = 0;                // this process's world rank as the launcher numbered it
  int size = 1;                // processes the launcher started
  // A launcher MPI cannot join up (torchrun's WORLD_SIZE / RANK, or srun without MPI's PMI:
  // SLURM_STEP_NUM_TASKS / SLURM_PROCID): its name, or "" when none. Its processes would each
  // start alone, so a program started that way with more than one process must stop.
  std::string foreign_launcher;
  // This process's rank among those on its node, and how many there are, from the first of the
  // launchers' variables that is set (OpenMPI, MPICH/Hydra, PMI, MVAPICH, PALS, Slurm,
  // torchrun); -1 when none is.
  int local_rank = -1;
  int local_size = -1;
};

LaunchEnv detect_launch_env();

} // namespace megart
