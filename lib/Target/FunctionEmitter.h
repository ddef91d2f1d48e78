// Emits one MLIR function as one C++ function: kernel calls on buffers in a statically planned
// workspace. What the function's arguments and results are in C++ (caller's buffers, the
// microbatch's ids, a pipeline chunk's stash) is the caller's choice, given as a Signature.
#pragma once

#include "megac/Target/EmitCpp.h"
#include "tx/TxOps.h"
#include "tx/TxParamTable.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace megac::emit {

/// `ctx.grad_sync->start(...)` for the gradients of parameters [first, last], at `indent`: the
/// runtime keeps all gradients in one buffer in table order, so a bucket is contiguous and ends
/// lastNumel elements after grads[last].
void emitBucketStart(llvm::raw_ostream &os, llvm::StringRef indent, int64_t first, int64_t last, int64_t lastNumel);

/// How a step or chunk function names its dloss argument: the address of its float parameter.
inline constexpr const char *kDlossArg = "(&dloss)";

struct Signature {
  std::string prototype;                  // "void f(...) {" with the workspace named `ws`
  llvm::SmallVector<std::string> args;    // C++ expression of each block argument
  /// Buffer each result is written into ("" = none: the value lives in the workspace).
  llvm::SmallVector<std::string> results;
  std::string prologue;                   // declarations before the body
  bool hasParams = false;                 // tx.param / tx.param_grad allowed (params, grads)
  int returnedScalar = -1;                // result returned as `float` (the loss), or -1
  std::string returnDefault;              // returned when returnedScalar is -1 ("" = void)
  Target target = Target::Cpu;            // whose kernels the body calls, on whose memory
};

/// Emits `fn` with `sig` to `os`, its workspace plan to `plan`; returns the workspace bytes it
/// needs, its callees' (from `calleeScratch`) included.
mlir::FailureOr<int64_t> emitFunction(mlir::func::FuncOp fn, const Signature &sig, const tx::ParamTable &params,
                                      const llvm::StringMap<int64_t> &calleeScratch, llvm::raw_ostream &os,
                                      llvm::raw_ostream &plan);

/// A callee (layer forward / backward): `void name(ctx, ws, const float *a0.., float *r0..)`.
Signature calleeSignature(mlir::func::FuncOp fn);

int64_t numel(mlir::Value v);
std::string typeString(mlir::Type t);
std::string floatLiteral(double v);
std::string cString(llvm::StringRef s);

} // namespace megac::emit
