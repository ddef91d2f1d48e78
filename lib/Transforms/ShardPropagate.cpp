// megac-shard-propagate: every value's sharding over every grid axis, from the placement and the
// plan's constraints through each op's factor rule (dialects/tx/TxFactorRule.h). It decides and
// records; it changes nothing else (no collective, no type): partitioning is the next pass's job.
//
// Seeds, strongest first:
//  - parameters' tensor-parallel placement (Megatron's: a ColumnParallelLinear's weight split on
//    its output features, a RowParallelLinear's on its input, the embedding on the vocabulary:
//    the frontend's `role` / `parallel_dim`);
//  - the plan's constraints: token ids and labels split on the batch over dp; with sequence
//    parallelism the residual stream (a layer's input and output, and their gradients) split on
//    the sequence over tp.
// What propagation derives keeps the strength of the seed it comes from.
// ZeRO-3 / FSDP also splits each parameter's first dimension over dp, but only where it is kept:
// an op reads the parameter gathered (the batch holds dp), so that split is recorded on the
// parameter as `megac.kept` and never proposed to an op.
#include "megac/Plan/PlanDialect.h"
#include "megac/Plan/PlanIR.h"
#include "megac/Transforms/Passes.h"
#include "tx/TxNames.h"
#include "tx/TxOps.h"

#include "mlir/IR/Builders.h"

#include <deque>

namespace megac {
#define GEN_PASS_DEF_SHARDPROPAGATE
#include "megac/Transforms/Passes.h.inc"
} // namespace megac

using namespace mlir;
using namespace megac;

namespace {

using Axes = SmallVector<StringRef, 2>;

/// A value's sharding: the axes of each dimension (major first), how strong the decision for
/// each dimension is (0: open; a decision carried through ops keeps the strength of where it
/// came from: kPlacement > kConstraint), and the axes it is a partial sum over.
struct ValueSharding {
  SmallVector<Axes, 4> dims;
  SmallVector<int, 4> priority;
  Axes partial;
};
constexpr int kConstraint = 2, kPlacement = 3;

int64_t rankOf(Value v) { return cast<RankedTensorType>(v.getType()).getRank(); }
/// An axis's place in @grid (Megatron's rank order).
int16_t gridOrder(StringRef axis) { return static_cast<int16_t>(gridAxisNamed(axis)); }

class Propagation {
public:
  Propagation(ModuleOp module, const ParallelPlan &plan) : module(module), plan(plan) {}

  void run() {
    unsigned numOps = 0;
    for (auto fn : module.getOps<func::FuncOp>())
      fn.walk([&](Operation *op) {
        ++numOps;
        if (auto c = dyn_cast<func::CallOp>(op)) {
          callers[c.getCallee()].push_back(c);
          if (auto callee = module.lookupSymbol<func::FuncOp>(c.getCallee()); callee && !callee.isExternal())
            callees[c] = callee; // a declaration has no values to pass on
        }
      });
    // Rules and shardings are big: growing their maps would move every one made so far.
    rules.reserve(numOps);
    decided.reserve(2 * numOps);
    seed(); // queues the ops next to every seed
    // The strongest decisions travel everywhere first (Shardy's priorities), so a weaker one
    // never claims an axis before it meets the stronger: the placement's wave, then the
    // constraints' from their seeds again. A change revisits the ops next to it; a dimension
    // only gains axes from stronger decisions, so each wave ends.
    for (int level : {kPlacement, kConstraint}) {
      threshold = level;
      if (level == kConstraint)
        for (Value v : constraintSeeds)
          enqueueNeighbours(v);
      while (!worklist.empty() || !links.empty()) {
        if (!links.empty()) {
          auto [from, to] = links.pop_back_val();
          link(from, to);
          continue;
        }
        Operation *op = worklist.front();
        worklist.pop_front();
        queued.erase(op);
        visit(op);
      }
    }
    record();
  }

private:
  int64_t axisSize(StringRef axis) const { return gridAxisSize(plan, gridAxisNamed(axis)); }

  /// Adds what `s` decides to `v`'s sharding and, if that changed anything, revisits the ops
  /// next to it.
  void decide(Value v, const ValueSharding &s) {
    if (merge(v, s))
      enqueueNeighbours(v);
  }

