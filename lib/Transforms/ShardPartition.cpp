// megac-shard-partition: the collectives that give every op its operands as its factors need them,
// read from megac-shard-propagate's shardings, then the types made per rank along the partitioned
// axes (docs/architecture.md, "Sharding on N axes", step 2).
//
// Per op, in program order: the op's factors take the axes its results are split over (a
// dimension's axes go to its factors as FactorRule::factorsOfAxes assigns them); a factor no result has
// (a GEMM's k) takes the axes the results are partial sums over. Each operand then needs, per
// partitioned axis, its dimensions split as their factors are, and partial sums only where the
// op is linear in it and the result is partial without a split factor (a sum of partial sums).
// Where a value's sharding differs from what its user needs, a reshard by (source, target):
//   partial -> whole           all-reduce
//   partial -> split on d      reduce-scatter along d
//   split on d -> whole        all-gather along d
//   whole -> split on d        all-slice along d (a local slice: no communication)
//   split on d -> split on e   all-gather, then all-slice
// one per (value, needed sharding) in a function, each named after the value it moves
// (%ln_1_gathered) and carrying the rule that needs it (megac.rule).
//
// Not yet megac-tensor-parallel's replacement (megac compile runs that one): its vocabulary-
// parallel cross-entropy, distributed saved activations and Megatron's rule texts come next.
#include "megac/Plan/PlanIR.h"
#include "megac/Transforms/Passes.h"
#include "tx/TxFactorRule.h"
#include "tx/TxLocations.h"
#include "tx/TxNames.h"
#include "tx/TxOps.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringSet.h"

#include <map>

namespace megac {
#define GEN_PASS_DEF_SHARDPARTITION
#include "megac/Transforms/Passes.h.inc"
} // namespace megac

using namespace mlir;
using namespace megac;

namespace {

using Axes = SmallVector<StringRef, 2>;

/// A value's sharding as lists: each dimension's axes and the axes it is a partial sum over.
struct Spread {
  SmallVector<Axes, 4> dims;
  Axes partial;

  /// The dimension split over `axis`, if any.
  std::optional<int64_t> splitDim(StringRef axis) const {
    for (auto [d, axes] : llvm::enumerate(dims))
      if (llvm::is_contained(axes, axis))
        return d;
    return std::nullopt;
  }
  bool isPartial(StringRef axis) const { return llvm::is_contained(partial, axis); }
  /// `axis` removed everywhere.
  void drop(StringRef axis) {
    for (Axes &axes : dims)
      llvm::erase(axes, axis);
    llvm::erase(partial, axis);
  }
  bool sameOn(const Spread &o, StringRef axis) const {
    return splitDim(axis) == o.splitDim(axis) && isPartial(axis) == o.isPartial(axis);
  }
};

Spread spreadOf(tx::ShardingAttr attr) { return {attr.dimAxes(), attr.partialAxes()}; }

tx::ShardingAttr attrOf(MLIRContext *ctx, const Spread &s) { return tx::ShardingAttr::get(ctx, s.dims, s.partial); }

/// How an op's result depends on its operands where partial sums can pass through it: linear in
/// every operand (a sum), in one operand at a time (a product), or not at all.
enum class Linearity { None, Each, One };
Linearity linearity(Operation *op) {
  if (isa<tx::AddOp, tx::ReshapeOp, tx::SliceOp, tx::PadOp, tx::ReduceSumOp, tx::DropoutOp>(op))
    return Linearity::Each;
  if (isa<tx::MatmulOp, tx::MulOp>(op))
    return Linearity::One;
  return Linearity::None;
}

class Partitioner {
public:
  Partitioner(ModuleOp module, const ParallelPlan &plan, ArrayRef<StringRef> axes)
      : module(module), plan(plan), axes(axes) {}

  LogicalResult run() {
    for (auto fn : module.getOps<func::FuncOp>()) {
      if (fn.isExternal())
        continue;
      converted.clear();
      for (Operation &op : llvm::make_early_inc_range(fn.getBody().front()))
        if (failed(partition(&op)))
          return failure();
    }
    return localize();
  }

private:
  int64_t axisSize(StringRef axis) const { return gridAxisSize(plan, gridAxisNamed(axis)); }

