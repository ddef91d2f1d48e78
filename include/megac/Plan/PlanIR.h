// The parallel plan as IR: one `shard.grid @grid` whose shape is the plan's sizes in Megatron's
// rank order (pp, dp, tp: tp fastest), with the axis names and the rest of the plan (sequence
// parallelism, pipeline schedule, gradient buckets) as its attributes. The frontend records it
// once; every pass and emitter reads it from there.
#pragma once

#include "megac/Plan/ParallelPlan.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"

namespace megac {

/// The grid's axes in Megatron's rank order, slowest first (the index in `grid_axes`).
enum class GridAxis : int16_t { Pp = 0, Dp = 1, Tp = 2 };
inline constexpr GridAxis kGridAxes[] = {GridAxis::Pp, GridAxis::Dp, GridAxis::Tp};
/// "pp", "dp", "tp".
llvm::StringRef gridAxisName(GridAxis axis);
/// The axis named "pp", "dp" or "tp" (a sharding's axis names are @grid's: checked where read).
GridAxis gridAxisNamed(llvm::StringRef name);
/// How many ranks `plan` puts on `axis`.
int64_t gridAxisSize(const ParallelPlan &plan, GridAxis axis);

/// Hybrid sharding (shard degree < dp): @grid's dp axis split into replicas x shards,
/// `shard.grid @dp_grid(shape = R x S)`; dp rank = replica x S + shard rank, so a shard group is
/// S consecutive dp ranks (torchtitan's dp_shard inside dp_replicate, Megatron's optimizer
/// instances).
enum class DpGridAxis : int16_t { Replicate = 0, Shard = 1 };
/// "dp_replicate", "dp_shard".
llvm::StringRef dpGridAxisName(DpGridAxis axis);

/// Expert parallelism (ep > 1): @grid's dp axis split into expert-data-parallel groups x ep ranks,
/// `shard.grid @ep_grid(shape = dp/ep x ep)`; dp rank = expert-dp rank x ep + ep rank (Megatron's
/// expert rank order: an ep group is ep consecutive dp ranks).
enum class EpGridAxis : int16_t { ExpertDp = 0, Ep = 1 };
/// "expert_dp", "ep".
llvm::StringRef epGridAxisName(EpGridAxis axis);

/// A grid and the axes of it a collective runs over.
struct CollectiveAxes {
  mlir::FlatSymbolRefAttr grid;
  mlir::DenseI16ArrayAttr axes;
};
/// Where the sharded state's collectives run: @grid's dp axis, or with hybrid sharding
/// @dp_grid's shard axis (@dp_grid made on first use).
CollectiveAxes shardGroupAxes(mlir::ModuleOp module, const ParallelPlan &plan);
/// With hybrid sharding, @dp_grid's replicate axis: where the shards are summed across replicas.
CollectiveAxes replicaGroupAxes(mlir::ModuleOp module, const ParallelPlan &plan);
/// The dp ranks that hold the same experts, over which their gradients are summed: @ep_grid's
/// expert_dp axis (@ep_grid made on first use).
CollectiveAxes expertDataParallelAxes(mlir::ModuleOp module, const ParallelPlan &plan);
/// The ranks a collective over `axes` of grid `grid` spans (1 for an unknown grid).
int64_t collectiveSize(const ParallelPlan &plan, llvm::StringRef grid, llvm::ArrayRef<int16_t> axes);

/// Adds @grid, recording `plan`, at the start of `module`.
void recordPlan(mlir::ModuleOp module, const ParallelPlan &plan);

/// The plan recorded in `module`. Fails with an error at the module naming `pass` when there
/// is no @grid or it does not hold a plan.
mlir::FailureOr<ParallelPlan> readPlan(mlir::ModuleOp module, llvm::StringRef pass);

} // namespace megac
