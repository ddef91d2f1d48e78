// Evaluation of one value-semantics `tx` op: checks what its verifier cannot (ids in range,
// dropout rate) and calls the kernel.
#pragma once

#include "megac/Eval/Tensor.h"

#include "mlir/IR/Operation.h"
#include "llvm/ADT/SmallVector.h"

namespace megac::eval {

/// One result tensor per op result, or failure after an error at `op`. Handles every pure
/// `tx` op; tx.param and tx.param_grad need the parameter store and live in the interpreter.
mlir::FailureOr<llvm::SmallVector<Tensor>> evalTxOp(mlir::Operation *op,
                                                    llvm::ArrayRef<const Tensor *> operands);

} // namespace megac::eval