  /// The sharding recorded for `v`, if any.
  static std::optional<Spread> recorded(Value v) {
    if (tx::ShardingAttr attr = tx::recordedSharding(v))
      return spreadOf(attr);
    return std::nullopt;
  }

  /// What each operand of `op` needs (nullopt: no need is known, leave it).
  SmallVector<std::optional<Spread>, 3> operandNeeds(Operation *op) {
    SmallVector<std::optional<Spread>, 3> needs(op->getNumOperands());
    if (auto call = dyn_cast<func::CallOp>(op)) { // as the callee's arguments are sharded
      auto callee = module.lookupSymbol<func::FuncOp>(call.getCallee());
      for (unsigned i = 0; callee && !callee.isExternal() && i < needs.size(); ++i)
        needs[i] = recorded(callee.getArgument(i));
      return needs;
    }
    if (auto ret = dyn_cast<func::ReturnOp>(op)) { // as the function's results are recorded
      auto fn = ret->getParentOfType<func::FuncOp>();
      for (unsigned i = 0; i < needs.size(); ++i)
        if (auto attr = fn.getResultAttrOfType<tx::ShardingAttr>(i, names::kShardingAttr))
          needs[i] = spreadOf(attr);
      return needs;
    }
    auto ruled = dyn_cast<tx::ShardingRuleOpInterface>(op);
    if (!ruled)
      return needs;
    // The factors' axes come from the results; a sink (a parameter's gradient) has none, and
    // its other operands follow its first (the gradient sharded like its parameter).
    tx::FactorRule rule = ruled.getFactorRule();
    SmallVector<Value, 2> references(op->getResults());
    if (references.empty() && op->getNumOperands() > 0) {
      references.push_back(op->getOperand(0));
      rule.results = {rule.operands.front()};
    }
    SmallVector<Spread, 2> results;
    for (Value r : references) {
      std::optional<Spread> s = recorded(r);
      if (!s)
        return needs;
      results.push_back(*s);
    }
    const SmallVector<int64_t> reductions = rule.reductionFactors();
    for (unsigned i = 0; i < needs.size(); ++i) {
      std::optional<Spread> current = recorded(op->getOperand(i));
      if (!current)
        continue;
      needs[i] = *current;
    }
    for (StringRef axis : axes) {
      // The factor the results are split over along `axis`, or the reduction they are partial over.
      std::optional<int64_t> factor;
      bool partial = false;
      for (auto [r, s] : llvm::enumerate(results)) {
        if (std::optional<int64_t> d = s.splitDim(axis)) {
          SmallVector<int64_t, 2> sizes;
          for (StringRef a : s.dims[*d])
            sizes.push_back(axisSize(a));
          SmallVector<int64_t, 2> of = rule.factorsOfAxes(rule.results[r][*d], sizes);
          if (!of.empty())
            factor = of[llvm::find(s.dims[*d], axis) - s.dims[*d].begin()];
        }
        partial |= s.isPartial(axis);
      }
      if (!factor && partial && reductions.size() == 1)
        factor = reductions.front();
      else if (!factor && partial) // several sums: the one an operand is split on
        for (int64_t f : reductions)
          for (auto [i, need] : llvm::enumerate(needs))
            if (need && need->splitDim(axis) && llvm::is_contained(rule.operands[i][*need->splitDim(axis)], f))
              factor = f;
      // Partial results without a split factor are partial sums passed through: a sum needs
      // every operand partial, a product one (the one that is: the others whole).
      const bool passesPartial = partial && !(factor && llvm::is_contained(reductions, *factor));
      const Linearity l = linearity(op);
      std::optional<unsigned> partialOperand;
      for (auto [i, need] : llvm::enumerate(needs))
        if (need && need->isPartial(axis) && !partialOperand)
          partialOperand = i;
      for (auto [i, need] : llvm::enumerate(needs)) {
        if (!need)
          continue;
        need->drop(axis);
        if (factor)
          for (auto [d, factors] : llvm::enumerate(rule.operands[i]))
            if (llvm::is_contained(factors, *factor))
              need->dims[d].push_back(axis);
        if (passesPartial && (l == Linearity::Each || (l == Linearity::One && i == partialOperand.value_or(0))))
          need->partial.push_back(axis);
      }
    }
    return needs;
  }

