// Which buffer a value lives in: the facts megac-plan-workspace plans the workspace by and the
// emitter prints by.
#pragma once

#include "mlir/IR/Operation.h"

namespace megac {

/// Whether `op`'s result is a view of another buffer (a reshape, a parameter, a bucket's
/// parameter or gradient, the rank's parameter shard), never a buffer of its own.
bool isView(mlir::Operation &op);

/// The value whose buffer `v` lives in: a reshape views its input, a gradient bucket add updates
/// its bucket in place, a bucket parameter is a view of its bucket.
mlir::Value aliasRoot(mlir::Value v);

} // namespace megac
