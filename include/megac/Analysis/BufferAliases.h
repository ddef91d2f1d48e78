// Which buffer a value lives in, and how long an overlapped collective reads its input: the
// facts megac-plan-workspace plans the workspace by and the emitter prints by (a wait where the
// plan keeps the input alive).
#pragma once

#include "mlir/IR/Operation.h"

namespace megac {

/// Whether `op`'s result is a view of another buffer (a reshape, a parameter, a bucket's
/// parameter or gradient, the rank's parameter shard), never a buffer of its own.
bool isView(mlir::Operation &op);

/// The value whose buffer `v` lives in: a reshape views its input, a gradient bucket add updates
/// its bucket in place, a bucket parameter is a view of its bucket.
mlir::Value aliasRoot(mlir::Value v);

/// Whether an overlapped collective (megac.async) whose result is `pending` is waited for at
/// `op`: the first op that reads the result (a view reads nothing), or the return.
bool waitsFor(mlir::Operation &op, mlir::Value pending);

} // namespace megac