  /// The ops next to `v`: its producer and users, and across calls its other ends.
  void enqueueNeighbours(Value v) {
    if (Operation *def = v.getDefiningOp()) {
      if (auto call = dyn_cast<func::CallOp>(def)) { // a call's result: the callee's returned value
        if (auto callee = callees.lookup(call))
          linkLater(v, callee.getBody().front().getTerminator()->getOperand(cast<OpResult>(v).getResultNumber()));
      } else {
        enqueue(def);
      }
    } else if (auto fn = dyn_cast<func::FuncOp>(cast<BlockArgument>(v).getOwner()->getParentOp())) {
      for (func::CallOp c : callers.lookup(fn.getSymName())) // an argument: every call's operand
        linkLater(v, c.getOperand(cast<BlockArgument>(v).getArgNumber()));
    }
    for (OpOperand &use : v.getUses()) {
      Operation *user = use.getOwner();
      if (auto call = dyn_cast<func::CallOp>(user)) { // an operand: the callee's argument
        if (auto callee = callees.lookup(call))
          linkLater(v, callee.getBody().front().getArgument(use.getOperandNumber()));
      } else if (isa<func::ReturnOp>(user)) { // returned: every call's result
        for (func::CallOp c : callers.lookup(user->getParentOfType<func::FuncOp>().getSymName()))
          linkLater(v, c.getResult(use.getOperandNumber()));
      } else {
        enqueue(user);
      }
    }
  }

  /// A call passes shardings both ways, one value at a time (a layer's function serves every
  /// call alike): `from`'s sharding offered to `to` once the current op is done.
  void linkLater(Value from, Value to) { links.push_back({from, to}); }

  void link(Value from, Value to) {
    auto a = decided.find(from);
    if (a == decided.end())
      return;
    if (auto b = decided.find(to); b != decided.end() && b->second.dims == a->second.dims &&
                                   b->second.priority == a->second.priority && b->second.partial == a->second.partial)
      return; // the other end has it already: the usual case once a layer's function is decided
    if (std::optional<ValueSharding> s = usable(from))
      decide(to, *s);
  }

  void enqueue(Operation *op) {
    if (queued.insert(op).second)
      worklist.push_back(op);
  }

  /// A dimension takes `s`'s axes where its own decision is weaker (or as strong and only
  /// extended) and no stronger decision holds them elsewhere in `v`. Whether anything changed.
  bool merge(Value v, const ValueSharding &s) {
    if (s.partial.empty() && llvm::all_of(llvm::seq<size_t>(0, s.dims.size()),
                                          [&](size_t d) { return s.dims[d].empty() && s.priority[d] == 0; }))
      return false; // nothing to say yet
    auto [it, inserted] = decided.try_emplace(v);
    ValueSharding &mine = it->second;
    bool changed = inserted;
    if (inserted) {
      mine.dims.resize(rankOf(v));
      mine.priority.assign(rankOf(v), 0);
    }
    // Partial sums over more axes: those no dimension is split over.
    for (StringRef a : s.partial)
      if (!llvm::is_contained(mine.partial, a) &&
          llvm::none_of(mine.dims, [&](const Axes &d) { return llvm::is_contained(d, a); })) {
        mine.partial.push_back(a);
        changed = true;
      }
    for (auto [d, axes] : llvm::enumerate(s.dims)) {
      // A stronger decision, or one as strong that only adds axes (a merged dimension that
      // learns its other part's split later).
      auto extends = [&] {
        auto it = axes.begin();
        for (StringRef a : mine.dims[d])
          if ((it = std::find(it, axes.end(), a)) == axes.end())
            return false;
        return axes.size() > mine.dims[d].size();
      };
      if (axes.empty()) {
        // Whole, decided: a parameter the placement leaves whole, a factor another took the
        // axis of. A weaker decision may not split it later.
        if (mine.dims[d].empty() && s.priority[d] > mine.priority[d]) {
          mine.priority[d] = s.priority[d];
          changed = true;
        }
        continue;
      }
      if (mine.dims[d] == axes ||
          (s.priority[d] < mine.priority[d] || (s.priority[d] == mine.priority[d] && !extends())))
        continue;
      // An axis splits one dimension: a weaker decision elsewhere gives it up, a stronger one
      // keeps it (and this one is not taken).
      auto heldStronger = [&](StringRef a) {
        return llvm::is_contained(mine.partial, a) ||
               llvm::any_of(llvm::seq<size_t>(0, mine.dims.size()), [&](size_t o) {
                 return o != d && llvm::is_contained(mine.dims[o], a) && mine.priority[o] >= s.priority[d];
               });
      };
      if (llvm::any_of(axes, heldStronger))
        continue;
      for (size_t o = 0; o < mine.dims.size(); ++o) {
        if (o == d)
          continue;
        llvm::erase_if(mine.dims[o], [&](StringRef a) { return llvm::is_contained(axes, a); });
        if (mine.dims[o].empty())
          mine.priority[o] = std::min(mine.priority[o], 0); // open again
      }
      mine.dims[d] = axes;
      mine.priority[d] = s.priority[d];
      changed = true;
    }
    return changed;
  }

