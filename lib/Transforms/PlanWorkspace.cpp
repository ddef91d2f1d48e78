// megac-plan-workspace: every function's buffers placed in its workspace, the offsets written on
// the ops that compute them, so the dump shows the plan the emitted program runs.
#include "megac/Analysis/BufferAliases.h"
#include "megac/Analysis/MemoryPlan.h"
#include "megac/Analysis/TensorBytes.h"
#include "megac/Transforms/Passes.h"
#include "tx/TxOps.h"

#include "mlir/IR/Builders.h"

namespace megac {
#define GEN_PASS_DEF_PLANWORKSPACE
#include "megac/Transforms/Passes.h.inc"
} // namespace megac

using namespace mlir;
using namespace megac;

namespace {

/// The values `fn` returns into its caller's buffers: all but a returned scalar (the loss, which
/// a step returns as a number), a function argument or a parameter.
DenseSet<Value> returnedIntoCaller(func::FuncOp fn) {
  DenseSet<Value> returned;
  for (Value v : fn.getBody().front().getTerminator()->getOperands()) {
    Value root = aliasRoot(v);
    auto type = dyn_cast<RankedTensorType>(v.getType());
    if (type && type.getRank() > 0 && !isa<BlockArgument>(root) && !root.getDefiningOp<tx::ParamOp>())
      returned.insert(root);
  }
  return returned;
}

/// Plans `fn`'s own buffers and writes the offsets on its ops; returns the frame's bytes.
int64_t planFrame(func::FuncOp fn) {
  Block &body = fn.getBody().front();
  DenseSet<Value> returned = returnedIntoCaller(fn);
  // Lifetimes of the workspace's buffers, measured in op positions.
  DenseMap<Operation *, int64_t> position;
  int64_t index = 0;
  for (Operation &op : body)
    position[&op] = index++;
  llvm::MapVector<Value, BufferLifetime> buffers;
  for (Operation &op : body) {
    if (!isView(op))
      for (Value r : op.getResults())
        if (!returned.contains(r))
          buffers[r] = {position[&op], position[&op], tensorBytes(r.getType())};
    for (Value operand : op.getOperands())
      if (auto it = buffers.find(aliasRoot(operand)); it != buffers.end())
        it->second.lastUse = std::max(it->second.lastUse, position[&op]);
  }
  // An overlapped collective reads its input until it is waited for.
  for (auto wait : body.getOps<tx::WaitCollectiveOp>())
    for (Value operand : wait.getPending().getDefiningOp()->getOperands())
      if (auto it = buffers.find(aliasRoot(operand)); it != buffers.end())
        it->second.lastUse = std::max(it->second.lastUse, position[wait]);
  SmallVector<BufferLifetime> lifetimes;
  for (auto &[v, life] : buffers)
    lifetimes.push_back(life);
  SmallVector<int64_t> offsets;
  const int64_t frame = planArena(lifetimes, offsets);
  // One entry per result of each op that has a buffer among them.
  DenseMap<Operation *, std::pair<SmallVector<int64_t>, SmallVector<int64_t>>> perOp;
  for (auto [i, entry] : llvm::enumerate(buffers)) {
    auto r = cast<OpResult>(entry.first);
    auto &[opOffsets, until] = perOp[r.getOwner()];
    opOffsets.resize(r.getOwner()->getNumResults(), -1);
    until.resize(r.getOwner()->getNumResults(), -1);
    opOffsets[r.getResultNumber()] = offsets[i];
    until[r.getResultNumber()] = lifetimes[i].lastUse;
  }
  OpBuilder b(fn.getContext());
  for (auto &[op, plan] : perOp) {
    op->setAttr(names::kWorkspaceOffsetsAttr, b.getDenseI64ArrayAttr(plan.first));
    op->setAttr(names::kLiveUntilAttr, b.getDenseI64ArrayAttr(plan.second));
  }
  return frame;
}

struct PlanWorkspacePass : public megac::impl::PlanWorkspaceBase<PlanWorkspacePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    planned.clear(); // a pass instance may run on several modules
    for (auto fn : module.getOps<func::FuncOp>())
      if (failed(plan(fn, symbols)))
        return signalPassFailure();
    // Attributes only: every analysis still holds, and MLIR skips verifying the module again
    // (with many pipeline stages, the schedule's verification costs more than the plan).
    markAllAnalysesPreserved();
  }

  /// Plans `fn` after its callees (a caller's workspace holds its deepest callee's after its
  /// frame); returns its workspace's bytes.
  FailureOr<int64_t> plan(func::FuncOp fn, SymbolTable &symbols) {
    std::optional<FunctionRole> role = roleOf(fn);
    if (role == FunctionRole::SyncGradients || role == FunctionRole::GatherParams)
      return 0; // printed as runtime calls on the gradient and parameter buffers
    if (auto it = planned.find(fn); it != planned.end())
      return it->second;
    if (!fn.getBody().hasOneBlock())
      return fn.emitOpError("must have one block to get a workspace");
    int64_t deepestCallee = 0;
    WalkResult calls = fn.walk([&](func::CallOp call) {
      auto callee = symbols.lookup<func::FuncOp>(call.getCallee());
      FailureOr<int64_t> bytes = callee ? plan(callee, symbols) : FailureOr<int64_t>(0);
      if (failed(bytes))
        return WalkResult::interrupt();
      deepestCallee = std::max(deepestCallee, *bytes);
      return WalkResult::advance();
    });
    if (calls.wasInterrupted())
      return failure();
    const int64_t frame = planFrame(fn);
    OpBuilder b(fn.getContext());
    fn->setAttr(names::kFrameBytesAttr, b.getI64IntegerAttr(frame));
    fn->setAttr(names::kWorkspaceBytesAttr, b.getI64IntegerAttr(frame + deepestCallee));
    return planned[fn] = frame + deepestCallee;
  }

  DenseMap<Operation *, int64_t> planned; // each function's workspace bytes, once planned
};

} // namespace
