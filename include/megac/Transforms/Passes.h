#pragma once

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "megac/Plan/PlanDialect.h"
#include "tx/TxDialect.h"
#include "tx/TxNames.h"

namespace megac {

#define GEN_PASS_DECL
#include "megac/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "megac/Transforms/Passes.h.inc"

} // namespace megac