  ValueSharding split(Value v, int64_t dim, Axes axes, int priority) {
    ValueSharding s;
    s.dims.resize(rankOf(v));
    s.priority.assign(rankOf(v), 0);
    if (dim >= 0) {
      s.dims[dim] = std::move(axes);
      s.priority[dim] = priority;
    }
    return s;
  }

  void seedConstraint(Value v, const ValueSharding &s) {
    decide(v, s);
    constraintSeeds.push_back(v);
  }

  void seed() {
    const bool tp = plan.tp > 1, dp = plan.dp > 1;
    module.walk([&](tx::ParamOp p) {
      ValueSharding s = split(p.getResult(), -1, {}, kPlacement);
      s.priority.assign(s.dims.size(), kPlacement); // whole where the placement says nothing
      if (tp && p.getParallelDim())
        s.dims[*p.getParallelDim()].push_back(names::kTensorAxis);
      if (dp && plan.shardedState() == ShardingStrategy::OptimGradsParams)
        keptAxes[p.getResult()] = {names::kDataAxis};
      decide(p.getResult(), s);
    });
    for (auto fn : module.getOps<func::FuncOp>()) {
      if (fn.isExternal())
        continue;
      std::optional<FunctionRole> role = roleOf(fn);
      Block &body = fn.getBody().front();
      // Token ids and labels: split on the batch over dp.
      if (dp && (role == FunctionRole::Model || role == FunctionRole::TrainStep))
        for (BlockArgument arg : body.getArguments())
          if (auto t = dyn_cast<RankedTensorType>(arg.getType()); t && t.getElementType().isInteger() && t.getRank() >= 1)
            seedConstraint(arg, split(arg, 0, {names::kDataAxis}, kConstraint));
      // Sequence parallelism: the residual stream crossing a layer, and its gradient.
      if (!plan.sp || !tp || !role)
        continue;
      SmallVector<Value> residual;
      if (*role == FunctionRole::Layer || *role == FunctionRole::LayerForward ||
          *role == FunctionRole::LayerForwardOnly)
        residual = {body.getArgument(0), body.getTerminator()->getOperand(0)};
      else if (*role == FunctionRole::LayerBackward)
        residual = {body.getArguments().back(), body.getTerminator()->getOperand(0)};
      for (Value v : residual)
        if (rankOf(v) == 3)
          seedConstraint(v, split(v, tx::kSequenceDim, {names::kTensorAxis}, kConstraint));
    }
  }

  /// The axes `v` contributes to its ops at this level: its decisions at least as strong.
  std::optional<ValueSharding> usable(Value v) const {
    auto it = decided.find(v);
    if (it == decided.end())
      return std::nullopt;
    ValueSharding s = it->second;
    for (auto [d, axes] : llvm::enumerate(s.dims))
      if (s.priority[d] < threshold)
        axes.clear(); // not this level's to carry
    return s;
  }

