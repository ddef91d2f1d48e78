// A reference interpreter of `tx` IR in double precision: every forward and backward op,
// func.call and func.return. It exists to check the compiler (VJPs, later passes) against
// plain math, so it favours obviousness over speed.
#pragma once

#include "megac/Eval/Tensor.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <map>
#include <string>

namespace megac::eval {

/// Parameter values and accumulated gradients by checkpoint name. The tensors have the full
/// checkpoint shape: a `tx.param ... at [offsets] of [full]` reads a block of the value, and
/// its `tx.param_grad` adds into the same block of the gradient.
struct ParamStore {
  std::map<std::string, Tensor> values;
  std::map<std::string, Tensor> grads;
};

class Interpreter {
public:
  Interpreter(mlir::ModuleOp module, ParamStore &params) : module(module), params(params) {}

  /// Runs function @name on `args` (one per block argument). On an unsupported op or bad
  /// input (an id out of range, dropout with a nonzero rate) emits an error at that op and
  /// fails.
  mlir::FailureOr<std::vector<Tensor>> run(llvm::StringRef name, const std::vector<Tensor> &args);

private:
  mlir::FailureOr<std::vector<Tensor>> runFunction(mlir::func::FuncOp fn,
                                                   const std::vector<Tensor> &args);
  mlir::FailureOr<Tensor> readParam(mlir::Operation *paramOp);
  mlir::LogicalResult addParamGrad(mlir::Operation *paramGradOp, const Tensor &grad);

  mlir::ModuleOp module;
  ParamStore &params;
};

} // namespace megac::eval
