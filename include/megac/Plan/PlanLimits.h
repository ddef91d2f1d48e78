// Bounds on a parallel plan's sizes (megac/Limits.h), checked wherever a plan comes from: megac
// compile's flags, or @grid in IR handed to megac-opt.
#pragma once

#include "megac/Plan/ParallelPlan.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace megac {

/// What the messages call each field of the plan.
struct PlanFieldNames {
  llvm::StringRef pp, dp, tp, ep, vpp, layersPerVirtualStage, layout, microbatches, bucketSize, vocabDivisor;
};
/// megac compile's flags (Megatron's names).
extern const PlanFieldNames kPlanFlagNames;

/// Refuses pp, dp or tp below 1 or above the largest world, or a world (pp x dp x tp) above it.
llvm::Error checkGridLimits(const ParallelPlan &plan, const PlanFieldNames &names);

/// checkGridLimits, then refuses a size below 1 (0 where `zeroAllowed`: not given) or above its limit, and a world
/// size (pp x dp x tp) or schedule (pp x vpp x microbatches) above its limit, naming the field,
/// the value and the limit.
llvm::Error checkPlanLimits(const ParallelPlan &plan, const PlanFieldNames &names);

/// "NAME is VALUE; it must be between 1 and LIMIT" with `why` and `fix` appended: the one wording
/// of an out-of-range size, for plans and specs alike.
llvm::Error sizeOutOfRange(const llvm::Twine &name, int64_t value, int64_t low, int64_t limit, llvm::StringRef why = "",
                           llvm::StringRef fix = "");

} // namespace megac
