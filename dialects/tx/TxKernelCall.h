// A tx op's lowering to the runtime, as data: the kernel it calls and that kernel's arguments in
// order — buffers, the shape arithmetic done (rows, m/n/k, strides) as integers, attributes as
// flags and floats. Each op builds its own (KernelCallOpInterface, dialects/tx/TxKernelCalls.cpp);
// the C++ and CUDA emitters print any op's call the same way, megac-test-kernel-calls prints it
// for lit tests.
#pragma once

#include "mlir/IR/Value.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace megac::tx {

/// How a kernel of RuntimeKernels.def is called, when not Plain (both targets, unqualified).
enum KernelTraits : unsigned {
  Plain = 0,
  ScalarResult = 1,    // returns its scalar on the CPU; on the GPU writes it to its first argument
  CpuOnly = 2,         // no CUDA kernel yet
  RuntimeFunction = 4, // megart::name, one function for both targets (a helper, not a kernel)
};

/// A runtime kernel, by its RuntimeKernels.def line.
enum class Kernel {
#define MEGART_KERNEL(name, traits) name,
#include "tx/RuntimeKernels.def"
};

llvm::StringRef kernelName(Kernel kernel);
unsigned kernelTraits(Kernel kernel);
/// The names of the Plain-called kernels (what a generated local must not be named).
llvm::ArrayRef<llvm::StringRef> unqualifiedKernelNames();

/// An integer argument: known when compiling, or a per-rank or per-position quantity the
/// generated code reads from its step context.
struct KernelInt {
  enum Kind { Constant, TpRankTimes, TpSizeTimes, DecodePosition };
  Kind kind = Constant;
  int64_t value = 0; // the constant, or the factor of the tp rank or size

  KernelInt(int64_t value = 0) : value(value) {}
  KernelInt(Kind kind, int64_t value) : kind(kind), value(value) {}
  /// This tp rank's share of `n` per rank starts here: rank * n.
  static KernelInt tpRankTimes(int64_t n) { return {TpRankTimes, n}; }
  /// `n` per rank over all tp ranks: size * n.
  static KernelInt tpSizeTimes(int64_t n) { return {TpSizeTimes, n}; }
  /// The position generation's decode step computes.
  static KernelInt decodePosition() { return {DecodePosition, 0}; }
};

struct KernelCall;

/// One argument of a kernel call. `label` names the kernel's parameter (printed as a comment
/// before numbers and flags); buffers and nested calls have none.
struct KernelArg {
  enum Kind {
    Buffer,      // the value's buffer
    Deref,       // what the value's pointer points to (a runtime struct: an NF4 weight)
    HostScalar,  // the float a value holds, read on the host (the loss gradient)
    Int,
    Bool,
    Float,
    IntList,     // a brace-enclosed list of integers
    Call,        // a nested call's result (a runtime helper: dropout_block, valid_columns)
    StepContext, // the step's context (ctx)
    KvCache,     // the KV cache generation decodes with
    Layer,       // the index of the layer the function runs
  };
  Kind kind;
  std::string label;
  mlir::Value value;
  KernelInt number;
  std::vector<KernelInt> numbers;
  bool flag = false;
  double real = 0.0;
  std::shared_ptr<KernelCall> call;

  KernelArg(mlir::Value v) : kind(Buffer), value(v) {}
  static KernelArg deref(mlir::Value v);
  static KernelArg hostScalar(mlir::Value v);
  static KernelArg integer(llvm::StringRef label, KernelInt n);
  static KernelArg boolean(llvm::StringRef label, bool b);
  static KernelArg floating(llvm::StringRef label, double d);
  static KernelArg list(llvm::StringRef label, std::vector<KernelInt> ns);
  static KernelArg nested(KernelCall c);
  static KernelArg context(Kind k);

private:
  explicit KernelArg(Kind kind) : kind(kind) {}
};

/// `kernel(args...)`.
struct KernelCall {
  Kernel kernel;
  std::vector<KernelArg> args;
};

/// Whether `call` draws dropout masks from the step's random streams (a dropout_block or
/// attention_dropout argument): a function that makes such calls needs its layer's index.
bool drawsDropoutMasks(const KernelCall &call);

/// The kernel call of `op` if it has one that the kernels can run, with no diagnostics: for
/// questions about a function's calls before it is emitted.
std::optional<KernelCall> quietKernelCall(mlir::Operation *op, bool decode = false);

/// For lit tests, target-neutral: `layer_norm_forward(%ln, %x, %w, %b, rows=32, dim=16, eps=1e-05)`,
/// each value as `valueName` gives it; per-rank integers as `tp.rank*N`, `tp.size*N`,
/// `decode.position`.
void printKernelCall(llvm::raw_ostream &os, const KernelCall &call,
                     llvm::function_ref<std::string(mlir::Value)> valueName);

} // namespace megac::tx
