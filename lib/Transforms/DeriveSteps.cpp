// megac-derive-steps and megac-derive-decode-step: the steps a program runs besides training,
// derived from the functions it trains with, so that each is in the IR (and the dumps) before
// anything prints it.
#include "megac/Plan/PlanIR.h"
#include "megac/Transforms/Passes.h"
#include "tx/TxNames.h"
#include "tx/TxOps.h"

#include "mlir/IR/Builders.h"

namespace megac {
#define GEN_PASS_DEF_DERIVESTEPS
#define GEN_PASS_DEF_DERIVEDECODESTEP
#include "megac/Transforms/Passes.h.inc"
} // namespace megac

using namespace mlir;
using namespace megac;

namespace {

/// A copy of `fn` after it, named `name`, with role `role`.
func::FuncOp cloneAs(func::FuncOp fn, StringRef name, FunctionRole role) {
  OpBuilder b(fn.getContext());
  b.setInsertionPointAfter(fn);
  auto copy = cast<func::FuncOp>(b.clone(*fn));
  copy.setSymName(name);
  setRole(copy, role);
  return copy;
}

/// Erases the ops of `body` whose results nothing reads (last first: an op's users come after it).
void eraseUnread(Block &body) {
  for (Operation *op = body.getTerminator()->getPrevNode(); op;) {
    Operation *prev = op->getPrevNode();
    if (op->getNumResults() > 0 && op->use_empty())
      op->erase();
    op = prev;
  }
}

/// `forward` (a chunk's forward: the loss, then its stash) returning the loss alone, with the
/// values nothing then reads removed: the forward training runs, op for op.
FailureOr<func::FuncOp> lossOnly(func::FuncOp forward, StringRef name, FunctionRole role) {
  Block &body = forward.getBody().front();
  Operation *loss = body.getTerminator()->getOperand(0).getDefiningOp();
  if (!loss || loss->getBlock() != &body)
    return forward.emitOpError("the returned loss must be computed in the function's body");
  func::FuncOp fn = cloneAs(forward, name, role);
  Block &cloned = fn.getBody().front();
  Operation *terminator = cloned.getTerminator();
  terminator->setOperands(terminator->getOperand(0));
  fn.setType(FunctionType::get(fn.getContext(), fn.getArgumentTypes(), {terminator->getOperand(0).getType()}));
  fn.removeResAttrsAttr(); // the stash's attributes went with it (an empty list would leave one result unlisted)
  fn->removeAttr(names::kChunkAttr); // a step of its own, not one of the schedule's chunks
  fn->removeAttr(names::kStashAttr);
  eraseUnread(cloned);
  return fn;
}

/// The fp32 logits `step`'s returned loss is the cross-entropy of, or null (a 16-bit program's
/// logits are 16-bit).
Value lossLogits(func::FuncOp step) {
  auto loss = step.getBody().front().getTerminator()->getOperand(0).getDefiningOp<tx::CrossEntropyOp>();
  auto type = loss ? dyn_cast<RankedTensorType>(loss.getLogits().getType()) : RankedTensorType();
  return type && type.getElementType().isF32() ? loss.getLogits() : Value();
}

/// `step` (returning the loss of lossLogits) returns those logits instead.
void returnLogits(func::FuncOp step) {
  Operation *ret = step.getBody().front().getTerminator();
  Operation *loss = ret->getOperand(0).getDefiningOp();
  Value logits = lossLogits(step);
  ret->setOperand(0, logits);
  loss->erase();
  step.setType(FunctionType::get(step.getContext(), step.getArgumentTypes(), {logits.getType()}));
}

struct DeriveStepsPass : public megac::impl::DeriveStepsBase<DeriveStepsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<ParallelPlan> plan = readPlan(module, getArgument());
    if (failed(plan))
      return signalPassFailure();
    // Generation (OUT/train generate) reads the whole vocabulary's logits: one rank, whose one
    // chunk's forward computes them (evaluation runs the chunks' forwards themselves).
    if (plan->tp != 1 || plan->dp != 1 || plan->pp != 1)
      return markAllAnalysesPreserved();
    const std::string chunk = names::forwardHalf(names::chunkName(0));
    auto forward = module.lookupSymbol<func::FuncOp>(chunk);
    if (!forward) {
      module.emitError() << getArgument() << ": needs @" << chunk << " (megac-pipeline-split)";
      return signalPassFailure();
    }
    FailureOr<func::FuncOp> logits = lossOnly(forward, names::kLogitsStep, FunctionRole::LogitsStep);
    if (failed(logits))
      return signalPassFailure();
    if (lossLogits(*logits))
      returnLogits(*logits);
    else // 16-bit logits
      logits->erase();
  }
};

struct DeriveDecodeStepPass : public megac::impl::DeriveDecodeStepBase<DeriveDecodeStepPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>(names::kForwardEntry);
    if (!forward || !lossLogits(forward)) {
      module.emitError() << "decode_step needs the frontend's @" << names::kForwardEntry
                         << " ending in a cross-entropy of fp32 logits";
      return signalPassFailure();
    }
    // The layers' functions keep their own names clear of the training step's.
    for (auto fn : llvm::make_early_inc_range(module.getOps<func::FuncOp>())) {
      if (fn == forward)
        continue;
      auto name = StringAttr::get(module.getContext(), names::kDecodePrefix + fn.getName());
      if (failed(SymbolTable::replaceAllSymbolUses(fn, name, module))) {
        fn.emitOpError("cannot be renamed for decode_step");
        return signalPassFailure();
      }
      SymbolTable::setSymbolName(fn, name);
    }
    forward.setSymName(names::kDecodeStep);
    setRole(forward, FunctionRole::DecodeStep);
    // Generation trains nothing and reports nothing: the auxiliary losses go, with what only
    // they read.
    forward.walk([](Operation *op) {
      if (isa<tx::AddLossOp, tx::MetricOp, tx::RecordExpertLoadOp>(op))
        op->erase();
    });
    returnLogits(forward);
    eraseUnread(forward.getBody().front());
  }
};

} // namespace
