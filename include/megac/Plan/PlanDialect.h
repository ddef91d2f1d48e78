// The `megac` dialect (PlanDialect.td): #megac.plan, the parallel plan as a typed attribute.
#pragma once

#include "megac/Plan/ParallelPlan.h"

#include "mlir/IR/Attributes.h"
#include "mlir/IR/Dialect.h"

#include "megac/Plan/PlanDialect.h.inc"

#define GET_ATTRDEF_CLASSES
#include "megac/Plan/PlanAttrs.h.inc"
