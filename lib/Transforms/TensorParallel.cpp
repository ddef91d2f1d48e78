// megac-tensor-parallel: Megatron's tensor parallelism derived by sharding propagation over the
// joint forward + backward IR (see Passes.td). The rules are the ops' own (dialects/tx/
// TxSharding.cpp); this pass drives them through the functions, inserts the collectives and
// localizes the types.
#include "megac/Plan/PlanIR.h"
#include "megac/Transforms/Passes.h"
#include "tx/TxLocations.h"
#include "tx/TxNames.h"
#include "tx/TxOps.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Debug.h"

#include <map>
#include <tuple>

#define DEBUG_TYPE "megac-tensor-parallel"

namespace megac {
#define GEN_PASS_DEF_TENSORPARALLEL
#include "megac/Transforms/Passes.h.inc"
} // namespace megac

using namespace mlir;
using namespace megac;
using megac::tx::Sharding;

namespace {

/// Runs the ops' sharding rules (dialects/tx/TxSharding.cpp) over @train_step and the layer
/// functions it calls, inserts the collectives they ask for, gives every split value its
/// rank-local type and records every value's sharding in the IR.
class Sharder : public tx::ShardingRewriter {
public:
  Sharder(ModuleOp module, int64_t tp, bool sequenceParallel) : module(module), tp(tp), sp(sequenceParallel) {}

  LogicalResult run(func::FuncOp entry) {
    SmallVector<Sharding> results;
    if (failed(shardFunction(entry, SmallVector<Sharding>(entry.getNumArguments()), results)))
      return failure();
    if (failed(localizeTypes()))
      return failure();
    annotate();
    return success();
  }

  // ---- ShardingRewriter ---------------------------------------------------------------------

  Sharding get(Value v) const override { return shardings.lookup(v); }
  void set(Value v, Sharding s) override {
    shardings[v] = s;
    values.insert(v);
  }
  void require(Operation *op, unsigned i, Sharding to, StringRef rule) override {
    Value v = op->getOperand(i);
    if (get(v) != to)
      op->setOperand(i, convert(v, to, op, rule));
  }
  Value allReduce(OpBuilder &b, Value v, shard::ReductionKind kind, StringRef rule) override {
    Value r = shard::AllReduceOp::create(b, collectiveLoc(v, "reduced"), v.getType(), gridRef(), tpAxis(b), v,
                                         shard::ReductionKindAttr::get(b.getContext(), kind));
    r.getDefiningOp()->setAttr(names::kRuleAttr, b.getStringAttr(rule));
    set(r, Sharding::replicated());
    return r;
  }
  void recordSoftmaxStats(Value logits, Value max, Value sumExp) override { softmax[logits] = {max, sumExp}; }
  std::optional<std::pair<Value, Value>> softmaxStats(Value logits) const override {
    auto it = softmax.find(logits);
    return it == softmax.end() ? std::nullopt : std::optional<std::pair<Value, Value>>(it->second);
  }
  int64_t tensorParallelSize() const override { return tp; }
  bool sequenceParallel() const override { return sp; }

private:
  /// A collective's result is named after the value it moves: %ln_1_gathered.
  static Location collectiveLoc(Value v, StringRef what) {
    StringRef name = tx::valueName(v);
    return tx::derivedLoc(v, name.empty() ? llvm::Twine(what) : name + "_" + what, "megac-tensor-parallel");
  }

  FlatSymbolRefAttr gridRef() { return FlatSymbolRefAttr::get(module.getContext(), names::kGrid); }
  static DenseI16ArrayAttr tpAxis(OpBuilder &b) { return b.getDenseI16ArrayAttr({static_cast<int16_t>(GridAxis::Tp)}); }

  // ---- functions ----------------------------------------------------------------------------

  LogicalResult shardFunction(func::FuncOp fn, ArrayRef<Sharding> args, SmallVector<Sharding> &results) {
    Block &body = fn.getBody().front();
    for (auto [arg, s] : llvm::zip_equal(body.getArguments(), args))
      set(arg, s);
    functions.push_back(fn);
    SmallVector<Operation *> ops;
    for (Operation &op : body)
      ops.push_back(&op);
    for (Operation *op : ops)
      if (failed(shardOp(op)))
        return failure();
    // A saved activation goes to the backward half as it is, sequence-split under sequence
    // parallelism: the backward gathers it again where a weight gradient needs it whole.
    Operation *ret = body.getTerminator();
    for (Value v : ret->getOperands())
      results.push_back(get(v));
    return success();
  }

  LogicalResult shardOp(Operation *op) {
    LLVM_DEBUG(llvm::dbgs() << DEBUG_TYPE ": rule of " << op->getName() << " " << op->getLoc() << "\n");
    if (auto rule = dyn_cast<tx::ShardingRuleOpInterface>(op))
      return rule.shard(*this);
    if (auto call = dyn_cast<func::CallOp>(op))
      return shardCall(call);
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      if (ret->getParentOfType<func::FuncOp>().getSymName() == names::kTrainStep)
        require(ret, 0, Sharding::replicated(), "the loss is whole on every rank");
      return success();
    }
    return op->emitOpError("has no tensor-parallel sharding rule (tx::ShardingRuleOpInterface)");
  }

