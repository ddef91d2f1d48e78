#include "megart/process_grid.h"

#include "megart/comm_mpi.h"
#include "megart/comm_nccl_rules.h"
#include "megart/error.h"
#include "megart/launch_env.h"

#include <algorithm>
#include <climits>
#include <cstdio>

namespace megart {

GridShape grid_shape_of(const ProgramDesc &p) {
  auto check = [](const char *field, int64_t v) {
    if (v < 1 || v > INT_MAX)
      throw Error(std::string("compiled program: ") + field + " is " + std::to_string(v) +
                  "; it must be at least 1 (regenerate the program with megac compile)");
  };
  check("tensor_parallel_size", p.tensor_parallel_size);
  check("pipeline_parallel_size", p.pipeline_parallel_size);
  check("data_parallel_size", p.data_parallel_size);
  check("expert_parallel_size", p.expert_parallel_size);
  GridShape shape;
  shape.pp = p.pipeline_parallel_size, shape.dp = p.data_parallel_size, shape.tp = p.tensor_parallel_size;
  shape.ep = p.expert_parallel_size;
  if (shape.dp % shape.ep != 0)
    throw Error("compiled program: expert_parallel_size " + std::to_string(shape.ep) +
                " does not divide data_parallel_size " + std::to_string(shape.dp) +
                " (regenerate the program with megac compile)");
  if (shape.world() > INT_MAX) // MPI numbers ranks with int
    throw Error("compiled program: " + shape.describe() + " is more ranks than MPI can number");
  return shape;
}

ProcessGrid::~ProcessGrid() = default;

std::unique_ptr<ProcessGrid> ProcessGrid::single() {
  std::unique_ptr<ProcessGrid> g(new ProcessGrid());
  g->tp_ = std::make_unique<SelfCommunicator>();
  g->dp_ = std::make_unique<SelfCommunicator>();
  g->pp_ = std::make_unique<SelfCommunicator>();
  g->world_ = std::make_unique<SelfCommunicator>();
  g->count_axes();
  return g;
}

namespace {
std::string run_with(const GridShape &shape, const std::string &program) {
  return "run mpirun -np " + std::to_string(shape.world()) + " " + program + " ...";
}

// "; or compile for 2 ranks: megac compile spec.yaml --tp 2 -o out --dp 1": the same tp and pp
// with the data-parallel size that the started ranks make.
std::string recompile_for(const GridShape &shape, int64_t ranks, const std::string &recompile_command) {
  if (recompile_command.empty() || ranks < 1)
    return "";
  const int64_t model = shape.tp * shape.pp;
  if (ranks % model != 0)
    return "; " + std::to_string(ranks) + " ranks cannot keep tp " + std::to_string(shape.tp) + " x pp " +
           std::to_string(shape.pp) + " (" + std::to_string(ranks) + " is not a multiple of " +
           std::to_string(model) + "): compile with a tp and pp whose product divides it";
  return "; or compile for " + std::to_string(ranks) + (ranks == 1 ? " rank: " : " ranks: ") +
         recompile_command + " --dp " + std::to_string(ranks / model);
}
// An axis's MPI communicator as the grid uses it: under MEGART_NCCL_RULES=1 sending
// synchronously and checked against NCCL's rules (comm_nccl_rules.h).
std::unique_ptr<Communicator> axis_communicator(std::unique_ptr<MpiCommunicator> c, NcclRules nccl_rules) {
  if (nccl_rules == NcclRules::Off)
    return c;
  c->set_synchronous_sends(true);
  const std::string axis = c->axis();
  return std::make_unique<NcclRulesCommunicator>(std::move(c), axis, nccl_rules);
}
} // namespace

std::unique_ptr<ProcessGrid> ProcessGrid::launch(const GridShape &shape, const std::string &program,
                                                 const std::string &recompile_command) {
  const LaunchEnv env = detect_launch_env();
  if (!env.under_launcher && !env.foreign_launcher.empty() && env.size > 1)
    // Each process would run alone, as a copy of the whole job writing the same files.
    throw Error("started by " + env.foreign_launcher + " as " + std::to_string(env.size) +
                " processes, which MPI cannot connect: megac programs communicate over MPI. " +
                (shape.world() == env.size ? "R" : "The program was compiled for " + shape.describe() +
                                                       "; r") +
                "un mpirun -np " + std::to_string(shape.world()) + " " + program + " ..." +
                (env.foreign_launcher == "srun" ? " (or srun --mpi=pmix -n " +
                                                      std::to_string(shape.world()) + ")"
                                                : std::string()));
  if (!env.under_launcher) {
    if (shape.world() == 1)
      return single();
    throw Error("the program was compiled for " + shape.describe() +
                ", but it was started without mpirun; " + run_with(shape, program) +
                recompile_for(shape, 1, recompile_command));
  }
  // Destroyed in reverse order if on() throws: the world handle, then the session (finalize).
  auto session = std::make_unique<MpiSession>();
  const std::unique_ptr<MpiCommunicator> world = MpiCommunicator::world();
  std::unique_ptr<ProcessGrid> grid = on(*world, shape, program, recompile_command);
  grid->session_ = std::move(session);
  return grid;
}

std::unique_ptr<ProcessGrid> ProcessGrid::on(const MpiCommunicator &parent, const GridShape &shape,
                                             const std::string &program, const std::string &recompile_command) {
  if (parent.size() != shape.world())
    throw Error("the program was compiled for " + shape.describe() + ", but mpirun started " +
                std::to_string(parent.size()) + "; " + run_with(shape, program) +
                recompile_for(shape, parent.size(), recompile_command));
  std::unique_ptr<ProcessGrid> g(new ProcessGrid());
  g->shape_ = shape;
  g->global_rank_ = parent.rank();
  const GridCoord c = g->coord_ = grid_coord_of(shape, parent.rank());
  // Ranks with the same colour form a group; the key orders them by the axis coordinate.
  auto color = [](int64_t v) { return static_cast<int>(v); };
  const NcclRules rules = g->nccl_rules_ = nccl_rules_requested();
  g->tp_ = axis_communicator(parent.split(color(c.dp + shape.dp * c.pp), color(c.tp), "tp"), rules);
  std::unique_ptr<MpiCommunicator> dp = parent.split(color(c.tp + shape.tp * c.pp), color(c.dp), "dp");
  g->dp_mpi_ = dp.get();
  g->dp_ = axis_communicator(std::move(dp), rules);
  std::unique_ptr<MpiCommunicator> pp = parent.split(color(c.tp + shape.tp * c.dp), color(c.pp), "pp");
  g->pp_mpi_ = pp.get();
  g->pp_ = axis_communicator(std::move(pp), rules);
  g->world_ = axis_communicator(parent.split(0, parent.rank(), "world"), rules);
  g->count_axes();
  if (shape.ep > 1) { // ep consecutive dp ranks split the experts; the same place in each group holds the same ones
    const int group = static_cast<int>(c.dp / shape.ep), place = static_cast<int>(c.dp % shape.ep);
    g->ep_ = std::make_unique<CountingCommunicator>(axis_communicator(g->dp_mpi_->split(group, place, "ep"), rules),
                                                    &g->sent_.ep);
    g->expert_dp_ = std::make_unique<CountingCommunicator>(
        axis_communicator(g->dp_mpi_->split(place, group, "expert_dp"), rules), &g->sent_.dp);
  }
  return g;
}

void ProcessGrid::count_axes() {
  tp_ = std::make_unique<CountingCommunicator>(std::move(tp_), &sent_.tp);
  dp_ = std::make_unique<CountingCommunicator>(std::move(dp_), &sent_.dp);
  pp_ = std::make_unique<CountingCommunicator>(std::move(pp_), &sent_.pp);
}

void ProcessGrid::use_device(Device &device) {
  device_ = &device;
  // In axis order on every rank: each conversion is collective over its axis. The device's
  // communicator takes the host one (NCCL bootstraps over MPI), so the counting moves outside.
  for (std::unique_ptr<Communicator> *axis : {&tp_, &dp_, &pp_, &dp_shard_, &dp_replicate_, &ep_, &expert_dp_}) {
    if (!*axis)
      continue; // no hybrid sharding, no expert parallelism
    auto &counting = static_cast<CountingCommunicator &>(**axis);
    double *counter = counting.counter();
    *axis = std::make_unique<CountingCommunicator>(device.communicator(counting.release()), counter);
  }
}

void ProcessGrid::set_timeout(double seconds) {
  for (Communicator *c : {tp_.get(), dp_.get(), pp_.get(), world_.get(), dp_shard_.get(), dp_replicate_.get(),
                          ep_.get(), expert_dp_.get()})
    if (c)
      c->set_timeout(seconds);
}

void ProcessGrid::split_data_parallel(int64_t shard_degree) {
  const int64_t dp = shape_.dp;
  if (shard_degree == dp)
    return;
  if (shard_degree < 1 || dp % shard_degree != 0)
    throw Error("hybrid sharding over groups of " + std::to_string(shard_degree) + " dp ranks: it must divide the " +
                std::to_string(dp) + " dp ranks");
  if (!dp_mpi_ || dp_shard_)
    throw Error("hybrid sharding: the dp ranks can be split once, on a grid that runs on MPI");
  const int replica = static_cast<int>(coord_.dp / shard_degree), place = static_cast<int>(coord_.dp % shard_degree);
  dp_shard_ = std::make_unique<CountingCommunicator>(
      axis_communicator(dp_mpi_->split(replica, place, "dp_shard"), nccl_rules_), &sent_.dp);
  dp_replicate_ = std::make_unique<CountingCommunicator>(
      axis_communicator(dp_mpi_->split(place, replica, "dp_replicate"), nccl_rules_), &sent_.dp);
}

std::unique_ptr<Communicator> ProcessGrid::pp_subgroup(const std::vector<int64_t> &pp_ranks,
                                                       const std::string &axis) const {
  const bool member =
      std::find(pp_ranks.begin(), pp_ranks.end(), coord_.pp) != pp_ranks.end();
  if (!pp_mpi_) // a single process: pp rank 0 alone
    return member ? std::make_unique<CountingCommunicator>(
                        device_->communicator(std::make_unique<SelfCommunicator>()), &sent_.pp)
                  : nullptr;
  // The ranks outside the list form a group of their own, which they drop at once.
  std::unique_ptr<MpiCommunicator> group =
      pp_mpi_->split(member ? 0 : 1, static_cast<int>(coord_.pp), axis);
  if (!member)
    return nullptr;
  return std::make_unique<CountingCommunicator>(device_->communicator(axis_communicator(std::move(group), nccl_rules_)),
                                                &sent_.pp);
}

} // namespace megart
