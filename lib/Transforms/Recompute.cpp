// megac-recompute: activation recomputation, Megatron's full and selective, on the joint forward +
// backward IR (see Passes.td).
#include "megac/Plan/PlanDialect.h"
#include "megac/Plan/PlanIR.h"
#include "megac/Plan/RecomputeFlags.h"
#include "megac/Transforms/Passes.h"
#include "tx/TxLocations.h"
#include "tx/TxNames.h"
#include "tx/TxOps.h"

#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Debug.h"

#include <functional>

#define DEBUG_TYPE "megac-recompute"

namespace megac {
#define GEN_PASS_DEF_RECOMPUTE
#include "megac/Transforms/Passes.h.inc"
} // namespace megac

using namespace mlir;
using namespace megac;

namespace {

/// A layer function as megac-autodiff split it.
struct LayerPair {
  func::FuncOp fwd, bwd;
  int64_t savedFrom = 0;            // fwd's first saved activation among its results
  SmallVector<int64_t> forwardArgs; // the fwd arguments bwd takes first
  int64_t numSaved() { return fwd.getNumResults() - savedFrom; }
};

/// One layer's forward and backward calls in @train_step.
struct LayerCalls {
  func::CallOp fwd, bwd;
  StringRef layer;
};

FailureOr<LayerPair> layerPair(ModuleOp module, StringRef layer, Operation *call) {
  LayerPair p;
  p.fwd = module.lookupSymbol<func::FuncOp>(names::forwardHalf(layer));
  p.bwd = module.lookupSymbol<func::FuncOp>(names::backwardHalf(layer));
  auto savedFrom = p.fwd ? p.fwd->getAttrOfType<IntegerAttr>(names::kSavedFromAttr) : IntegerAttr();
  auto forwardArgs = p.bwd ? p.bwd->getAttrOfType<DenseI64ArrayAttr>(names::kForwardArgsAttr) : DenseI64ArrayAttr();
  if (!savedFrom || !forwardArgs)
    return call->emitOpError() << "calls layer @" << layer << ", whose halves @" << names::forwardHalf(layer) << " ("
                               << names::kSavedFromAttr << ") and @" << names::backwardHalf(layer) << " ("
                               << names::kForwardArgsAttr << ") megac-autodiff makes; run it first";
  p.savedFrom = savedFrom.getInt();
  p.forwardArgs.assign(forwardArgs.asArrayRef().begin(), forwardArgs.asArrayRef().end());
  return p;
}

/// The layers of @train_step in forward order, each with its backward call.
FailureOr<SmallVector<LayerCalls>> layerCalls(ModuleOp module, func::FuncOp entry,
                                              llvm::StringMap<LayerPair> &pairs) {
  SmallVector<LayerCalls> layers;
  SmallVector<func::CallOp> backwardCalls;
  for (auto call : entry.getBody().front().getOps<func::CallOp>()) {
    if (auto layer = call->getAttrOfType<FlatSymbolRefAttr>(names::kLayerAttr)) {
      if (!pairs.count(layer.getValue())) {
        FailureOr<LayerPair> p = layerPair(module, layer.getValue(), call);
        if (failed(p))
          return failure();
        pairs[layer.getValue()] = *p;
      }
      layers.push_back({call, nullptr, layer.getValue()});
    } else if (isBackward(roleOf(module.lookupSymbol<func::FuncOp>(call.getCallee())))) {
      backwardCalls.push_back(call);
    }
  }
  // A backward call reads its forward call's saved activations (or, with none, its arguments).
  for (func::CallOp b : backwardCalls)
    for (LayerCalls &l : layers) {
      LayerPair &p = pairs[l.layer];
      if (b.getCallee() != p.bwd.getSymName())
        continue;
      const size_t k = p.forwardArgs.size();
      bool match = p.numSaved() > 0 ? b.getOperand(k).getDefiningOp() == l.fwd.getOperation()
                                    : llvm::all_of(llvm::enumerate(p.forwardArgs), [&](auto e) {
                                        return b.getOperand(e.index()) == l.fwd.getOperand(e.value());
                                      });
      if (match)
        l.bwd = b;
    }
  for (LayerCalls &l : layers)
    if (!l.bwd)
      return l.fwd.emitOpError() << "has no backward call of @" << l.layer << "; run megac-autodiff first";
  return layers;
}

// ---- selective: modules inside every layer -------------------------------------------------------

/// The forward ops of the MLP: each activation (GELU, SwiGLU) and what it is computed from, back to
/// the norm that feeds the MLP.
llvm::DenseSet<Operation *> mlpOps(Block &body) {
  llvm::DenseSet<Operation *> ops;
  SmallVector<Operation *> work;
  for (Operation &op : body)
    if (isa<tx::GeluOp, tx::SwigluOp>(op))
      work.push_back(&op);
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    if (!ops.insert(op).second)
      continue;
    for (Value v : op->getOperands())
      if (Operation *def = v.getDefiningOp(); def && !isa<tx::LayerNormOp, tx::RmsNormOp>(def))
        work.push_back(def);
  }
  return ops;
}