  /// An op with a factor rule (calls pass their values on one at a time: linkLater).
  void visit(Operation *op) {
    if (auto ruled = dyn_cast<tx::ShardingRuleOpInterface>(op)) {
      auto [it, inserted] = rules.try_emplace(op);
      if (inserted) // each op's rule once: the rounds visit every op several times
        it->second = ruled.getFactorRule();
      visitRule(op, it->second);
    }
  }

  void visitRule(Operation *op, const tx::FactorRule &rule) {
    const size_t numFactors = rule.factorSizes.size();
    SmallVector<Axes, 8> factorAxes(numFactors);
    SmallVector<int, 8> factorPriority(numFactors, 0);
    // What each operand and result says of its factors.
    auto propose = [&](const tx::FactorRule::Tensor &dims, Value v) {
      auto it = decided.find(v); // read in place: this runs for every operand of every visit
      if (it == decided.end())
        return;
      const ValueSharding *s = &it->second;
      for (auto [d, factors] : llvm::enumerate(dims)) {
        const Axes &axes = s->dims[d];
        if (axes.empty() || factors.empty() || s->priority[d] < threshold)
          continue;
        // A dimension of several factors: each axis splits one of them (FactorRule::factorsOfAxes).
        SmallVector<int64_t, 2> sizes;
        for (StringRef a : axes)
          sizes.push_back(axisSize(a));
        SmallVector<int64_t, 2> of = rule.factorsOfAxes(factors, sizes);
        if (of.empty() || llvm::any_of(of, [&](int64_t f) {
              return rule.needsReplication[f] || s->priority[d] <= factorPriority[f];
            }))
          continue;
        for (int64_t f : of)
          factorAxes[f].clear();
        for (auto [a, f] : llvm::zip_equal(axes, of)) {
          factorAxes[f].push_back(a);
          factorPriority[f] = s->priority[d];
        }
      }
    };
    for (auto [dims, v] : llvm::zip_equal(rule.operands, op->getOperands()))
      propose(dims, v);
    for (auto [dims, v] : llvm::zip_equal(rule.results, op->getResults()))
      propose(dims, v);
    // An axis splits one factor of an op: the strongest decision keeps it (a column-parallel
    // weight's output features over sequence parallelism's sequence).
    for (size_t f = 0; f < numFactors; ++f)
      for (size_t g = 0; g < numFactors; ++g)
        if (f != g)
          llvm::erase_if(factorAxes[g], [&](StringRef a) {
            return llvm::is_contained(factorAxes[f], a) &&
                   (factorPriority[f] > factorPriority[g] || (factorPriority[f] == factorPriority[g] && f < g));
          });
    // Each result: its factors' axes where it has no stronger decision, and partial sums over
    // the split factors it lacks; an undecided operand: what the op reads.
    auto project = [&](const tx::FactorRule::Tensor &dims, Value v, std::optional<unsigned> result) {
      // An operand is what its producer made of it (a partial sum stays one); only one with no
      // producer's decision yet takes what this op would read.
      if (!result && decided.count(v))
        return;
      ValueSharding s;
      for (const tx::FactorRule::Dim &factors : dims) {
        Axes axes;
        int priority = 0;
        for (int64_t f : factors) {
          axes.append(factorAxes[f].begin(), factorAxes[f].end());
          priority = std::max(priority, factorPriority[f]);
        }
        s.dims.push_back(axes);
        s.priority.push_back(priority);
      }
      for (size_t f = 0; result && f < numFactors; ++f)
        if (!factorAxes[f].empty() && !rule.resultHas(*result, f))
          s.partial.append(factorAxes[f].begin(), factorAxes[f].end());
      decide(v, s);
    };
    for (auto [r, dims] : llvm::enumerate(rule.results))
      project(dims, op->getResult(r), r);
    for (auto [dims, v] : llvm::zip_equal(rule.operands, op->getOperands()))
      if (isa<RankedTensorType>(v.getType()))
        project(dims, v, std::nullopt);
  }

