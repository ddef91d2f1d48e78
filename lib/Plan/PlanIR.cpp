#include "megac/Plan/PlanIR.h"
#include "megac/Plan/PlanDialect.h"
#include "tx/TxNames.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace megac;

GridAxis megac::gridAxisNamed(StringRef name) {
  return *llvm::find_if(kGridAxes, [&](GridAxis a) { return gridAxisName(a) == name; });
}

int64_t megac::gridAxisSize(const ParallelPlan &plan, GridAxis axis) {
  switch (axis) {
  case GridAxis::Pp:
    return plan.pp;
  case GridAxis::Dp:
    return plan.dp;
  case GridAxis::Tp:
    return plan.tp;
  }
  llvm_unreachable("a grid axis");
}

StringRef megac::gridAxisName(GridAxis axis) {
  switch (axis) {
  case GridAxis::Pp:
    return names::kPipelineAxis;
  case GridAxis::Dp:
    return names::kDataAxis;
  case GridAxis::Tp:
    return names::kTensorAxis;
  }
  llvm_unreachable("a grid axis");
}

void megac::recordPlan(ModuleOp module, const ParallelPlan &plan) {
  module.getContext()->getOrLoadDialect<MegacDialect>();
  OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
  auto grid = shard::GridOp::create(b, module.getLoc(), b.getStringAttr(names::kGrid),
                                    b.getDenseI64ArrayAttr({plan.pp, plan.dp, plan.tp}));
  SmallVector<Attribute> axes;
  for (GridAxis axis : kGridAxes)
    axes.push_back(b.getStringAttr(gridAxisName(axis)));
  grid->setAttr(names::kAxesAttr, b.getArrayAttr(axes));
  grid->setAttr(names::kPlanAttr, PlanAttr::get(b.getContext(), plan));
}

FailureOr<ParallelPlan> megac::readPlan(ModuleOp module, StringRef pass) {
  // #megac.plan was checked when it was parsed or made, and against @grid by the verifier.
  auto grid = module.lookupSymbol<shard::GridOp>(names::kGrid);
  auto plan = grid ? grid->getAttrOfType<PlanAttr>(names::kPlanAttr) : PlanAttr();
  if (!plan) {
    module.emitError() << pass << ": the module has no shard.grid @" << names::kGrid << " with a "
                       << names::kPlanAttr << " = #megac.plan<...>; the frontend records the plan there "
                       << "(megac compile --dump-ir's first file has it)";
    return failure();
  }
  return plan.getPlan();
}

StringRef megac::dpGridAxisName(DpGridAxis axis) { return axis == DpGridAxis::Replicate ? "dp_replicate" : "dp_shard"; }

/// @`name`, a grid of @grid's dp ranks as `shape` with `axes` (slowest first), made on first use
/// after @grid.
static FlatSymbolRefAttr dpSubGrid(ModuleOp module, StringRef name, ArrayRef<int64_t> shape,
                                   ArrayRef<StringRef> axes) {
  MLIRContext *ctx = module.getContext();
  if (!module.lookupSymbol(name)) {
    OpBuilder b(ctx);
    auto grid = module.lookupSymbol<shard::GridOp>(names::kGrid);
    if (grid)
      b.setInsertionPointAfter(grid);
    else
      b.setInsertionPointToStart(module.getBody());
    auto sub = shard::GridOp::create(b, module.getLoc(), b.getStringAttr(name), b.getDenseI64ArrayAttr(shape));
    SmallVector<Attribute> axisNames;
    for (StringRef a : axes)
      axisNames.push_back(b.getStringAttr(a));
    sub->setAttr(names::kAxesAttr, b.getArrayAttr(axisNames));
  }
  return FlatSymbolRefAttr::get(ctx, name);
}

static FlatSymbolRefAttr dpGrid(ModuleOp module, const ParallelPlan &plan) {
  return dpSubGrid(module, names::kDpGrid, {plan.dp / plan.shardDegree, plan.shardDegree},
                   {dpGridAxisName(DpGridAxis::Replicate), dpGridAxisName(DpGridAxis::Shard)});
}

StringRef megac::epGridAxisName(EpGridAxis axis) { return axis == EpGridAxis::Ep ? "ep" : "expert_dp"; }

CollectiveAxes megac::expertDataParallelAxes(ModuleOp module, const ParallelPlan &plan) {
  FlatSymbolRefAttr grid = dpSubGrid(module, names::kEpGrid, {plan.dp / plan.ep, plan.ep},
                                     {epGridAxisName(EpGridAxis::ExpertDp), epGridAxisName(EpGridAxis::Ep)});
  return {grid, Builder(module.getContext()).getDenseI16ArrayAttr({static_cast<int16_t>(EpGridAxis::ExpertDp)})};
}

CollectiveAxes megac::shardGroupAxes(ModuleOp module, const ParallelPlan &plan) {
  Builder b(module.getContext());
  if (plan.shardDegree == plan.dp)
    return {FlatSymbolRefAttr::get(module.getContext(), names::kGrid),
            b.getDenseI16ArrayAttr({static_cast<int16_t>(GridAxis::Dp)})};
  return {dpGrid(module, plan), b.getDenseI16ArrayAttr({static_cast<int16_t>(DpGridAxis::Shard)})};
}

CollectiveAxes megac::replicaGroupAxes(ModuleOp module, const ParallelPlan &plan) {
  Builder b(module.getContext());
  return {dpGrid(module, plan), b.getDenseI16ArrayAttr({static_cast<int16_t>(DpGridAxis::Replicate)})};
}

int64_t megac::collectiveSize(const ParallelPlan &plan, StringRef grid, ArrayRef<int16_t> axes) {
  if (axes.size() != 1)
    return 1;
  if (grid == names::kDpGrid)
    return axes[0] == static_cast<int16_t>(DpGridAxis::Shard) ? plan.shardDegree : plan.dp / plan.shardDegree;
  if (grid == names::kEpGrid)
    return axes[0] == static_cast<int16_t>(EpGridAxis::Ep) ? plan.ep : plan.dp / plan.ep;
  if (grid != names::kGrid)
    return 1;
  switch (static_cast<GridAxis>(axes[0])) {
  case GridAxis::Pp: return plan.pp;
  case GridAxis::Dp: return plan.dp;
  case GridAxis::Tp: return plan.tp;
  }
  return 1;
}
