// megac-autodiff: forward of one microbatch -> forward + backward (see Passes.td).
#include "ReverseSweep.h"
#include "megac/Plan/PlanDialect.h"
#include "megac/Transforms/Passes.h"
#include "tx/TxNames.h"
#include "tx/TxOps.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "megac-autodiff"

namespace megac {
#define GEN_PASS_DEF_AUTODIFF
#include "megac/Transforms/Passes.h.inc"
} // namespace megac

using namespace mlir;
using namespace megac;

namespace {

bool isDifferentiable(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && isa<FloatType>(tensor.getElementType());
}

/// Erases the backward ops of `block` (those not in `forward`) that neither `wanted` nor an op
/// with effects (tx.param_grad, a layer's backward call) needs: the gradients of what no
/// gradient is wanted for (frozen parameters) and what only they read.
void eraseUnwantedBackward(Block &block, const llvm::SmallPtrSetImpl<Operation *> &forward, ArrayRef<Value> wanted) {
  llvm::SmallPtrSet<Operation *, 32> live;
  SmallVector<Operation *> work;
  for (Value v : wanted)
    if (Operation *def = v.getDefiningOp())
      work.push_back(def);
  for (Operation &op : block.without_terminator())
    if (!forward.contains(&op) && !isMemoryEffectFree(&op))
      work.push_back(&op);
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    if (forward.contains(op) || !live.insert(op).second)
      continue;
    for (Value operand : op->getOperands())
      if (Operation *def = operand.getDefiningOp())
        work.push_back(def);
  }
  SmallVector<Operation *> dead;
  for (Operation &op : block.without_terminator())
    if (!forward.contains(&op) && !live.contains(&op))
      dead.push_back(&op);
  for (Operation *op : llvm::reverse(dead)) // last first: a dead op's users are gone before it
    op->erase();
}

/// A called function split in two for the backward pass.
struct SplitFunction {
  func::FuncOp fwd; // (args) -> (results..., saved...)
  func::FuncOp bwd; // (args the backward reads..., saved..., result cotangents...) -> (arg cotangents...)
  SmallVector<unsigned> argsReadByBackward;
  SmallVector<unsigned> differentiableArgs; // the order of bwd's results
  unsigned numResults = 0;
};

