// The `megac` dialect (PlanDialect.td): #megac.plan, the parallel plan as a typed attribute, and
// #megac.role, what a function is in the training program.
#pragma once

#include "megac/Plan/ParallelPlan.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Attributes.h"
#include "mlir/IR/Dialect.h"

#include "megac/Plan/PlanDialect.h.inc"
#include "megac/Plan/PlanEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "megac/Plan/PlanAttrs.h.inc"

namespace megac {

/// The role `fn` carries (megac.role), none for a function no pass gave one.
std::optional<FunctionRole> roleOf(mlir::func::FuncOp fn);
void setRole(mlir::func::FuncOp fn, FunctionRole role);
/// A backward half (of a layer or a chunk).
inline bool isBackward(std::optional<FunctionRole> role) {
  return role == FunctionRole::LayerBackward || role == FunctionRole::ChunkBackward;
}

} // namespace megac