  LogicalResult partition(Operation *op) {
    SmallVector<std::optional<Spread>, 3> needs = operandNeeds(op);
    for (auto [i, need] : llvm::enumerate(needs)) {
      if (!need)
        continue;
      Value v = op->getOperand(i);
      FailureOr<Value> moved = reshard(v, *need, op);
      if (failed(moved))
        return failure();
      if (*moved != v)
        op->setOperand(i, *moved);
    }
    return success();
  }

  /// `v` with sharding `to` on the partitioned axes, made before `user`, one axis at a time.
  FailureOr<Value> reshard(Value v, const Spread &to, Operation *user) {
    std::optional<Spread> from = recorded(v);
    if (!from)
      return v;
    const tx::ShardingAttr key = attrOf(module.getContext(), to);
    if (auto it = converted.find({v.getAsOpaquePointer(), key.getAsOpaquePointer()}); it != converted.end())
      return it->second;
    Value current = v;
    Spread at = *from;
    for (StringRef axis : axes) {
      if (at.sameOn(to, axis))
        continue;
      if (to.isPartial(axis) && !at.isPartial(axis))
        return user->emitOpError() << "needs partial sums over " << axis << " of "
                                   << (tx::valueName(v).empty() ? StringRef("a value") : tx::valueName(v))
                                   << ", which is not one; megac-shard-propagate decided otherwise";
      std::optional<int64_t> target = to.splitDim(axis);
      if (at.isPartial(axis)) {
        bool scatter = target && !at.splitDim(axis);
        current = collective(current, at, axis, scatter ? "scattered" : "reduced", user, [&](OpBuilder &b) -> Value {
          auto sum = shard::ReductionKindAttr::get(b.getContext(), shard::ReductionKind::Sum);
          if (scatter)
            return shard::ReduceScatterOp::create(b, loc(current, "scattered"), current.getType(), grid(), axisOf(b, axis),
                                                  current, sum, b.getIndexAttr(*target));
          return shard::AllReduceOp::create(b, loc(current, "reduced"), current.getType(), grid(), axisOf(b, axis),
                                            current, sum);
        });
        llvm::erase(at.partial, axis);
        if (scatter)
          at.dims[*target].push_back(axis);
        recordOn(current, at);
      }
      if (std::optional<int64_t> d = at.splitDim(axis); d && d != target) {
        current = collective(current, at, axis, "gathered", user, [&](OpBuilder &b) -> Value {
          return shard::AllGatherOp::create(b, loc(current, "gathered"), current.getType(), grid(), axisOf(b, axis),
                                            current, b.getIndexAttr(*d));
        });
        llvm::erase(at.dims[*d], axis);
        recordOn(current, at);
      }
      if (target && !at.splitDim(axis)) {
        current = collective(current, at, axis, "sliced", user, [&](OpBuilder &b) -> Value {
          return shard::AllSliceOp::create(b, loc(current, "sliced"), current.getType(), current, names::kGrid,
                                           ArrayRef<shard::GridAxis>{static_cast<int16_t>(gridAxisNamed(axis))}, *target);
        });
        at.dims[*target].push_back(axis);
        recordOn(current, at);
      }
    }
    converted[{v.getAsOpaquePointer(), key.getAsOpaquePointer()}] = current;
    return current;
  }

  /// A collective made by `make` before `user`, with the rule that needs it.
  template <typename Make>
  Value collective(Value v, const Spread &from, StringRef axis, StringRef what, Operation *user, Make make) {
    OpBuilder b(user);
    Value result = make(b);
    result.getDefiningOp()->setAttr(names::kRuleAttr, b.getStringAttr(ruleFor(v, from, axis, what, user)));
    return result;
  }

