// The checks that tie a parallel plan to a model spec, naming the flag, the value and the fix.
#pragma once

#include "megac/Frontend/ModelSpec.h"
#include "megac/Plan/ParallelPlan.h"

#include "llvm/Support/Error.h"

namespace megac {

/// Fills in what the pipeline flags leave implicit (vpp from layersPerVirtualStage, the even
/// layout, the default schedule and microbatch count) and rejects what cannot be split, naming
/// the flag, the value and the fix. Call before validatePlan.
llvm::Error resolvePipeline(ParallelPlan &plan, const ModelSpec &spec);

/// Rejects plans the spec cannot be split by, or that this megac cannot run yet, naming the
/// spec key, the flag and the fix.
llvm::Error validatePlan(const ParallelPlan &plan, const ModelSpec &spec);

} // namespace megac