/// The saved activations of `p.fwd` the modules recompute, by index among the saved ones.
/// core_attn recomputes nothing: megac's attention keeps no s x s term (its backward recomputes
/// the scores from q, k and v), and its output is the output projection's input, which Megatron
/// keeps too.
llvm::SmallSetVector<int64_t, 8> selectedSaved(LayerPair &p, ArrayRef<std::string> modules) {
  Block &body = p.fwd.getBody().front();
  const bool mlp = llvm::is_contained(modules, "mlp"), norms = llvm::is_contained(modules, "layernorm");
  llvm::DenseSet<Operation *> mlpSlice = mlp ? mlpOps(body) : llvm::DenseSet<Operation *>();
  llvm::SmallSetVector<int64_t, 8> dropped;
  for (int64_t i = 0; i < p.numSaved(); ++i) {
    Operation *def = body.getTerminator()->getOperand(p.savedFrom + i).getDefiningOp();
    if (def && ((norms && isa<tx::LayerNormOp, tx::RmsNormOp>(def)) || mlpSlice.contains(def)))
      dropped.insert(i);
  }
  return dropped;
}

/// Rewrites a layer's halves so the forward no longer returns the saved activations `dropped`
/// and the backward recomputes each just before its first use, from the forward arguments and
/// the activations still saved. Updates `p` to the new halves.
void recomputeInside(LayerPair &p, const llvm::SmallSetVector<int64_t, 8> &dropped) {
  Block &fbody = p.fwd.getBody().front();
  Operation *fret = fbody.getTerminator();
  SmallVector<Value> saved(fret->getOperands().drop_front(p.savedFrom));
  llvm::DenseSet<Value> kept;
  for (auto [i, v] : llvm::enumerate(saved))
    if (!dropped.contains(i))
      kept.insert(v);
  // The forward arguments the recomputation reads beyond those the backward already takes.
  llvm::SmallSetVector<int64_t, 16> args(p.forwardArgs.begin(), p.forwardArgs.end());
  llvm::DenseSet<Operation *> visited;
  std::function<void(Value)> collect = [&](Value v) {
    if (kept.contains(v))
      return;
    if (auto arg = dyn_cast<BlockArgument>(v))
      return void(args.insert(arg.getArgNumber()));
    if (visited.insert(v.getDefiningOp()).second)
      for (Value operand : v.getDefiningOp()->getOperands())
        collect(operand);
  };
  for (int64_t i : dropped)
    collect(saved[i]);
  SmallVector<int64_t> newArgs(args.begin(), args.end());
  llvm::sort(newArgs);

  // The new backward: (forward arguments, kept activations, cotangents).
  Block &bbody = p.bwd.getBody().front();
  const int64_t oldArgs = static_cast<int64_t>(p.forwardArgs.size());
  SmallVector<Type> inputs;
  SmallVector<Location> locs;
  for (int64_t i : newArgs)
    inputs.push_back(fbody.getArgument(i).getType()), locs.push_back(fbody.getArgument(i).getLoc());
  for (auto [i, v] : llvm::enumerate(saved))
    if (!dropped.contains(i))
      inputs.push_back(v.getType()), locs.push_back(bbody.getArgument(oldArgs + i).getLoc());
  for (BlockArgument c : bbody.getArguments().drop_front(oldArgs + saved.size()))
    inputs.push_back(c.getType()), locs.push_back(c.getLoc());
  OpBuilder b(p.bwd);
  const FunctionType type = b.getFunctionType(inputs, p.bwd.getResultTypes());
  auto fn = func::FuncOp::create(b, p.bwd.getLoc(), p.bwd.getSymName(), type);
  fn->setAttrs(p.bwd->getAttrs()); // the old attributes, its type among them
  fn.setFunctionType(type);
  fn->setAttr(names::kForwardArgsAttr, b.getDenseI64ArrayAttr(newArgs));
  Block *body = b.createBlock(&fn.getBody(), {}, inputs, locs);

  IRMapping fmap, bmap; // forward values -> new backward; old backward values -> new backward
  unsigned next = 0;
  for (int64_t i : newArgs) {
    Value arg = body->getArgument(next++);
    fmap.map(fbody.getArgument(i), arg);
    if (auto at = llvm::find(p.forwardArgs, i); at != p.forwardArgs.end())
      bmap.map(bbody.getArgument(at - p.forwardArgs.begin()), arg);
  }
  DenseMap<Value, Value> droppedArg; // old backward argument -> the forward value it brought
  for (auto [i, v] : llvm::enumerate(saved)) {
    BlockArgument old = bbody.getArgument(oldArgs + i);
    if (dropped.contains(i)) {
      droppedArg[old] = v;
      continue;
    }
    Value arg = body->getArgument(next++);
    fmap.map(v, arg);
    bmap.map(old, arg);
  }
  for (BlockArgument c : bbody.getArguments().drop_front(oldArgs + saved.size()))
    bmap.map(c, body->getArgument(next++));

  OpBuilder bb = OpBuilder::atBlockEnd(body);
  std::function<Value(Value)> materialize = [&](Value v) -> Value {
    if (Value done = fmap.lookupOrNull(v))
      return done;
    Operation *def = v.getDefiningOp();
    for (Value operand : def->getOperands())
      materialize(operand);
    Operation *clone = bb.clone(*def, fmap);
    clone->setAttr(names::kRecomputedAttr, bb.getUnitAttr());
    return fmap.lookup(v);
  };
  for (Operation &op : bbody) {
    for (Value operand : op.getOperands())
      if (auto it = droppedArg.find(operand); it != droppedArg.end() && !bmap.contains(operand))
        bmap.map(operand, materialize(it->second));
    bb.clone(op, bmap);
  }
  SmallVector<Attribute> names;
  for (int64_t i : dropped)
    names.push_back(bb.getStringAttr(tx::valueName(saved[i])));
  fn->setAttr(names::kRecomputedAttr, bb.getArrayAttr(names));
  p.bwd.erase();
  p.bwd = fn;
  p.forwardArgs = newArgs;

  // The forward returns only what is still saved.
  SmallVector<Value> results(fret->getOperands().take_front(p.savedFrom));
  for (auto [i, v] : llvm::enumerate(saved))
    if (!dropped.contains(i))
      results.push_back(v);
  fret->setOperands(results);
  p.fwd.setFunctionType(FunctionType::get(p.fwd.getContext(), p.fwd.getArgumentTypes(), ValueRange(results).getTypes()));
}