  LogicalResult shardCall(func::CallOp call) {
    if (call->hasAttr(names::kDistributeSavedAttr))
      distributeSavedInput(call);
    SmallVector<Sharding> args;
    auto calleeFn = module.lookupSymbol<func::FuncOp>(call.getCallee());
    // A layer's backward reads what its forward saved as the forward left it: partial sums stay
    // partial (expert tensor parallelism's rows, which the backward only reads linearly), and
    // every layer's forward leaves the same.
    const bool savedForBackward = calleeFn && roleOf(calleeFn) == FunctionRole::LayerBackward;
    for (OpOperand &operand : call->getOpOperands()) {
      // A layer function is shared by all layers: its inputs are whole, never partial sums.
      Sharding s = get(operand.get());
      if (s.isPartial() && !(savedForBackward && operand.getOperandNumber() > 0 && isa_and_nonnull<func::CallOp>(
                                                                                 operand.get().getDefiningOp()))) {
        Sharding to = seqSplittable(operand.get()) ? Sharding::split(tx::kSequenceDim) : Sharding::replicated();
        operand.set(convert(operand.get(), to, call, reduceRule(operand.get(), to.isSplit(), "the layer call")));
        s = to;
      }
      args.push_back(s);
    }
    StringRef callee = call.getCallee();
    auto it = calleeArgs.find(callee);
    if (it == calleeArgs.end()) {
      calleeArgs[callee] = args;
      SmallVector<Sharding> results;
      if (failed(shardFunction(module.lookupSymbol<func::FuncOp>(callee), args, results)))
        return failure();
      calleeResults[callee] = results;
    } else if (it->second != args) {
      return call.emitOpError() << "calls @" << callee
                                << " with other argument shardings than an earlier call; "
                                   "every layer must be sharded alike";
    }
    for (auto [r, s] : llvm::zip_equal(call.getResults(), calleeResults[callee]))
      set(r, s);
    return success();
  }

  /// --distribute-saved-activations: the input of a recomputed group (`rerun`'s first operand,
  /// whole on every tp rank) is kept split along the sequence from the group's forward to its
  /// rerun, which gathers it again; the group's first backward reads the gathered copy too.
  void distributeSavedInput(func::CallOp rerun) {
    Value input = rerun.getOperand(0);
    if (get(input).kind != Sharding::Replicated)
      return; // already split (sequence parallelism)
    Operation *forward = nullptr; // the group's first forward call, which reads the input
    for (Operation *user : input.getUsers())
      if (user->getBlock() == rerun->getBlock() && user->hasAttr(names::kLayerAttr) &&
          (!forward || user->isBeforeInBlock(forward)))
        forward = user;
    if (!forward)
      return;
    auto layer = rerun->getAttrOfType<IntegerAttr>(names::kRecomputeAttr);
    Value kept = convert(input, Sharding::split(tx::kSequenceDim), forward,
                         "full recomputation: the group's input kept split over tp (--distribute-saved-activations)");
    kept.getDefiningOp()->setAttr(names::kSavedForAttr, layer);
    Value whole = convert(kept, Sharding::replicated(), rerun,
                          "full recomputation: the group's input gathered again before it reruns");
    whole.getDefiningOp()->setAttr(names::kRecomputeAttr, layer);
    for (Operation *user : llvm::to_vector(rerun->getUsers()))
      user->replaceUsesOfWith(input, whole);
    rerun->replaceUsesOfWith(input, whole);
  }

  // ---- conversions --------------------------------------------------------------------------

  using ConversionKey = std::tuple<void *, int, int64_t>;
  static ConversionKey conversionKey(Value v, Sharding to) {
    return {v.getAsOpaquePointer(), static_cast<int>(to.kind), to.dim};
  }