  /// How a parameter is kept between its uses (ZeRO-3: its first dimension also split over dp,
  /// after tp's split), null for one kept as it is read.
  tx::ShardingAttr keptAttr(Value v) {
    auto kept = keptAxes.find(v);
    if (kept == keptAxes.end() || rankOf(v) == 0)
      return {};
    tx::ShardingAttr read = toAttr(v);
    SmallVector<Attribute> dims(read.getDims().begin(), read.getDims().end());
    SmallVector<Attribute> first(cast<ArrayAttr>(dims.front()).begin(), cast<ArrayAttr>(dims.front()).end());
    for (StringRef a : kept->second)
      first.push_back(StringAttr::get(module.getContext(), a));
    dims.front() = ArrayAttr::get(module.getContext(), first);
    return tx::ShardingAttr::get(module.getContext(), ArrayAttr::get(module.getContext(), dims), read.getPartial());
  }

  tx::ShardingAttr toAttr(Value v) {
    ValueSharding s = decided.lookup(v);
    s.dims.resize(rankOf(v));
    // A partial sum is over a set of axes: listed in the grid's order.
    llvm::sort(s.partial, [](StringRef a, StringRef b) { return gridOrder(a) < gridOrder(b); });
    return tx::ShardingAttr::get(module.getContext(), s.dims, s.partial);
  }

  /// megac.sharding on every function argument and result and on every op (one per result).
  void record() {
    for (auto fn : module.getOps<func::FuncOp>()) {
      if (fn.isExternal())
        continue;
      Block &body = fn.getBody().front();
      for (BlockArgument arg : body.getArguments())
        if (isa<RankedTensorType>(arg.getType()))
          fn.setArgAttr(arg.getArgNumber(), names::kShardingAttr, toAttr(arg));
      for (auto [i, v] : llvm::enumerate(body.getTerminator()->getOperands()))
        if (isa<RankedTensorType>(v.getType()))
          fn.setResultAttr(i, names::kShardingAttr, toAttr(v));
      fn.walk([&](Operation *op) {
        if (op->getNumResults() == 0 || !llvm::all_of(op->getResultTypes(), llvm::IsaPred<RankedTensorType>))
          return;
        SmallVector<Attribute> perResult;
        for (Value r : op->getResults())
          perResult.push_back(toAttr(r));
        op->setAttr(names::kShardingAttr,
                    perResult.size() == 1 ? perResult.front() : ArrayAttr::get(module.getContext(), perResult));
        if (tx::ShardingAttr kept = keptAttr(op->getResult(0)))
          op->setAttr(names::kKeptShardingAttr, kept);
      });
    }
  }

  ModuleOp module;
  const ParallelPlan &plan;
  DenseMap<Value, ValueSharding> decided;
  DenseMap<Value, Axes> keptAxes; // ZeRO-3's split of a parameter where it is kept (megac.kept)
  int threshold = kPlacement;        // the weakest decision the current level carries
  DenseMap<Operation *, tx::FactorRule> rules;
  llvm::StringMap<SmallVector<func::CallOp>> callers;
  DenseMap<Operation *, func::FuncOp> callees;
  SmallVector<std::pair<Value, Value>> links; // values a call passes on, not yet offered
  std::deque<Operation *> worklist; // first in, first out: forward order first
  DenseSet<Operation *> queued;
  SmallVector<Value> constraintSeeds;
};

struct ShardPropagatePass : public megac::impl::ShardPropagateBase<ShardPropagatePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<ParallelPlan> plan = readPlan(module, getArgument());
    if (failed(plan))
      return signalPassFailure();
    if (plan->tp == 1 && plan->dp == 1) // nothing is split within a stage
      return markAllAnalysesPreserved();
    // The batch is split where the ids come in: without the model's entry it would stay whole.
    if (plan->dp > 1 && llvm::none_of(module.getOps<func::FuncOp>(), [](func::FuncOp fn) {
          return roleOf(fn) == FunctionRole::Model || roleOf(fn) == FunctionRole::TrainStep;
        })) {
      module.emitError() << getArgument() << ": dp is " << plan->dp << " but no function has "
                         << names::kRoleAttr << " = #megac.role<model> or #megac.role<train_step>, where the "
                         << "token ids come in; the frontend and megac-autodiff set them";
      return signalPassFailure();
    }
    Propagation(module, *plan).run();
  }
};

} // namespace