/// The calls of one layer after recomputeInside changed its halves.
void rewriteCalls(LayerCalls &l, LayerPair &p, const llvm::SmallSetVector<int64_t, 8> &dropped) {
  OpBuilder b(l.fwd);
  auto fwd = func::CallOp::create(b, l.fwd.getLoc(), p.fwd, l.fwd.getOperands());
  fwd->setDiscardableAttrs(l.fwd->getDiscardableAttrDictionary());
  unsigned next = 0;
  for (unsigned i = 0; i < l.fwd.getNumResults(); ++i) {
    const int64_t s = static_cast<int64_t>(i) - p.savedFrom;
    if (s >= 0 && dropped.contains(s))
      continue;
    l.fwd.getResult(i).replaceAllUsesWith(fwd.getResult(next++));
  }
  SmallVector<Value> operands;
  for (int64_t i : p.forwardArgs)
    operands.push_back(fwd.getOperand(i));
  for (unsigned i = p.savedFrom; i < fwd.getNumResults(); ++i)
    operands.push_back(fwd.getResult(i));
  // The results' cotangents end both the old backward call and the new one.
  const size_t numCotangents = p.bwd.getNumArguments() - operands.size();
  for (Value c : l.bwd.getOperands().take_back(numCotangents))
    operands.push_back(c);
  b.setInsertionPoint(l.bwd);
  auto bwd = func::CallOp::create(b, l.bwd.getLoc(), p.bwd, operands);
  bwd->setDiscardableAttrs(l.bwd->getDiscardableAttrDictionary());
  l.bwd.replaceAllUsesWith(bwd.getResults());
  l.bwd.erase();
  l.fwd.erase();
  l.fwd = fwd, l.bwd = bwd;
}

