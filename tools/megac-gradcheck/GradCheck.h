// The gradient check: the VJPs megac-autodiff builds, run in double precision, against
// central finite differences of the forward loss.
#pragma once

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

namespace megac::gradcheck {

struct Options {
  uint64_t seed = 1;
  double step = 1e-6;      // finite-difference step, relative to max(1, |x|)
  double tolerance = 1e-6; // max abs error / max |gradient|
};

/// Checks every parameter of the module's @forward(ids, labels) -> loss. Prints one line per
/// parameter and a summary to `os`; fails if a gradient is off or the program cannot run.
/// `module` is not modified (autodiff runs on a clone).
mlir::LogicalResult checkGradients(mlir::ModuleOp module, const Options &options, llvm::raw_ostream &os);

} // namespace megac::gradcheck