/// Differentiates `callee` into a forward half that returns what the backward half needs.
/// Works on a joint copy (forward ops, then the backward ops the sweep adds) and cuts it.
FailureOr<SplitFunction> splitForBackward(func::FuncOp callee) {
  if (callee.isExternal())
    return callee.emitOpError("is called from the differentiated function but has no body");
  if (!callee.getBody().hasOneBlock())
    return callee.emitOpError("must have a single block to be differentiated");
  for (Operation &op : callee.getBody().front())
    if (isa<tx::ParamOp, func::CallOp>(op))
      return op.emitOpError("inside a called function is not supported by megac-autodiff: pass "
                            "parameters as arguments and call functions from the entry only");

  OpBuilder b(callee);
  auto joint = cast<func::FuncOp>(b.clone(*callee));
  Block &body = joint.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  SmallVector<Operation *> forwardOps;
  for (Operation &op : body.without_terminator())
    forwardOps.push_back(&op);
  llvm::SmallPtrSet<Operation *, 32> isForward(forwardOps.begin(), forwardOps.end());

  SplitFunction split;
  split.numResults = ret.getNumOperands();
  SmallVector<BlockArgument> resultCotangents;
  for (Value r : ret.getOperands())
    resultCotangents.push_back(body.addArgument(r.getType(), gradientLoc(r)));

  ReverseSweep sweep(body);
  for (auto [r, c] : llvm::zip_equal(ret.getOperands(), resultCotangents))
    sweep.seed(r, c);
  auto noCustom = [](Operation *op, ReverseSweep &) -> FailureOr<SmallVector<Value>> {
    return op->emitOpError("has no vector-Jacobian product");
  };
  if (failed(sweep.run(noCustom))) {
    joint.erase();
    return failure();
  }
  SmallVector<Value> argCotangents;
  for (unsigned i = 0; i < callee.getNumArguments(); ++i)
    if (isDifferentiable(body.getArgument(i).getType()) && !callee.getArgAttr(i, names::kFrozenArgAttr)) {
      split.differentiableArgs.push_back(i);
      argCotangents.push_back(sweep.cotangentOrZeros(body.getArgument(i)));
    }

  // What the backward ops read from the forward: arguments, and forward results (saved).
  eraseUnwantedBackward(body, isForward, argCotangents);
  SmallVector<Operation *> backwardOps;
  for (Operation &op : body.without_terminator())
    if (!isForward.contains(&op))
      backwardOps.push_back(&op);
  llvm::SetVector<Value> saved;
  llvm::SetVector<unsigned> argsRead;
  auto noteRead = [&](Value v) {
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      if (arg.getArgNumber() < callee.getNumArguments())
        argsRead.insert(arg.getArgNumber());
    } else if (isForward.contains(v.getDefiningOp())) {
      saved.insert(v);
    }
  };
  for (Operation *op : backwardOps)
    for (Value v : op->getOperands())
      noteRead(v);
  for (Value v : argCotangents)
    noteRead(v); // an argument cotangent can be a forward value only through a seed; kept general
  // A dequantized NF4 weight (QLoRA's base) is made again in the backward from its argument,
  // never kept: it is as large as the weight in fp32.
  SmallVector<Value> remade;
  for (Value v : saved)
    if (auto d = v.getDefiningOp<tx::Nf4DequantizeOp>(); d && isa<BlockArgument>(d.getWeight()))
      remade.push_back(v);
  for (Value v : remade) {
    saved.remove(v);
    argsRead.insert(cast<BlockArgument>(v.getDefiningOp<tx::Nf4DequantizeOp>().getWeight()).getArgNumber());
  }
  split.argsReadByBackward.assign(argsRead.begin(), argsRead.end());
  LLVM_DEBUG(llvm::dbgs() << DEBUG_TYPE ": @" << callee.getName() << ": backward reads " << argsRead.size()
                          << " arguments and " << saved.size() << " saved activations\n");
  llvm::sort(split.argsReadByBackward);

  // Forward half: the original body, also returning the saved activations.
  SmallVector<Type> fwdResults(callee.getResultTypes());
  for (Value v : saved)
    fwdResults.push_back(v.getType());
  split.fwd = func::FuncOp::create(b, callee.getLoc(), names::forwardHalf(callee.getName()),
                                   b.getFunctionType(callee.getArgumentTypes(), fwdResults));
  split.fwd.setPrivate();
  setRole(split.fwd, FunctionRole::LayerForward);
  split.fwd->setAttr(names::kSavedFromAttr, b.getI64IntegerAttr(split.numResults));
  {
    Block *fwdBody = split.fwd.addEntryBlock();
    IRMapping map;
    for (unsigned i = 0; i < callee.getNumArguments(); ++i) {
      fwdBody->getArgument(i).setLoc(body.getArgument(i).getLoc());
      map.map(body.getArgument(i), fwdBody->getArgument(i));
    }
    OpBuilder fb = OpBuilder::atBlockEnd(fwdBody);
    for (Operation *op : forwardOps)
      fb.clone(*op, map);
    SmallVector<Value> results;
    for (Value v : ret.getOperands())
      results.push_back(map.lookupOrDefault(v));
    for (Value v : saved)
      results.push_back(map.lookup(v));
    func::ReturnOp::create(fb, callee.getLoc(), results);
  }

  // Backward half: (arguments read, saved, result cotangents) -> argument cotangents.
  SmallVector<Type> bwdInputs;
  for (unsigned i : split.argsReadByBackward)
    bwdInputs.push_back(callee.getArgumentTypes()[i]);
  for (Value v : saved)
    bwdInputs.push_back(v.getType());
  for (Value c : resultCotangents)
    bwdInputs.push_back(c.getType());
  SmallVector<Type> bwdResults;
  for (Value c : argCotangents)
    bwdResults.push_back(c.getType());
  split.bwd = func::FuncOp::create(b, callee.getLoc(), names::backwardHalf(callee.getName()),
                                   b.getFunctionType(bwdInputs, bwdResults));
  split.bwd.setPrivate();
  setRole(split.bwd, FunctionRole::LayerBackward);
  split.bwd->setAttr(names::kForwardArgsAttr,
                     b.getDenseI64ArrayAttr(SmallVector<int64_t>(split.argsReadByBackward.begin(),
                                                                 split.argsReadByBackward.end())));
  {
    Block *bwdBody = split.bwd.addEntryBlock();
    IRMapping map;
    unsigned next = 0;
    // Each argument is named after what it brings: a forward argument, a saved activation, a
    // result's cotangent.
    auto bind = [&](Value from) {
      BlockArgument arg = bwdBody->getArgument(next++);
      arg.setLoc(from.getLoc());
      map.map(from, arg);
    };
    for (unsigned i : split.argsReadByBackward)
      bind(body.getArgument(i));
    for (Value v : saved)
      bind(v);
    for (Value c : resultCotangents)
      bind(c);
    OpBuilder bb = OpBuilder::atBlockEnd(bwdBody);
    for (Operation *op : backwardOps) {
      for (Value v : op->getOperands()) // made just before its first reader: its buffer lives briefly
        if (llvm::is_contained(remade, v) && !map.contains(v))
          map.map(v, bb.clone(*v.getDefiningOp(), map)->getResult(0));
      bb.clone(*op, map);
    }
    SmallVector<Value> results;
    for (Value c : argCotangents)
      results.push_back(map.lookup(c));
    func::ReturnOp::create(bb, callee.getLoc(), results);
  }
  joint.erase();
  return split;
}

