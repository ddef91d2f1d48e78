// Emits one MLIR function as one C++ function: kernel calls on buffers in a statically planned
// workspace. What the function's arguments and results are in C++ (caller's buffers, the
// microbatch's ids, a pipeline chunk's stash) is the caller's choice, given as a Signature.
// Every buffer is named after the IR value it holds (its NameLoc: ln_1, d_attn_c_proj_weight),
// so the C++ reads like the dumps.
#pragma once

#include "megac/Analysis/TensorBytes.h"
#include "megac/Target/EmitCpp.h"
#include "tx/TxOps.h"
#include "tx/TxParamTable.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace megac::emit {

/// The C++ names of one generated function: each IR name made a C identifier ("transformer.h.0"
/// -> "transformer_h_0") and unique (a second "d_ln_1" is "d_ln_1_1"); the names every
/// signature and kernel uses are taken from the start.
class CppNames {
public:
  CppNames();
  /// A fresh identifier for a value named `irName` ("" or not an identifier: `fallback`N).
  std::string take(llvm::StringRef irName, llvm::StringRef fallback = "t");
  /// The identifier of value `v` (its IR name, else `fallback`N).
  std::string take(mlir::Value v, llvm::StringRef fallback = "t");

private:
  llvm::StringSet<> used;
  unsigned unnamed = 0;
};

/// `ctx.grad_sync->start(...)` for the gradients of parameters [first, last], at `indent`: the
/// runtime keeps all gradients in one buffer in table order, so a bucket is contiguous and ends
/// lastNumel elements after grads[last].
/// `group`: the communicator expression of a sum over other ranks than dp (the experts' buckets:
/// ctx.expert_dp); empty: dp.
void emitBucketStart(llvm::raw_ostream &os, llvm::StringRef indent, int64_t first, int64_t last, int64_t lastNumel,
                     llvm::StringRef group = "");

/// The StepContext member that runs a collective over `axes` of grid `grid` ("ctx.tp", ...,
/// "ctx.dp_shard" for @dp_grid's shard axis), or "" for none.
std::string communicatorName(llvm::StringRef grid, llvm::ArrayRef<int16_t> axes);

/// How a step or chunk function names its dloss argument: the address of its float parameter.
inline constexpr const char *kDlossArg = "(&dloss)";

struct Signature {
  std::string prototype;               // "void f(...) {" with the workspace named `ws`
  llvm::SmallVector<std::string> args; // C++ expression of each block argument
  /// Buffer each result is written into ("" = none: the value lives in the workspace).
  llvm::SmallVector<std::string> results;
  std::string prologue;        // declarations before the body
  CppNames names;              // the names the prototype and prologue took
  bool hasParams = false;      // tx.param / tx.param_grad allowed (params, grads)
  /// The frozen parameters' table (ctx.frozen[i]); null: the program has none.
  const tx::ParamTable *frozenParams = nullptr;
  int returnedScalar = -1;     // result returned as `float` (the loss), or -1
  std::string returnDefault;   // returned when returnedScalar is -1 ("" = void)
  Target target = Target::Cpu; // whose kernels the body calls, on whose memory
  /// Generation's decode_step and its callees: the function computes one position,
  /// ctx.kv_cache->position, of a model built for seq_length 1: attention reads and extends
  /// the layer's KV cache, rotary embeddings and learned positions take that position.
  bool decode = false;
};

/// Emits `fn` with `sig` to `os`, its workspace plan (megac-plan-workspace's) to `plan`; returns
/// the workspace bytes it needs, its callees' included.
mlir::FailureOr<int64_t> emitFunction(mlir::func::FuncOp fn, Signature sig, const tx::ParamTable &params,
                                      llvm::raw_ostream &os, llvm::raw_ostream &plan);

/// A callee (a layer's forward or backward half): `void name(ctx, ws, const float *<argument>...,
/// float *<result>...)`, each named after the IR value (the layer's parameters by their
/// checkpoint names: ln_1_weight).
Signature calleeSignature(mlir::func::FuncOp fn, bool decode = false);

int64_t numel(mlir::Value v);
/// Bytes of a tensor value's buffer.
inline int64_t bytesOf(mlir::Value v) { return tensorBytes(v.getType()); }
/// The C++ element type of a float tensor's buffer: float, megart::bf16_t or megart::fp16_t;
/// "" for another element type.
std::string cppElementType(mlir::Type tensorType);
std::string typeString(mlir::Type t);
std::string floatLiteral(double v);
std::string cString(llvm::StringRef s);

} // namespace megac::emit
