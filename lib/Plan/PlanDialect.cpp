// The `megac` dialect: #megac.plan, and the check that it sits where passes look for it, on
// `shard.grid @grid` whose shape is the plan's sizes and whose megac.axes name them.
#include "megac/Plan/PlanDialect.h"
#include "megac/Plan/PlanIR.h"
#include "tx/TxNames.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace megac;

#include "megac/Plan/PlanDialect.cpp.inc"
#include "megac/Plan/PlanEnums.cpp.inc"
#define GET_ATTRDEF_CLASSES
#include "megac/Plan/PlanAttrs.cpp.inc"

void MegacDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "megac/Plan/PlanAttrs.cpp.inc"
      >();
}

std::optional<FunctionRole> megac::roleOf(func::FuncOp fn) {
  auto role = fn ? fn->getAttrOfType<FunctionRoleAttr>(names::kRoleAttr) : FunctionRoleAttr();
  return role ? std::optional<FunctionRole>(role.getValue()) : std::nullopt;
}

void megac::setRole(func::FuncOp fn, FunctionRole role) {
  fn->setAttr(names::kRoleAttr, FunctionRoleAttr::get(fn.getContext(), role));
}

LogicalResult MegacDialect::verifyOperationAttribute(Operation *op, NamedAttribute attribute) {
  if (attribute.getName() == names::kRoleAttr) {
    if (!isa<FunctionRoleAttr>(attribute.getValue()))
      return op->emitError() << names::kRoleAttr << " must be a #megac.role<...>, got " << attribute.getValue();
    if (!isa<func::FuncOp>(op))
      return op->emitError() << names::kRoleAttr << " belongs on a func.func";
    return success();
  }
  if (attribute.getName() == names::kChunkAttr) {
    // Passes find a chunk's halves by role: a chunk without one would be taken for a forward.
    auto fn = dyn_cast<func::FuncOp>(op);
    std::optional<FunctionRole> role = fn ? roleOf(fn) : std::nullopt;
    if (role != FunctionRole::ChunkForward && role != FunctionRole::ChunkBackward)
      return op->emitError() << names::kChunkAttr << " belongs on a func.func with " << names::kRoleAttr
                             << " = #megac.role<chunk_forward> or #megac.role<chunk_backward>";
    return success();
  }
  if (attribute.getName() != names::kPlanAttr)
    return success(); // the other megac.* attributes are checked by the passes that read them
  auto plan = dyn_cast<PlanAttr>(attribute.getValue());
  if (!plan)
    return op->emitError() << names::kPlanAttr << " must be a #megac.plan<...>, got " << attribute.getValue();
  auto grid = dyn_cast<shard::GridOp>(op);
  if (!grid || grid.getSymName() != names::kGrid)
    return op->emitError() << names::kPlanAttr << " belongs on shard.grid @" << names::kGrid;
  const ParallelPlan &p = plan.getPlan();
  const int64_t sizes[] = {p.pp, p.dp, p.tp};
  if (grid.getShape() != ArrayRef<int64_t>(sizes)) {
    std::string shape;
    llvm::raw_string_ostream os(shape);
    llvm::interleave(grid.getShape(), os, [&](int64_t s) { os << (ShapedType::isDynamic(s) ? "?" : std::to_string(s)); }, "x");
    return op->emitError() << "@" << names::kGrid << "'s shape " << shape << " must be " << names::kPlanAttr
                           << "'s pp x dp x tp = " << p.pp << "x" << p.dp << "x" << p.tp;
  }
  auto axes = grid->getAttrOfType<ArrayAttr>(names::kAxesAttr);
  bool named = axes && axes.size() == std::size(kGridAxes);
  for (size_t i = 0; named && i < std::size(kGridAxes); ++i) {
    auto name = dyn_cast<StringAttr>(axes[i]);
    named = name && name.getValue() == gridAxisName(kGridAxes[i]);
  }
  if (!named)
    return op->emitError() << "@" << names::kGrid << " needs " << names::kAxesAttr
                           << " = [\"pp\", \"dp\", \"tp\"] (Megatron's rank order)";
  return success();
}
