// Names and locations of values: the frontend names every value (a NameLoc, printed as its SSA
// name with --mlir-use-nameloc-as-prefix) and places it at the spec key that decides it; a pass
// that derives a value from another names it after that one and marks itself in the location.
#pragma once

#include "mlir/IR/Location.h"
#include "mlir/IR/Value.h"

namespace megac::tx {

/// The name `v` carries (its NameLoc: `%ln_1` in the dumps), or "".
llvm::StringRef valueName(mlir::Value v);

/// The name of result `r`: an op has one name (its NameLoc), so each result of a multi-result op
/// gets what it is added: d_ln_2_input, d_ln_2_weight, d_ln_2_bias; a call's results are named
/// after what the callee returns (layer_0, layer_0_fc_gelu, ...). "" when the op has no name.
std::string resultName(mlir::OpResult r);

/// The location of a value `pass` derives from `from`: named `name` (when `from` has a name to
/// build it from: "" keeps it unnamed), at `from`'s place in the spec, marked as made by `pass`:
/// loc("d_ln_1"(fused<"megac-autodiff">["spec.yaml":7:1])).
mlir::Location derivedLoc(mlir::Value from, const llvm::Twine &name, llvm::StringRef pass);

} // namespace megac::tx
