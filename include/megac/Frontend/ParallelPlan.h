// A parallel plan (Megatron's names: tensor, pipeline, data parallel sizes, sequence
// parallelism) and the checks that tie it to a model spec.
#pragma once

#include "megac/Frontend/ModelSpec.h"

#include <string>

namespace megac {

struct ParallelPlan {
  int64_t tp = 1, pp = 1, dp = 1;
  bool sp = false;
  int64_t makeVocabSizeDivisibleBy = 128; // Megatron's flag and default

  /// The vocabulary rounded up to a multiple of makeVocabSizeDivisibleBy x tp (Megatron).
  int64_t paddedVocab(int64_t vocab) const {
    int64_t multiple = makeVocabSizeDivisibleBy * tp;
    return (vocab + multiple - 1) / multiple * multiple;
  }

  int64_t worldSize() const { return tp * pp * dp; }
  std::string summary() const;
  /// One line per global rank: Megatron's order, tp fastest, then dp, then pp.
  std::string rankLayout() const;
};

/// Rejects plans the spec cannot be split by, or that this megac cannot run yet, naming the
/// spec key, the flag and the fix.
llvm::Error validatePlan(const ParallelPlan &plan, const ModelSpec &spec);

} // namespace megac
