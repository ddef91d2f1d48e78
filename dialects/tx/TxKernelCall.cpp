// A kernel call as data (TxKernelCall.h): the kernel table, the arguments, the questions asked
// of a call before it is printed, and the target-neutral form lit tests check.
#include "tx/TxKernelCall.h"
#include "tx/TxOps.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Format.h"

using namespace mlir;
using namespace megac::tx;

// ---- the kernel table -----------------------------------------------------------------------

namespace {
constexpr llvm::StringLiteral kNames[] = {
#define MEGART_KERNEL(name, traits) #name,
#include "tx/RuntimeKernels.def"
};
constexpr unsigned kTraits[] = {
#define MEGART_KERNEL(name, traits) traits,
#include "tx/RuntimeKernels.def"
};
} // namespace

llvm::StringRef megac::tx::kernelName(Kernel k) { return kNames[static_cast<int>(k)]; }
unsigned megac::tx::kernelTraits(Kernel k) { return kTraits[static_cast<int>(k)]; }
llvm::ArrayRef<llvm::StringRef> megac::tx::unqualifiedKernelNames() {
  static const std::vector<llvm::StringRef> names = [] {
    std::vector<llvm::StringRef> plain;
    for (auto [name, traits] : llvm::zip(kNames, kTraits))
      if (!(traits & RuntimeFunction))
        plain.push_back(name);
    return plain;
  }();
  return names;
}

// ---- arguments --------------------------------------------------------------------------------

KernelArg KernelArg::deref(Value v) {
  KernelArg a(v);
  a.kind = Deref;
  return a;
}
KernelArg KernelArg::hostScalar(Value v) {
  KernelArg a(v);
  a.kind = HostScalar;
  return a;
}
KernelArg KernelArg::integer(StringRef label, KernelInt n) {
  KernelArg a(Int);
  a.label = label.str();
  a.number = n;
  return a;
}
KernelArg KernelArg::boolean(StringRef label, bool b) {
  KernelArg a(Bool);
  a.label = label.str();
  a.flag = b;
  return a;
}
KernelArg KernelArg::floating(StringRef label, double d) {
  KernelArg a(Float);
  a.label = label.str();
  a.real = d;
  return a;
}
KernelArg KernelArg::list(StringRef label, std::vector<KernelInt> ns) {
  KernelArg a(IntList);
  a.label = label.str();
  a.numbers = std::move(ns);
  return a;
}
KernelArg KernelArg::nested(KernelCall c) {
  KernelArg a(Call);
  a.call = std::make_shared<KernelCall>(std::move(c));
  return a;
}
KernelArg KernelArg::context(Kind k) { return KernelArg(k); }

bool megac::tx::drawsDropoutMasks(const KernelCall &call) {
  if (call.kernel == Kernel::dropout_block || call.kernel == Kernel::attention_dropout)
    return true;
  return llvm::any_of(call.args, [](const KernelArg &a) { return a.call && drawsDropoutMasks(*a.call); });
}

std::optional<KernelCall> megac::tx::quietKernelCall(Operation *op, bool decode) {
  auto lowered = dyn_cast<KernelCallOpInterface>(op);
  if (!lowered)
    return std::nullopt;
  ScopedDiagnosticHandler quiet(op->getContext(), [](Diagnostic &) { return success(); });
  FailureOr<KernelCall> call = lowered.getKernelCall(decode);
  return succeeded(call) ? std::optional<KernelCall>(std::move(*call)) : std::nullopt;
}

static void printInt(llvm::raw_ostream &os, const KernelInt &n) {
  switch (n.kind) {
  case KernelInt::Constant: os << n.value; break;
  case KernelInt::TpRankTimes: os << "tp.rank*" << n.value; break;
  case KernelInt::TpSizeTimes: os << "tp.size*" << n.value; break;
  case KernelInt::DecodePosition: os << "decode.position"; break;
  }
}

void megac::tx::printKernelCall(llvm::raw_ostream &os, const KernelCall &call,
                                llvm::function_ref<std::string(Value)> valueName) {
  os << kernelName(call.kernel) << "(";
  llvm::interleaveComma(call.args, os, [&](const KernelArg &a) {
    if (!a.label.empty())
      os << a.label << "=";
    switch (a.kind) {
    case KernelArg::Buffer: os << valueName(a.value); break;
    case KernelArg::Deref: os << "*" << valueName(a.value); break;
    case KernelArg::HostScalar: os << "host(" << valueName(a.value) << ")"; break;
    case KernelArg::Int: printInt(os, a.number); break;
    case KernelArg::Bool: os << (a.flag ? "true" : "false"); break;
    case KernelArg::Float: os << llvm::format("%g", a.real); break;
    case KernelArg::IntList:
      os << "{";
      llvm::interleaveComma(a.numbers, os, [&](const KernelInt &n) { printInt(os, n); });
      os << "}";
      break;
    case KernelArg::Call: printKernelCall(os, *a.call, valueName); break;
    case KernelArg::StepContext: os << "ctx"; break;
    case KernelArg::KvCache: os << "kv_cache"; break;
    case KernelArg::Layer: os << "layer"; break;
    }
  });
  os << ")";
}
