// How this process was started: by an MPI launcher (OpenMPI's mpirun/mpiexec, or a PMI launcher
// such as MPICH's or Slurm's) or directly. Read from the environment the launcher sets, so it is
// known before MPI starts and single-rank runs never start MPI.
#pragma once

namespace megart {

struct LaunchEnv {
  bool under_launcher = false; // OMPI_COMM_WORLD_SIZE (or PMI_SIZE) is set
  int rank = 0;                // this process's world rank as the launcher numbered it
  int size = 1;                // processes the launcher started
  // This process's rank among those on its node, and how many there are, from the first of the
  // launchers' variables that is set (OpenMPI, MPICH/Hydra, PMI, MVAPICH, PALS, Slurm,
  // torchrun); -1 when none is.
  int local_rank = -1;
  int local_size = -1;
};

LaunchEnv detect_launch_env();

} // namespace megart