struct AutodiffPass : public megac::impl::AutodiffBase<AutodiffPass> {
  using AutodiffBase::AutodiffBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto entryFn = module.lookupSymbol<func::FuncOp>(entry);
    if (!entryFn) {
      module.emitError() << "megac-autodiff: no function @" << entry << " to differentiate";
      return signalPassFailure();
    }
    if (failed(differentiateEntry(module, entryFn)))
      return signalPassFailure();
  }

  LogicalResult differentiateEntry(ModuleOp module, func::FuncOp fn) {
    auto lossType = fn.getNumResults() == 1 ? dyn_cast<RankedTensorType>(fn.getResultTypes()[0])
                                            : RankedTensorType();
    if (!lossType || lossType.getRank() != 0 || !isa<FloatType>(lossType.getElementType()))
      return fn.emitOpError("must return exactly one scalar loss (tensor<f32>) to be differentiated");
    if (!fn.getBody().hasOneBlock())
      return fn.emitOpError("must have a single block to be differentiated");
    Block &body = fn.getBody().front();

    // Split each called function once, then call the forward halves.
    DenseMap<StringAttr, SplitFunction> splits;
    DenseMap<Operation *, Operation *> originalCall; // forward call -> the call it replaced
    SmallVector<func::CallOp> calls(body.getOps<func::CallOp>());
    for (func::CallOp call : calls) {
      StringAttr name = call.getCalleeAttr().getAttr();
      if (!splits.count(name)) {
        auto callee = module.lookupSymbol<func::FuncOp>(name);
        tx::AddLossOp added;
        if (callee)
          callee.walk([&](tx::AddLossOp op) { added = op; });
        if (added)
          return added.emitOpError("adds to the objective inside @")
                 << callee.getName() << "; only the model's function may (its layers return what it adds)";
        FailureOr<SplitFunction> split = splitForBackward(callee);
        if (failed(split))
          return failure();
        splits[name] = *split;
      }
      const SplitFunction &split = splits[name];
      OpBuilder b(call);
      auto fwdCall = func::CallOp::create(b, call.getLoc(), split.fwd, call.getOperands());
      for (unsigned i = 0; i < split.numResults; ++i)
        call.getResult(i).replaceAllUsesWith(fwdCall.getResult(i));
      fwdCall->setAttr(names::kLayerAttr, call.getCalleeAttr());
      if (Attribute index = call->getAttr(names::kLayerIndexAttr))
        fwdCall->setAttr(names::kLayerIndexAttr, index);
      call.erase();
    }

    auto ret = cast<func::ReturnOp>(body.getTerminator());
    llvm::SmallPtrSet<Operation *, 32> forwardOps;
    for (Operation &op : body.without_terminator())
      forwardOps.insert(&op);
    Value dloss = body.addArgument(lossType, gradientLoc(ret.getOperand(0)));
    ReverseSweep sweep(body);
    sweep.seed(ret.getOperand(0), dloss);
    // Auxiliary losses join the objective: each seeded with its coefficient times the loss's
    // cotangent; the ops have done their job.
    for (auto added : llvm::to_vector(body.getOps<tx::AddLossOp>())) {
      forwardOps.erase(added);
      sweep.seed(added.getLoss(), tx::ScaleOp::create(sweep.builder(), added.getLoc(), dloss,
                                                      added.getCoefficientAttr()));
      added.erase();
    }
    auto callVjp = [&](Operation *op, ReverseSweep &s) -> FailureOr<SmallVector<Value>> {
      auto call = dyn_cast<func::CallOp>(op);
      if (!call)
        return op->emitOpError("has no vector-Jacobian product");
      auto layer = call->getAttrOfType<FlatSymbolRefAttr>(names::kLayerAttr);
      const SplitFunction &split = splits[layer.getAttr()];
      SmallVector<Value> inputs;
      for (unsigned i : split.argsReadByBackward)
        inputs.push_back(call.getOperand(i));
      for (Value v : call.getResults().drop_front(split.numResults))
        inputs.push_back(v);
      for (Value r : call.getResults().take_front(split.numResults))
        inputs.push_back(s.cotangentOrZeros(r));
      auto bwdCall = func::CallOp::create(s.builder(), call.getLoc(), split.bwd, inputs);
      if (Attribute index = call->getAttr(names::kLayerIndexAttr)) // the backward redraws its masks
        bwdCall->setAttr(names::kLayerIndexAttr, index);
      SmallVector<Value> operandCotangents(call.getNumOperands(), nullptr);
      for (auto [i, arg] : llvm::enumerate(split.differentiableArgs))
        operandCotangents[arg] = bwdCall.getResult(i);
      return operandCotangents;
    };
    if (failed(sweep.run(callVjp)))
      return failure();

    // Each gradient goes into its parameter's buffer as soon as it is made, so the program
    // never holds the gradients of all layers at once besides the buffers.
    // (In parameter order after each op that makes several.)
    OpBuilder b(ret);
    DenseMap<Operation *, Operation *> lastAfter; // an op making gradients -> its last tx.param_grad
    for (auto param : llvm::to_vector(body.getOps<tx::ParamOp>()))
      if (Value grad = sweep.cotangent(param); grad && !param.getFrozen()) {
        Operation *&last = lastAfter[grad.getDefiningOp()];
        if (last)
          b.setInsertionPointAfter(last);
        else
          b.setInsertionPointAfterValue(grad);
        last = tx::ParamGradOp::create(b, param.getLoc(), param, grad);
      }
    eraseUnwantedBackward(body, forwardOps, {}); // frozen parameters' gradients

    fn.setFunctionType(FunctionType::get(fn.getContext(), body.getArgumentTypes(), fn.getResultTypes()));
    fn.setName(names::kTrainStep);
    setRole(fn, FunctionRole::TrainStep);
    for (auto &[name, split] : splits)
      if (auto original = module.lookupSymbol<func::FuncOp>(name))
        original.erase();
    return success();
  }
};

} // namespace
