// Deterministic inputs for a gradient check: every parameter, the token ids and the labels.
#pragma once

#include "megac/Eval/Interpreter.h"

namespace megac::gradcheck {

/// SplitMix64: the same numbers on every platform and standard library.
class Random {
public:
  explicit Random(uint64_t seed) : state(seed) {}
  uint64_t next();
  double uniform(double lo, double hi); // [lo, hi)
  int64_t below(int64_t n);             // [0, n)

private:
  uint64_t state;
};

/// Fills one value per checkpoint name with uniform [-1, 1) numbers, in the order the
/// module first declares them; `names` gets that order. Fails if two `tx.param`s with one
/// name disagree on the full shape.
mlir::LogicalResult fillParams(mlir::ModuleOp module, Random &random, eval::ParamStore &store,
                               std::vector<std::string> &names);

/// Random ids (below the smallest embedding table's vocab) and labels (below the smallest
/// cross_entropy vocab) shaped like @entry's first two arguments.
mlir::FailureOr<std::vector<eval::Tensor>> makeIdsAndLabels(mlir::ModuleOp module,
                                                            mlir::func::FuncOp entry,
                                                            Random &random);

} // namespace megac::gradcheck
