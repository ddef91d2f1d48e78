// The plan flags of activation recomputation, as given, and how they resolve into a plan:
// Megatron's --recompute-granularity, --recompute-activations, --recompute-method,
// --recompute-num-layers, --recompute-modules and --distribute-saved-activations, with the
// combinations Megatron refuses refused here too.
#pragma once

#include "megac/Plan/ParallelPlan.h"

#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace megac {

struct RecomputeFlags {
  std::string granularity;          // "" = not given
  bool recomputeActivations = false; // = --recompute-granularity selective
  std::string method;               // "" = not given
  int64_t numLayers = 0;            // 0 = not given
  std::vector<std::string> modules; // empty = not given (selective: core_attn)
  bool distributeSavedActivations = false;
};

/// The modules selective recomputation can cover in megac's dense models, in Megatron's spelling.
extern const char *const kRecomputeModules[3];

/// Sets plan.recompute from `flags` (plan.tp and sp already set), or says which flag to change.
llvm::Error resolveRecompute(ParallelPlan &plan, const RecomputeFlags &flags);

/// --recompute-num-layers against the layers of each chunk (the pipeline layout resolved; one
/// chunk of every layer without pp).
llvm::Error checkRecomputeLayers(const ParallelPlan &plan, int64_t numLayers);

} // namespace megac