// ---- full: whole layers, rerun in backward ------------------------------------------------------

/// The groups of layers full recomputation reruns together, [first, end) each: uniform splits
/// each chunk into groups of N, block takes the first N layers of each chunk one by one.
SmallVector<std::pair<int64_t, int64_t>> recomputeGroups(const ParallelPlan &plan, int64_t numLayers) {
  SmallVector<int64_t> chunks(plan.pipelineLayout.begin(), plan.pipelineLayout.end());
  if (chunks.empty())
    chunks.push_back(numLayers);
  const int64_t n = plan.recompute.numLayers;
  SmallVector<std::pair<int64_t, int64_t>> groups;
  int64_t start = 0;
  for (int64_t size : chunks) {
    if (plan.recompute.method == RecomputeMethod::Uniform)
      for (int64_t first = start; first < start + size; first += n)
        groups.push_back({first, std::min(first + n, start + size)});
    else
      for (int64_t l = start; l < start + std::min(n, size); ++l)
        groups.push_back({l, l + 1});
    start += size;
  }
  return groups;
}

/// The forward half of `p` without the saved activations, made once.
func::FuncOp forwardOnly(ModuleOp module, LayerPair &p, StringRef layer) {
  std::string name = names::forwardOnly(layer);
  if (auto fn = module.lookupSymbol<func::FuncOp>(name))
    return fn;
  OpBuilder b(p.fwd);
  b.setInsertionPointAfter(p.fwd);
  auto fn = cast<func::FuncOp>(b.clone(*p.fwd));
  fn.setSymName(name);
  setRole(fn, FunctionRole::LayerForwardOnly);
  Operation *ret = fn.getBody().front().getTerminator();
  SmallVector<Value> results(ret->getOperands().take_front(p.savedFrom));
  ret->setOperands(results);
  fn.setFunctionType(FunctionType::get(fn.getContext(), fn.getArgumentTypes(), ValueRange(results).getTypes()));
  fn->setAttr(names::kSavedFromAttr, b.getI64IntegerAttr(p.savedFrom));
  return fn;
}

