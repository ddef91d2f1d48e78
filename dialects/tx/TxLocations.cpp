#include "tx/TxLocations.h"
#include "tx/TxOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

llvm::StringRef megac::tx::valueName(Value v) {
  auto name = dyn_cast<NameLoc>(v.getLoc());
  return name ? name.getName().getValue() : llvm::StringRef();
}

Location megac::tx::derivedLoc(Value from, const llvm::Twine &name, llvm::StringRef pass) {
  MLIRContext *context = from.getContext();
  Location where = from.getLoc();
  if (auto named = dyn_cast<NameLoc>(where))
    where = named.getChildLoc();
  // The source location once, whatever passes derived the value from.
  if (auto fused = dyn_cast<FusedLoc>(where); fused && fused.getLocations().size() == 1)
    where = fused.getLocations().front();
  Location made = FusedLoc::get(context, {where}, StringAttr::get(context, pass));
  std::string text = name.str();
  return text.empty() ? made : NameLoc::get(StringAttr::get(context, text), made);
}

std::string megac::tx::resultName(OpResult r) {
  Operation *op = r.getOwner();
  std::string base = valueName(r).str();
  unsigned i = r.getResultNumber();
  if (op->getNumResults() == 1 || base.empty())
    return base;
  if (auto call = dyn_cast<func::CallOp>(op)) {
    if (i == 0)
      return base;
    auto callee = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(call, call.getCalleeAttr());
    Value returned = callee && !callee.isExternal() ? callee.getBody().front().getTerminator()->getOperand(i) : Value();
    auto inner = dyn_cast_or_null<OpResult>(returned);
    std::string name = inner ? resultName(inner) : returned ? valueName(returned).str() : "";
    llvm::StringRef suffix = name;
    if (llvm::StringRef(base).starts_with("d_"))
      suffix.consume_front("d_");
    return suffix.empty() ? base + "_" + std::to_string(i) : base + "_" + suffix.str();
  }
  static const char *norm[] = {"_input", "_weight", "_bias"}, *attention[] = {"_q", "_k", "_v"},
                    *swiglu[] = {"_gate", "_up"}, *gelu[] = {"", "_gelu"},
                    *route[] = {"_probs", "_experts", "_weights"}, *assign[] = {"_rows", "_counts"},
                    *gate[] = {"_rows", "_gate"};
  const char *suffix = llvm::TypeSwitch<Operation *, const char *>(op)
                           .Case<LayerNormGradOp, RmsNormGradOp>([&](auto) { return norm[i]; })
                           .Case([&](AttentionGradOp) { return attention[i]; })
                           .Case([&](SwigluGradOp) { return swiglu[i]; })
                           .Case([&](MatmulBiasGeluOp) { return gelu[i]; })
                           .Case([&](MoeRouteOp) { return route[i]; })
                           .Case([&](MoeAssignOp) { return assign[i]; })
                           .Case([&](GateRowsGradOp) { return gate[i]; })
                           .Default([](Operation *) { return nullptr; });
  return suffix ? base + suffix : base + "_" + std::to_string(i);
}
