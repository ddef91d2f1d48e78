// Megatron's tensor-parallel placement of a transformer's parameters, by checkpoint name.
#pragma once

#include "llvm/ADT/StringRef.h"

#include <optional>

namespace megac {

/// The dimension along which Megatron splits this parameter over the tensor-parallel ranks,
/// or nullopt when every rank holds all of it (norms, learned positions, row-parallel biases).
std::optional<int64_t> megatronSplitDim(llvm::StringRef checkpointName);

} // namespace megac