  /// The value `v` with sharding `to`, inserting the collective before `user` (once per value
  /// and sharding). `rule` says which Megatron rule needs it; the dump shows it.
  Value convert(Value v, Sharding to, Operation *user, StringRef rule) {
    Sharding from = get(v);
    if (from == to)
      return v;
    auto key = conversionKey(v, to);
    if (auto it = converted.find(key); it != converted.end())
      return it->second;
    OpBuilder b(user);
    auto sum = shard::ReductionKindAttr::get(b.getContext(), shard::ReductionKind::Sum);
    Value result;
    if (from.isPartial() && to.kind == Sharding::Replicated) {
      result = shard::AllReduceOp::create(b, collectiveLoc(v, "reduced"), v.getType(), gridRef(), tpAxis(b), v, sum);
    } else if (from.isPartial() && to.isSplit()) {
      result = shard::ReduceScatterOp::create(b, collectiveLoc(v, "scattered"), v.getType(), gridRef(), tpAxis(b), v,
                                              sum, b.getIndexAttr(to.dim));
    } else if (from.isSplit() && to.kind == Sharding::Replicated) {
      result = shard::AllGatherOp::create(b, collectiveLoc(v, "gathered"), v.getType(), gridRef(), tpAxis(b), v,
                                          b.getIndexAttr(from.dim));
    } else if (from.kind == Sharding::Replicated && to.isSplit()) {
      result = shard::AllSliceOp::create(b, collectiveLoc(v, "sliced"), v.getType(), v, names::kGrid,
                                         ArrayRef<shard::GridAxis>{static_cast<int16_t>(GridAxis::Tp)}, to.dim);
    } else if (from.isSplit() && to.isSplit()) {
      Value whole = convert(v, Sharding::replicated(), user, rule);
      result = convert(whole, to, user, rule);
    } else {
      llvm_unreachable("no collective makes partial sums");
    }
    result.getDefiningOp()->setAttr(names::kRuleAttr, b.getStringAttr(rule));
    LLVM_DEBUG(llvm::dbgs() << DEBUG_TYPE ": " << result.getDefiningOp()->getName() << " of " << tx::valueName(v)
                            << " before " << user->getName() << ": " << rule << "\n");
    set(result, to);
    converted[key] = result;
    return result;
  }

  // ---- after the rules ----------------------------------------------------------------------

  LogicalResult localizeTypes();
  void annotate();

  ModuleOp module;
  int64_t tp;
  bool sp;
  DenseMap<Value, Sharding> shardings;
  llvm::SetVector<Value> values;            // each once, in the order they got a sharding
  SmallVector<func::FuncOp> functions;      // in the order they were sharded
  std::map<ConversionKey, Value> converted; // one collective per value and target sharding
  llvm::StringMap<SmallVector<Sharding>> calleeArgs, calleeResults;
  DenseMap<Value, std::pair<Value, Value>> softmax; // split logits -> (max, sum_exp), all-reduced
};

/// Every split value gets its rank-local type; function signatures follow.
LogicalResult Sharder::localizeTypes() {
  for (Value v : values) {
    Sharding s = get(v);
    auto type = dyn_cast<RankedTensorType>(v.getType());
    if (!s.isSplit() || !type)
      continue;
    SmallVector<int64_t> shape(type.getShape());
    if (shape[s.dim] % tp != 0) {
      Operation *where = v.getDefiningOp() ? v.getDefiningOp() : v.getParentBlock()->getParentOp();
      return where->emitOpError() << "tensor parallel size " << tp << " does not divide dimension " << s.dim
                                  << " (size " << shape[s.dim] << ") of " << type;
    }
    shape[s.dim] /= tp;
    v.setType(RankedTensorType::get(shape, type.getElementType()));
  }
  for (auto fn : module.getOps<func::FuncOp>()) {
    Block &body = fn.getBody().front();
    fn.setFunctionType(
        FunctionType::get(fn.getContext(), body.getArgumentTypes(), body.getTerminator()->getOperandTypes()));
  }
  return success();
}

/// Records each value's sharding in the IR: `megac.sharding` on every op (one per result) and on
/// the arguments and results of the sharded functions.
void Sharder::annotate() {
  MLIRContext *context = module.getContext();
  auto attrOf = [&](Value v) -> Attribute {
    auto type = dyn_cast<RankedTensorType>(v.getType());
    return type ? get(v).toAttr(context, type.getRank()) : Attribute();
  };
  for (func::FuncOp fn : functions) {
    Block &body = fn.getBody().front();
    for (BlockArgument arg : body.getArguments())
      if (Attribute a = attrOf(arg))
        fn.setArgAttr(arg.getArgNumber(), names::kShardingAttr, a);
    for (auto [i, v] : llvm::enumerate(body.getTerminator()->getOperands()))
      if (Attribute a = attrOf(v))
        fn.setResultAttr(i, names::kShardingAttr, a);
    for (Operation &op : body.without_terminator()) {
      if (op.getNumResults() == 0 || !llvm::all_of(op.getResults(), [&](Value r) { return shardings.count(r); }))
        continue;
      SmallVector<Attribute> perResult;
      for (Value r : op.getResults())
        perResult.push_back(attrOf(r));
      if (llvm::is_contained(perResult, Attribute()))
        continue;
      op.setAttr(names::kShardingAttr, perResult.size() == 1 ? perResult.front() : ArrayAttr::get(context, perResult));
    }
  }
}

struct TensorParallelPass : public megac::impl::TensorParallelBase<TensorParallelPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<ParallelPlan> plan = readPlan(module, getArgument());
    if (failed(plan))
      return signalPassFailure();
    if (plan->tp == 1)
      return markAllAnalysesPreserved(); // nothing to split
    auto entry = module.lookupSymbol<func::FuncOp>(names::kTrainStep);
    if (!entry) {
      module.emitError() << getArgument() << ": no @" << names::kTrainStep << "; run megac-autodiff first";
      return signalPassFailure();
    }
    if (failed(Sharder(module, plan->tp, plan->sp).run(entry)))
      return signalPassFailure();
  }
};

} // namespace