  /// Why a collective is there, in Megatron's words where its rule has a name.
  static std::string ruleFor(Value v, const Spread &from, StringRef axis, StringRef what, Operation *user) {
    Operation *made = v.getDefiningOp();
    std::string before = user->getName().getStringRef().str();
    if (what == "reduced" || what == "scattered") {
      std::string head = isa_and_nonnull<tx::MatmulOp>(made)      ? "row-parallel output (Megatron's g): "
                         : isa_and_nonnull<tx::EmbeddingOp>(made) ? "vocab-parallel embedding: "
                                                                   : "";
      return head + "partial sums over " + axis.str() + (what == "scattered" ? " reduce-scattered" : " reduced") +
             " before " + before;
    }
    if (what == "gathered")
      return "split over " + axis.str() + " along dimension " + std::to_string(*from.splitDim(axis)) +
             ", gathered whole for " + before;
    return "sliced over " + axis.str() + " for " + before;
  }

  void recordOn(Value v, const Spread &s) {
    v.getDefiningOp()->setAttr(names::kShardingAttr, attrOf(module.getContext(), s));
  }
  FlatSymbolRefAttr grid() { return FlatSymbolRefAttr::get(module.getContext(), names::kGrid); }
  static DenseI16ArrayAttr axisOf(OpBuilder &b, StringRef axis) {
    return b.getDenseI16ArrayAttr({static_cast<int16_t>(gridAxisNamed(axis))});
  }
  static Location loc(Value v, StringRef what) {
    StringRef name = tx::valueName(v);
    return tx::derivedLoc(v, name.empty() ? Twine(what) : name + "_" + what, "megac-shard-partition");
  }

  /// Every value's type divided along the partitioned axes its sharding splits.
  LogicalResult localize() {
    auto local = [&](Value v) -> LogicalResult {
      auto type = dyn_cast<RankedTensorType>(v.getType());
      std::optional<Spread> s = recorded(v);
      if (!type || !s)
        return success();
      SmallVector<int64_t> shape(type.getShape());
      for (StringRef axis : axes)
        if (std::optional<int64_t> d = s->splitDim(axis)) {
          if (*d >= static_cast<int64_t>(shape.size()) || shape[*d] % axisSize(axis) != 0) {
            Operation *where = v.getDefiningOp() ? v.getDefiningOp() : v.getParentBlock()->getParentOp();
            return where->emitOpError() << "splits dimension " << *d << " of " << type << " over " << axis << " ("
                                        << axisSize(axis) << " ranks), which does not divide it";
          }
          shape[*d] /= axisSize(axis);
        }
      v.setType(RankedTensorType::get(shape, type.getElementType(), type.getEncoding()));
      return success();
    };
    for (auto fn : module.getOps<func::FuncOp>()) {
      if (fn.isExternal())
        continue;
      Block &body = fn.getBody().front();
      for (BlockArgument arg : body.getArguments())
        if (failed(local(arg)))
          return failure();
      WalkResult walked = fn.walk([&](Operation *op) {
        for (Value r : op->getResults())
          if (failed(local(r)))
            return WalkResult::interrupt();
        return WalkResult::advance();
      });
      if (walked.wasInterrupted())
        return failure();
      fn.setFunctionType(
          FunctionType::get(fn.getContext(), body.getArgumentTypes(), body.getTerminator()->getOperandTypes()));
    }
    return success();
  }

  ModuleOp module;
  const ParallelPlan &plan;
  ArrayRef<StringRef> axes;
  std::map<std::pair<const void *, const void *>, Value> converted; // (value, needed sharding) -> moved
};

struct ShardPartitionPass : public megac::impl::ShardPartitionBase<ShardPartitionPass> {
  using ShardPartitionBase::ShardPartitionBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<ParallelPlan> plan = readPlan(module, getArgument());
    if (failed(plan))
      return signalPassFailure();
    SmallVector<StringRef> axes;
    for (const std::string &a : partitionAxes) {
      if (a != names::kTensorAxis) {
        module.emitError() << getArgument() << ": axes=" << a << ": this pass partitions tp (dp's sums are "
                           << "megac-data-parallel's, its batch megac-shard-localize's); give axes=tp";
        return signalPassFailure();
      }
      axes.push_back(names::kTensorAxis);
    }
    if (failed(Partitioner(module, *plan, axes).run()))
      return signalPassFailure();
  }
};

} // namespace
