// Reverse-mode differentiation of one block: walks its ops last to first and builds the ops
// that compute cotangents, just before the block's terminator.
#pragma once

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLFunctionalExtras.h"

namespace megac {

/// Where the gradient of `primal` comes from: named d_<primal>, made by megac-autodiff at the
/// spec key of `primal`.
mlir::Location gradientLoc(mlir::Value primal);

class ReverseSweep {
public:
  /// Handles ops that have no VjpOpInterface (calls): given the op, returns one cotangent per
  /// operand (null where none), or failure after emitting an error.
  using CustomVjp = llvm::function_ref<mlir::FailureOr<llvm::SmallVector<mlir::Value>>(
      mlir::Operation *, ReverseSweep &)>;

  explicit ReverseSweep(mlir::Block &block);

  /// Adds `cotangent` to `primal`'s (a returned value's, an auxiliary loss's) before the sweep.
  void seed(mlir::Value primal, mlir::Value cotangent) { accumulate(primal, cotangent); }

  /// Differentiates the block's ops (those present now; not the ones this builds).
  mlir::LogicalResult run(CustomVjp custom);

  /// The cotangent of `primal`, or null if nothing depends on it.
  mlir::Value cotangent(mlir::Value primal) const { return cotangents.lookup(primal); }

  /// The cotangent of `primal`, or zeros of its type if nothing depends on it.
  mlir::Value cotangentOrZeros(mlir::Value primal);

  mlir::OpBuilder &builder() { return b; }

private:
  void accumulate(mlir::Value primal, mlir::Value cotangent);

  mlir::Block &block;
  mlir::OpBuilder b;
  llvm::DenseMap<mlir::Value, mlir::Value> cotangents;
};

} // namespace megac
