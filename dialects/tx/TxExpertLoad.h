// The load histogram a mixture of experts reports (tx.record_expert_load): its shape, as the
// emitter writes it into the program (ProgramDesc::expert_load_*) and the communication plan
// counts it in the loss's reductions.
#pragma once

#include "mlir/IR/BuiltinOps.h"

#include <cstdint>
#include <optional>

namespace megac::tx {

struct ExpertLoadShape {
  int64_t layers = 0, experts = 0;
};

/// Layers x experts of the module's load histogram; none when no layer records one.
std::optional<ExpertLoadShape> expertLoadShape(mlir::ModuleOp module);

} // namespace megac::tx
