// The process grid of a parallel plan: pp x dp x tp ranks numbered in Megatron's order
// (grid_layout.h), and one communicator per axis joining the ranks that differ only in that
// axis's coordinate; with expert parallelism, dp's split into ep groups and expert_dp groups.
#pragma once

#include "megart/comm.h"
#include "megart/comm_counting.h"
#include "megart/comm_nccl_rules.h"
#include "megart/device.h"
#include "megart/grid_layout.h"
#include "megart/program.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace megart {

class MpiCommunicator;
class MpiSession;

// The plan a program was compiled for; throws naming the field when a size is < 1.
GridShape grid_shape_of(const ProgramDesc &program);

class ProcessGrid {
public:
  // One process and no MPI: every axis has size 1 and uses a SelfCommunicator.
  static std::unique_ptr<ProcessGrid> single();

  // The grid a training program runs on. Started without an MPI launcher, a 1-rank plan gets
  // single() (MPI never starts) and a bigger plan is an error. Under mpirun, starts MPI (it is
  // finalized when the grid is destroyed, also after an error) and checks the world size
  // against the plan. `program` (argv[0]) appears in the suggested mpirun command; a started
  // size that differs is also answered with `recompile_command` (ProgramDesc's, may be empty)
  // and the --dp that fits it.
  static std::unique_ptr<ProcessGrid> launch(const GridShape &shape, const std::string &program,
                                             const std::string &recompile_command = "");

  // The grid on the ranks of `parent`, whose size must be shape.world(): parent's rank r is
  // global rank r. Collective over `parent`. Lets a test run several grids in one MPI job.
  static std::unique_ptr<ProcessGrid> on(const MpiCommunicator &parent, const GridShape &shape,
                                         const std::string &program = "train",
                                         const std::string &recompile_command = "");

  ~ProcessGrid();
  ProcessGrid(const ProcessGrid &) = delete;
  ProcessGrid &operator=(const ProcessGrid &) = delete;

  const GridShape &shape() const { return shape_; }
  const GridCoord &coord() const { return coord_; }
  int64_t global_rank() const { return global_rank_; }
  int64_t world_size() const { return shape_.world(); }
  bool uses_mpi() const { return pp_mpi_ != nullptr; }
  Communicator &tp() const { return *tp_; }
  Communicator &dp() const { return *dp_; }
  Communicator &pp() const { return *pp_; }
  Communicator &world() const { return *world_; } // every rank of the grid, in global order
  // The dp ranks the sharded state spans and its replicas (StepContext::dp_shard, dp_replicate):
  // after split_data_parallel, else dp and a group of one.
  Communicator &dp_shard() const { return dp_shard_ ? *dp_shard_ : *dp_; }
  Communicator &dp_replicate() const { return dp_replicate_ ? *dp_replicate_ : *self_; }
  // Expert parallelism (shape().ep > 1): the ep consecutive dp ranks that split the experts, and
  // the dp ranks holding the same experts (StepContext::ep, expert_dp); else a group of one and dp.
  Communicator &ep() const { return ep_ ? *ep_ : *self_; }
  Communicator &expert_dp() const { return expert_dp_ ? *expert_dp_ : *dp_; }
  StepContext step_context() const {
    StepContext ctx;
    ctx.tp = tp_.get();
    ctx.dp = dp_.get();
    ctx.pp = pp_.get();
    ctx.dp_shard = &dp_shard();
    ctx.dp_replicate = &dp_replicate();
    ctx.ep = &ep();
    ctx.expert_dp = &expert_dp();
    return ctx;
  }

  // Hybrid sharding: splits dp into groups of `shard_degree` consecutive dp ranks (dp_shard) and
  // the ranks with the same place in each group (dp_replicate). Collective over dp; before
  // use_device. Nothing to do when shard_degree is dp; throws unless it divides dp.
  void split_data_parallel(int64_t shard_degree);

  // Moves the axis communicators (tp, dp, pp, and the groups pp_subgroup makes afterwards) onto
  // `device` (Device::communicator: NCCL for CUDA, unchanged on the CPU); they keep serving
  // host buffers. world stays as it is. Collective over every axis.
  void use_device(Device &device);

  // What this rank has sent over each axis since the last reset (comm_counting.h), the groups
  // pp_subgroup makes counted as pp.
  const CommunicationBytes &sent_bytes() const { return sent_; }
  void reset_sent_bytes() { sent_ = CommunicationBytes{}; }

  // The communication timeout of every axis (Communicator::set_timeout), and of the groups
  // pp_subgroup makes afterwards.
  void set_timeout(double seconds);

  // The ranks of this rank's pp group whose pp coordinate is in `pp_ranks` (ascending, the
  // same list on every rank of the group), as one communicator in pp order named `axis`; null
  // on the ranks not in the list. Collective over pp. Tied weights need it (GPT-2's wte lives
  // on the first and the last stage, Megatron's "embedding" group).
  std::unique_ptr<Communicator> pp_subgroup(const std::vector<int64_t> &pp_ranks,
                                            const std::string &axis) const;

private:
  ProcessGrid() = default;
  // Wraps tp, dp and pp in CountingCommunicators.
  void count_axes();

  // Declared first so that it is destroyed last: communicators are freed before MPI_Finalize.
  std::unique_ptr<MpiSession> session_;
  GridShape shape_;
  GridCoord coord_;
  int64_t global_rank_ = 0;
  std::unique_ptr<Communicator> tp_, dp_, pp_, world_, dp_shard_, dp_replicate_, ep_, expert_dp_;
  std::unique_ptr<Communicator> self_ = std::make_unique<SelfCommunicator>();
  MpiCommunicator *pp_mpi_ = nullptr; // pp's MPI communicator when the grid runs on MPI (it can split)
  MpiCommunicator *dp_mpi_ = nullptr; // dp's, likewise
  NcclRules nccl_rules_ = NcclRules::Off; // MEGART_NCCL_RULES: every axis checked against NCCL's rules
  Device *device_ = &cpu_device();
  mutable CommunicationBytes sent_; // the counting communicators add to it (pp_subgroup's too)
};

} // namespace megart
