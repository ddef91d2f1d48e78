// The pipeline schedule passes: megac-pipeline-schedule, megac-print-pipeline-schedule.
#pragma once

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "pipe/PipeDialect.h"

namespace megac::pipeline {

#define GEN_PASS_DECL
#include "megac/Pipeline/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "megac/Pipeline/Passes.h.inc"

} // namespace megac::pipeline