/// Reruns each group's forward calls just before its first backward call (the backward of its
/// last layer), with every activation saved, and gives the group's backward calls those: the
/// forward keeps only the group's input. The forward calls no longer return saved activations.
void recomputeLayers(ModuleOp module, MutableArrayRef<LayerCalls> layers, llvm::StringMap<LayerPair> &pairs,
                     ArrayRef<std::pair<int64_t, int64_t>> groups, bool distributeSaved) {
  for (auto [first, end] : groups) {
    OpBuilder b(layers[end - 1].bwd);
    SmallVector<func::CallOp> reruns;
    for (int64_t i = first; i < end; ++i) {
      LayerCalls &l = layers[i];
      auto rerun = cast<func::CallOp>(b.clone(*l.fwd));
      rerun->removeAttr(names::kLayerAttr);
      rerun->setAttr(names::kRecomputeAttr, b.getI64IntegerAttr(i));
      StringRef name = tx::valueName(l.fwd.getResult(0));
      rerun->setLoc(tx::derivedLoc(l.fwd.getResult(0), name.empty() ? "recomputed" : name + "_recomputed",
                                   "megac-recompute"));
      if (i == first && distributeSaved) // megac-tensor-parallel keeps the input split over tp
        rerun->setAttr(names::kDistributeSavedAttr, b.getUnitAttr());
      if (i > first) // the group's inner inputs come from the rerun, not from the forward
        rerun->replaceUsesOfWith(layers[i - 1].fwd.getResult(0), reruns.back().getResult(0));
      for (OpResult r : l.fwd.getResults())
        l.bwd->replaceUsesOfWith(r, rerun.getResult(r.getResultNumber()));
      if (i > first)
        l.bwd->replaceUsesOfWith(layers[i - 1].fwd.getResult(0), reruns.back().getResult(0));
      reruns.push_back(rerun);
    }
  }
  // Each recomputed layer's forward returns its results alone.
  for (auto [first, end] : groups)
    for (int64_t i = first; i < end; ++i) {
      LayerCalls &l = layers[i];
      LayerPair &p = pairs.find(l.layer)->second;
      OpBuilder b(l.fwd);
      auto call = func::CallOp::create(b, l.fwd.getLoc(), forwardOnly(module, p, l.layer), l.fwd.getOperands());
      call->setDiscardableAttrs(l.fwd->getDiscardableAttrDictionary());
      for (int64_t r = 0; r < p.savedFrom; ++r)
        l.fwd.getResult(r).replaceAllUsesWith(call.getResult(r));
      l.fwd.erase();
      l.fwd = call;
    }
}

struct RecomputePass : public megac::impl::RecomputeBase<RecomputePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<ParallelPlan> plan = readPlan(module, getArgument());
    if (failed(plan))
      return signalPassFailure();
    const RecomputePlan &r = plan->recompute;
    if (r.granularity == RecomputeGranularity::None)
      return markAllAnalysesPreserved();
    auto entry = module.lookupSymbol<func::FuncOp>(names::kTrainStep);
    if (!entry) {
      module.emitError() << getArgument() << ": no @" << names::kTrainStep << "; run megac-autodiff first";
      return signalPassFailure();
    }
    llvm::StringMap<LayerPair> pairs;
    FailureOr<SmallVector<LayerCalls>> layers = layerCalls(module, entry, pairs);
    if (failed(layers))
      return signalPassFailure();
    const int64_t numLayers = static_cast<int64_t>(layers->size());
    if (r.granularity == RecomputeGranularity::Full) {
      int64_t placed = 0;
      for (int64_t n : plan->pipelineLayout)
        placed += n;
      if (!plan->pipelineLayout.empty() && placed != numLayers) {
        module.emitError() << getArgument() << ": the plan's pipeline_layout places " << placed
                           << " layers, @train_step calls " << numLayers;
        return signalPassFailure();
      }
      if (llvm::Error e = checkRecomputeLayers(*plan, numLayers)) {
        module.emitError() << getArgument() << ": " << llvm::toString(std::move(e));
        return signalPassFailure();
      }
      recomputeLayers(module, *layers, pairs, recomputeGroups(*plan, numLayers),
                      r.distributeSavedActivations && plan->tp > 1);
      return;
    }
    // Selective: every layer kind's halves once, then every layer's calls.
    llvm::StringMap<llvm::SmallSetVector<int64_t, 8>> dropped;
    for (auto &[layer, p] : pairs) {
      dropped[layer] = selectedSaved(p, r.modules);
      LLVM_DEBUG(llvm::dbgs() << DEBUG_TYPE ": @" << layer << ": " << dropped[layer].size() << " of " << p.numSaved()
                              << " saved activations recomputed\n");
      if (!dropped[layer].empty())
        recomputeInside(p, dropped[layer]);
      else
        p.bwd->setAttr(names::kRecomputedAttr, ArrayAttr::get(module.getContext(), {}));
    }
    for (LayerCalls &l : *layers)
      if (!dropped[l.layer].empty())
        rewriteCalls(l, pairs[l.layer], dropped[l.layer]);
  }
};

} // namespace
