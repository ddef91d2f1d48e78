// megac-autocast: 16-bit activations by autocast rules (see Passes.td).
#include "megac/Plan/PlanIR.h"
#include "megac/Transforms/Passes.h"
#include "tx/TxNames.h"
#include "tx/TxOps.h"

#include "mlir/IR/Builders.h"

namespace megac {
#define GEN_PASS_DEF_AUTOCAST
#include "megac/Transforms/Passes.h.inc"
} // namespace megac

using namespace mlir;
using namespace megac;

namespace {

bool isFloatTensor(Type t) {
  auto tensor = dyn_cast<RankedTensorType>(t);
  return tensor && isa<FloatType>(tensor.getElementType());
}

/// Retypes functions from their first call on: values computed from the data become `half`.
class Retyper {
public:
  Retyper(ModuleOp module, FloatType half) : module(module), half(half) {}

  /// Gives `fn`'s arguments `argTypes` and retypes its body; a function already retyped must be
  /// called with the same types.
  LogicalResult retype(func::FuncOp fn, TypeRange argTypes) {
    if (auto it = done.find(fn); it != done.end()) {
      if (TypeRange(it->second) == argTypes)
        return success();
      return fn.emitOpError() << "is called with activations of different types; megac-autocast gives a function "
                                 "one signature";
    }
    done[fn] = SmallVector<Type>(argTypes);
    Block &body = fn.getBody().front();
    for (auto [arg, type] : llvm::zip_equal(body.getArguments(), argTypes))
      arg.setType(type);
    for (Operation &op : body) {
      if (auto call = dyn_cast<func::CallOp>(op)) {
        auto callee = module.lookupSymbol<func::FuncOp>(call.getCallee());
        if (!callee || callee.isExternal())
          return call.emitOpError("calls a function megac-autocast cannot see");
        if (failed(retype(callee, call.getOperandTypes())))
          return failure();
        for (auto [r, type] : llvm::zip_equal(call.getResults(), callee.getResultTypes()))
          r.setType(type);
        continue;
      }
      if (!fromData(op))
        continue;
      for (Value r : op.getResults())
        if (isFloatTensor(r.getType()))
          r.setType(cast<RankedTensorType>(r.getType()).clone(half));
    }
    fn.setFunctionType(FunctionType::get(fn.getContext(), argTypes, body.getTerminator()->getOperandTypes()));
    return success();
  }

private:
  /// Whether `op`'s results are activations: computed from the data (an embedding lookup, or any
  /// op reading a 16-bit value). The loss stays fp32, and so do a router's load (counts summed
  /// over the layers) and z-loss; its probabilities and weights are the activations' type (a
  /// softmax computed in fp32 and rounded, as transformers' Mixtral casts its routing weights).
  bool fromData(Operation &op) {
    if (isa<tx::CrossEntropyOp, tx::ParamOp, func::ReturnOp, tx::RouterLoadOp, tx::RouterZLossOp>(op))
      return false;
    if (isa<tx::EmbeddingOp>(op))
      return true;
    return llvm::any_of(op.getOperandTypes(), [&](Type t) {
      return isFloatTensor(t) && cast<RankedTensorType>(t).getElementType() == half;
    });
  }

  ModuleOp module;
  FloatType half;
  DenseMap<func::FuncOp, SmallVector<Type>> done;
};

struct AutocastPass : megac::impl::AutocastBase<AutocastPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<ParallelPlan> plan = readPlan(module, "megac-autocast");
    if (failed(plan))
      return signalPassFailure();
    if (plan->precision == ActivationPrecision::Fp32)
      return markAllAnalysesPreserved();
    auto entry = module.lookupSymbol<func::FuncOp>(names::kForwardEntry);
    if (!entry || entry.isExternal()) {
      module.emitError() << "megac-autocast: expected the frontend's @" << names::kForwardEntry
                         << " (it runs before megac-autodiff)";
      return signalPassFailure();
    }
    Builder b(module.getContext());
    FloatType half = plan->precision == ActivationPrecision::Bf16 ? FloatType(b.getBF16Type()) : b.getF16Type();
    if (failed(Retyper(module, half).retype(entry, entry.getArgumentTypes())))
      signalPassFailure();
  }
};

} // namespace
