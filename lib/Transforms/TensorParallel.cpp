// megac-tensor-parallel: Megatron's tensor parallelism derived by sharding propagation over
// the joint forward + backward IR (see Passes.td).
#include "MegatronPlacement.h"
#include "megac/Frontend/PlanIR.h"
#include "megac/Transforms/Passes.h"
#include "tx/TxNames.h"
#include "tx/TxOps.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/TypeSwitch.h"

#include <map>
#include <tuple>

namespace megac {
#define GEN_PASS_DEF_TENSORPARALLEL
#include "megac/Transforms/Passes.h.inc"
} // namespace megac

using namespace mlir;
using namespace megac;

namespace {

/// How a value is spread over the tensor-parallel ranks.
struct Sharding {
  enum Kind : uint8_t { Replicated, Split, Partial };
  Kind kind = Replicated;
  int64_t dim = -1; // for Split
  static Sharding replicated() { return {}; }
  static Sharding split(int64_t d) { return {Split, d}; }
  static Sharding partial() { return {Partial, -1}; }
  bool isSplit() const { return kind == Split; }
  bool isPartial() const { return kind == Partial; }
  bool operator==(const Sharding &o) const { return kind == o.kind && dim == o.dim; }
  bool operator!=(const Sharding &o) const { return !(*this == o); }
};

ArrayRef<int64_t> shapeOf(Value v) { return cast<RankedTensorType>(v.getType()).getShape(); }
int64_t rankOf(Value v) { return cast<RankedTensorType>(v.getType()).getRank(); }
int64_t prod(ArrayRef<int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return n;
}

/// The dimension of a reshape's result that carries a split of the input's dimension `d`:
/// the one starting at the same row-major position, with a size the ranks divide.
std::optional<int64_t> reshapeSplitDim(ArrayRef<int64_t> in, ArrayRef<int64_t> out, int64_t d, int64_t tp) {
  int64_t before = prod(in.take_front(d));
  for (int64_t o = 0; o < static_cast<int64_t>(out.size()); ++o)
    if (prod(out.take_front(o)) == before && out[o] % tp == 0 && out[o] > 1 &&
        (out[o] % in[d] == 0 || in[d] % out[o] == 0) && prod(out.drop_front(o)) == prod(in.drop_front(d)))
      return o;
  return std::nullopt;
}

class Sharder {
public:
  Sharder(ModuleOp module, int64_t tp, bool sequenceParallel) : module(module), tp(tp), sp(sequenceParallel) {}

  LogicalResult run(func::FuncOp entry) {
    SmallVector<Sharding> results;
    if (failed(shardFunction(entry, SmallVector<Sharding>(entry.getNumArguments()), results)))
      return failure();
    return localizeTypes();
  }

private:
  Sharding get(Value v) const { return shardings.lookup(v); }
  void set(Value v, Sharding s) {
    shardings[v] = s;
    values.push_back(v);
  }

  // ---- functions ----------------------------------------------------------------------------

  LogicalResult shardFunction(func::FuncOp fn, ArrayRef<Sharding> args, SmallVector<Sharding> &results) {
    Block &body = fn.getBody().front();
    for (auto [arg, s] : llvm::zip_equal(body.getArguments(), args))
      set(arg, s);
    SmallVector<Operation *> ops;
    for (Operation &op : body)
      ops.push_back(&op);
    for (Operation *op : ops)
      if (failed(shardOp(op)))
        return failure();
    // A value this function already gathered (a norm output before a column-parallel layer) is
    // returned gathered: the backward half then needs no second all-gather for the weight
    // gradients. Costs the memory of the whole sequence for that activation.
    Operation *ret = body.getTerminator();
    if (fn.getSymName() != names::kTrainStep)
      for (OpOperand &operand : ret->getOpOperands()) {
        if (get(operand.get()).isSplit())
          if (auto it = converted.find(conversionKey(operand.get(), Sharding::replicated())); it != converted.end())
            operand.set(it->second);
      }
    for (Value v : ret->getOperands())
      results.push_back(get(v));
    return success();
  }

  LogicalResult shardCall(func::CallOp call) {
    SmallVector<Sharding> args;
    for (OpOperand &operand : call->getOpOperands()) {
      // A layer function is shared by all layers: its inputs are whole, never partial sums.
      Sharding s = get(operand.get());
      if (s.isPartial()) {
        Sharding to = seqSplittable(operand.get()) ? Sharding::split(kSeqDim) : Sharding::replicated();
        operand.set(convert(operand.get(), to, call,
                            to.isSplit() ? "sequence parallel: partial sums reduce-scattered along the sequence"
                                         : "partial sums reduced before the layer call"));
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
      return call.emitOpError() << "calls @" << callee << " with other argument shardings than an earlier call; "
                                   "every layer must be sharded alike";
    }
    for (auto [r, s] : llvm::zip_equal(call.getResults(), calleeResults[callee]))
      set(r, s);
    return success();
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
    Location loc = v.getLoc();
    auto gridRef = FlatSymbolRefAttr::get(b.getContext(), names::kGrid);
    auto axes = b.getDenseI16ArrayAttr({static_cast<int16_t>(GridAxis::Tp)});
    Value result;
    if (from.isPartial() && to.kind == Sharding::Replicated) {
      result = shard::AllReduceOp::create(b, loc, v.getType(), gridRef, axes, v,
                                          shard::ReductionKindAttr::get(b.getContext(), shard::ReductionKind::Sum));
    } else if (from.isPartial() && to.isSplit()) {
      result = shard::ReduceScatterOp::create(b, loc, v.getType(), gridRef, axes, v,
                                              shard::ReductionKindAttr::get(b.getContext(), shard::ReductionKind::Sum),
                                              b.getIndexAttr(to.dim));
    } else if (from.isSplit() && to.kind == Sharding::Replicated) {
      result = shard::AllGatherOp::create(b, loc, v.getType(), gridRef, axes, v, b.getIndexAttr(from.dim));
    } else if (from.kind == Sharding::Replicated && to.isSplit()) {
      result = shard::AllSliceOp::create(b, loc, v.getType(), v, names::kGrid,
                                         ArrayRef<shard::GridAxis>{static_cast<int16_t>(GridAxis::Tp)}, to.dim);
    } else if (from.isSplit() && to.isSplit()) {
      Value whole = convert(v, Sharding::replicated(), user, rule);
      result = convert(whole, to, user, rule);
    } else {
      llvm_unreachable("no collective makes partial sums");
    }
    result.getDefiningOp()->setAttr(names::kRuleAttr, b.getStringAttr(rule));
    set(result, to);
    converted[key] = result;
    return result;
  }

  /// Makes operand i of `op` have sharding `to`.
  void require(Operation *op, unsigned i, Sharding to, StringRef rule) {
    Value v = op->getOperand(i);
    if (get(v) != to)
      op->setOperand(i, convert(v, to, op, rule));
  }

  /// Partial sums become whole before a non-linear op. The rule is named after what made them.
  void requireWhole(Operation *op, unsigned i) {
    Value v = op->getOperand(i);
    if (!get(v).isPartial())
      return;
    std::string rule = "partial sums over tp reduced before " + op->getName().getStringRef().str();
    if (isa_and_nonnull<tx::MatmulOp>(v.getDefiningOp()))
      rule = "row-parallel output (Megatron's g): " + rule;
    else if (isa_and_nonnull<tx::EmbeddingOp>(v.getDefiningOp()))
      rule = "vocab-parallel embedding: " + rule;
    require(op, i, Sharding::replicated(), rule);
  }

  // ---- rules --------------------------------------------------------------------------------

  LogicalResult shardOp(Operation *op);
  LogicalResult shardMatmul(tx::MatmulOp op);
  LogicalResult shardBroadcastBinary(Operation *op, bool linear);
  LogicalResult shardCrossEntropy(tx::CrossEntropyOp op);
  LogicalResult shardCrossEntropyGrad(tx::CrossEntropyGradOp op);

  /// Elementwise ops: every operand takes the first one's sharding, whole (not partial).
  LogicalResult shardElementwise(Operation *op) {
    for (unsigned i = 0; i < op->getNumOperands(); ++i)
      requireWhole(op, i);
    Sharding s = get(op->getOperand(0));
    for (unsigned i = 1; i < op->getNumOperands(); ++i)
      require(op, i, s, "elementwise operands sharded alike");
    for (Value r : op->getResults())
      set(r, s);
    return success();
  }

  LogicalResult localizeTypes();

  /// With sequence parallelism, an activation [batch, seq, hidden] outside the tensor-parallel
  /// regions is split along the sequence.
  bool seqSplittable(Value v) const {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    return sp && t && t.getRank() == 3 && t.getShape()[1] % tp == 0;
  }
  static constexpr int64_t kSeqDim = 1;

  ModuleOp module;
  int64_t tp;
  bool sp;
  DenseMap<Value, Sharding> shardings;
  SmallVector<Value> values;
  std::map<ConversionKey, Value> converted; // one collective per value and target sharding
  llvm::StringMap<SmallVector<Sharding>> calleeArgs, calleeResults;
  DenseSet<Value> vocabParallelIds;                      // ids looked up in a vocabulary-split table
  DenseMap<Value, std::pair<Value, Value>> softmaxStats; // split logits -> (max, sum_exp), all-reduced
};

LogicalResult Sharder::shardMatmul(tx::MatmulOp op) {
  requireWhole(op, 0);
  requireWhole(op, 1);
  int64_t lr = rankOf(op.getLhs()), rr = rankOf(op.getRhs()), outRank = rankOf(op.getResult());
  bool ta = op.getTransposeLhs(), tb = op.getTransposeRhs();
  int64_t mDim = ta ? lr - 1 : lr - 2, kLhs = ta ? lr - 2 : lr - 1;
  int64_t kRhs = tb ? rr - 1 : rr - 2, nDim = tb ? rr - 2 : rr - 1;
  Sharding a = get(op.getLhs()), w = get(op.getRhs());
  bool sharedRhs = rr == 2 && lr > 2; // rows of every batch entry are independent
  auto is = [](Sharding s, int64_t d) { return s.isSplit() && s.dim == d; };
  auto rep = Sharding::replicated();
  Sharding result = rep;
  if (!a.isSplit() && !w.isSplit()) {
    result = rep;
  } else if (!a.isSplit() && is(w, nDim)) {
    result = Sharding::split(outRank - 1); // column-parallel
  } else if (a.isSplit() && a.dim != kLhs && is(w, nDim)) {
    require(op, 0, rep, "sequence parallel: all-gather along the sequence before a column-parallel layer");
    result = Sharding::split(outRank - 1);
  } else if (is(a, kLhs) && is(w, kRhs)) {
    result = Sharding::partial(); // row-parallel: each rank sums its share of k
  } else if (is(a, kLhs) && !w.isSplit()) {
    require(op, 1, Sharding::split(kRhs), "contraction split like the other operand");
    result = Sharding::partial();
  } else if (!a.isSplit() && is(w, kRhs)) {
    require(op, 0, Sharding::split(kLhs), "contraction split like the other operand");
    result = Sharding::partial();
  } else if ((is(a, mDim) || (sharedRhs && a.isSplit() && a.dim < lr - 2)) && !w.isSplit()) {
    result = Sharding::split(is(a, mDim) ? outRank - 2 : a.dim);
  } else if (!sharedRhs && a.isSplit() && a == w && a.dim < lr - 2) {
    result = a; // same batch entries on each rank
  } else { // no single split fits: make the operands whole
    require(op, 0, rep, "matmul operands gathered: no split fits both");
    require(op, 1, rep, "matmul operands gathered: no split fits both");
  }
  set(op.getResult(), result);
  return success();
}

/// add / mul with a rhs broadcast over leading dimensions.
LogicalResult Sharder::shardBroadcastBinary(Operation *op, bool linear) {
  Sharding a = get(op->getOperand(0)), b = get(op->getOperand(1));
  int64_t offset = rankOf(op->getOperand(0)) - rankOf(op->getOperand(1));
  if (linear && a.isPartial() && b.isPartial() && offset == 0) {
    set(op->getResult(0), a); // a sum of partial sums is a partial sum
    return success();
  }
  if (seqSplittable(op->getOperand(0)) && offset == 0 && (a.isPartial() || b.isPartial())) {
    // Sequence parallelism: the row-parallel output is reduce-scattered into the residual stream.
    for (unsigned i = 0; i < 2; ++i)
      require(op, i, Sharding::split(kSeqDim),
              get(op->getOperand(i)).isPartial()
                  ? "sequence parallel: row-parallel output reduce-scattered along the sequence (Megatron's g)"
                  : "sequence parallel: residual stream split along the sequence");
    set(op->getResult(0), Sharding::split(kSeqDim));
    return success();
  }
  if (seqSplittable(op->getOperand(0)) && a.isPartial()) { // + a bias or positions
    bool rowParallel = isa_and_nonnull<tx::MatmulOp>(op->getOperand(0).getDefiningOp());
    require(op, 0, Sharding::split(kSeqDim),
            rowParallel ? "sequence parallel: row-parallel output reduce-scattered along the sequence (Megatron's g)"
                        : "sequence parallel: embedding reduce-scattered along the sequence");
    a = get(op->getOperand(0));
  }
  requireWhole(op, 0);
  requireWhole(op, 1);
  a = get(op->getOperand(0)), b = get(op->getOperand(1));
  Sharding result = a;
  if (a.isSplit()) {
    if (a.dim >= offset)
      require(op, 1, Sharding::split(a.dim - offset), "operands split alike");
    else
      require(op, 1, Sharding::replicated(), "broadcast operand whole");
  } else if (b.isSplit()) {
    result = Sharding::split(b.dim + offset);
    require(op, 0, result, "operands split alike");
  }
  set(op->getResult(0), result);
  return success();
}

/// Megatron's vocabulary-parallel cross-entropy: the softmax over split logits from three
/// all-reduced per-token statistics; the logits are never gathered.
LogicalResult Sharder::shardCrossEntropy(tx::CrossEntropyOp op) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  auto gridRef = FlatSymbolRefAttr::get(b.getContext(), names::kGrid);
  auto axes = b.getDenseI16ArrayAttr({static_cast<int16_t>(GridAxis::Tp)});
  auto reduce = [&](Value v, shard::ReductionKind kind, StringRef rule) -> Value {
    Value r = shard::AllReduceOp::create(b, loc, v.getType(), gridRef, axes, v,
                                         shard::ReductionKindAttr::get(b.getContext(), kind));
    r.getDefiningOp()->setAttr(names::kRuleAttr, b.getStringAttr(rule));
    set(r, Sharding::replicated());
    return r;
  };
  SmallVector<int64_t> tokenShape(shapeOf(op.getLogits()).drop_back());
  auto tokenType = RankedTensorType::get(tokenShape, op.getType().getElementType());
  IntegerAttr vocabSize = op.getVocabSizeAttr(); // padding columns stay out of the softmax
  Value localMax = tx::LogitsMaxOp::create(b, loc, tokenType, op.getLogits(), vocabSize);
  Value max = reduce(localMax, shard::ReductionKind::Max, "vocab-parallel cross-entropy: max over the vocabulary");
  Value localSum = tx::LogitsSumExpOp::create(b, loc, tokenType, op.getLogits(), max, vocabSize);
  Value sum = reduce(localSum, shard::ReductionKind::Sum, "vocab-parallel cross-entropy: sum of exponentials");
  Value localTarget = tx::TargetLogitOp::create(b, loc, tokenType, op.getLogits(), op.getLabels(), b.getUnitAttr());
  Value target = reduce(localTarget, shard::ReductionKind::Sum, "vocab-parallel cross-entropy: target logit");
  Value loss = tx::CrossEntropyFromStatsOp::create(b, loc, op.getType(), max, sum, target);
  for (Value v : {localMax, localSum, localTarget, loss})
    set(v, Sharding::replicated());
  softmaxStats[op.getLogits()] = {max, sum};
  op.getResult().replaceAllUsesWith(loss);
  op.erase();
  return success();
}

LogicalResult Sharder::shardCrossEntropyGrad(tx::CrossEntropyGradOp op) {
  auto stats = softmaxStats.find(op.getLogits());
  if (stats == softmaxStats.end())
    return op.emitOpError("has vocabulary-split logits but no forward cross-entropy to take statistics from");
  OpBuilder b(op);
  Value grad = tx::CrossEntropyGradFromStatsOp::create(b, op.getLoc(), op.getType(), op.getGrad(), op.getLogits(),
                                                       op.getLabels(), stats->second.first, stats->second.second,
                                                       b.getUnitAttr(), op.getVocabSizeAttr());
  set(grad, get(op.getLogits()));
  op.getResult().replaceAllUsesWith(grad);
  op.erase();
  return success();
}

LogicalResult Sharder::shardOp(Operation *op) {
  auto vocabSplit = [&](Value logits) {
    Sharding s = get(logits);
    return s.isSplit() && s.dim == rankOf(logits) - 1;
  };
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](tx::ParamOp p) {
        std::optional<int64_t> dim = megatronSplitDim(p.getName());
        set(p, dim ? Sharding::split(*dim) : Sharding::replicated());
        if (dim) {
          OpBuilder b(p);
          p.setTpSplitAttr(b.getI64IntegerAttr(*dim));
          if (!p.getOffsets()) { // the checkpoint tensor keeps the global shape
            ArrayRef<int64_t> shape = p.getType().getShape();
            p.setOffsetsAttr(b.getDenseI64ArrayAttr(SmallVector<int64_t>(shape.size(), 0)));
            p.setFullShapeAttr(b.getDenseI64ArrayAttr(shape));
          }
        }
        return success();
      })
      .Case([&](tx::ParamGradOp g) {
        require(g, 1, get(g.getParam()),
                get(g.getGrad()).isPartial() ? "sequence parallel: norm weight gradient summed over tp"
                                             : "gradient sharded like its parameter");
        return success();
      })
      .Case([&](tx::ZerosOp z) {
        set(z, Sharding::replicated());
        return success();
      })
      .Case([&](tx::MatmulOp m) { return shardMatmul(m); })
      .Case([&](tx::AddOp a) { return shardBroadcastBinary(a, /*linear=*/true); })
      .Case([&](tx::MulOp m) { return shardBroadcastBinary(m, /*linear=*/false); })
      .Case([&](tx::ReduceSumOp r) {
        Sharding s = get(r.getInput());
        int64_t dropped = rankOf(r.getInput()) - rankOf(r.getResult());
        if (s.isSplit())
          s = s.dim >= dropped ? Sharding::split(s.dim - dropped) : Sharding::partial();
        set(r, s);
        return success();
      })
      .Case([&](tx::ReshapeOp r) {
        Sharding s = get(r.getInput());
        if (s.isSplit()) {
          std::optional<int64_t> d = reshapeSplitDim(shapeOf(r.getInput()), shapeOf(r.getResult()), s.dim, tp);
          if (!d) {
            require(r, 0, Sharding::replicated(), "reshape cannot keep this split");
            s = Sharding::replicated();
          } else {
            s = Sharding::split(*d);
          }
        }
        set(r, s);
        return success();
      })
      .Case<tx::SliceOp, tx::PadOp>([&](auto s) {
        Sharding in = get(s.getInput());
        if (in.isSplit() && in.dim == static_cast<int64_t>(s.getDim())) {
          require(s, 0, Sharding::replicated(), "sliced dimension whole");
          in = Sharding::replicated();
        }
        set(s.getResult(), in);
        return success();
      })
      .Case<tx::LayerNormOp, tx::RmsNormOp>([&](Operation *n) {
        // Norms work on whole rows; with sequence parallelism, on the local sequence shard.
        Sharding x = get(n->getOperand(0));
        Sharding s = x.isSplit() && x.dim != rankOf(n->getOperand(0)) - 1 ? x : Sharding::replicated();
        require(n, 0, s, "norm input whole rows (reduces partial sums of a row-parallel layer)");
        for (unsigned i = 1; i < n->getNumOperands(); ++i)
          require(n, i, Sharding::replicated(), "norm weights whole");
        set(n->getResult(0), s);
        return success();
      })
      .Case<tx::LayerNormGradOp, tx::RmsNormGradOp>([&](Operation *n) {
        Sharding x = get(n->getOperand(1));
        bool seq = x.isSplit() && x.dim != rankOf(n->getOperand(1)) - 1;
        Sharding s = seq ? x : Sharding::replicated();
        require(n, 0, s,
                seq ? "sequence parallel: column-parallel input gradient reduce-scattered (Megatron's f, backward)"
                    : "column-parallel input gradient (Megatron's f, backward)");
        require(n, 1, s, "norm input as in the forward");
        require(n, 2, Sharding::replicated(), "norm weights whole");
        set(n->getResult(0), s);
        // Each rank saw its own tokens: the weight (and bias) gradients are partial sums.
        for (Value r : n->getResults().drop_front())
          set(r, seq ? Sharding::partial() : Sharding::replicated());
        return success();
      })
      .Case<tx::GeluOp, tx::GeluGradOp, tx::SwigluOp, tx::SwigluGradOp, tx::DropoutOp>(
          [&](Operation *e) { return shardElementwise(e); })
      .Case([&](tx::RopeOp r) {
        requireWhole(r, 0);
        Sharding s = get(r.getInput());
        if (s.isSplit() && s.dim != 2) {
          require(r, 0, Sharding::replicated(), "rope needs whole sequences");
          s = Sharding::replicated();
        }
        set(r, s);
        return success();
      })
      .Case<tx::AttentionOp, tx::AttentionGradOp>([&](Operation *a) {
        unsigned queryIndex = isa<tx::AttentionGradOp>(a) ? 1 : 0;
        for (unsigned i = 0; i < a->getNumOperands(); ++i)
          requireWhole(a, i);
        Sharding q = get(a->getOperand(queryIndex));
        Sharding s = q.isSplit() && q.dim == 2 ? q : Sharding::replicated();
        for (unsigned i = 0; i < a->getNumOperands(); ++i)
          require(a, i, s, "attention heads split alike");
        for (Value r : a->getResults())
          set(r, s);
        return success();
      })
      .Case([&](tx::EmbeddingOp e) {
        Sharding t = get(e.getTable());
        bool vocab = t.isSplit() && t.dim == 0;
        if (t.isSplit() && !vocab)
          require(e, 0, Sharding::replicated(), "embedding table whole");
        if (vocab) {
          e.setVocabParallel(true);
          vocabParallelIds.insert(e.getIds());
        }
        set(e, vocab ? Sharding::partial() : Sharding::replicated());
        return success();
      })
      .Case([&](tx::EmbeddingGradOp e) {
        requireWhole(e, 0);
        require(e, 0, Sharding::replicated(), "embedding gradient from whole rows");
        bool vocab = vocabParallelIds.contains(e.getIds());
        e.setVocabParallel(vocab);
        set(e, vocab ? Sharding::split(0) : Sharding::replicated());
        return success();
      })
      .Case([&](tx::CrossEntropyOp c) {
        if (vocabSplit(c.getLogits()))
          return shardCrossEntropy(c);
        require(c, 0, Sharding::replicated(), "cross-entropy over whole logits");
        set(c, Sharding::replicated());
        return success();
      })
      .Case([&](tx::CrossEntropyGradOp c) {
        if (vocabSplit(c.getLogits()))
          return shardCrossEntropyGrad(c);
        require(c, 1, Sharding::replicated(), "cross-entropy over whole logits");
        set(c, Sharding::replicated());
        return success();
      })
      .Case([&](func::CallOp c) { return shardCall(c); })
      .Case([&](func::ReturnOp r) {
        if (r->getParentOfType<func::FuncOp>().getSymName() == names::kTrainStep)
          require(r, 0, Sharding::replicated(), "the loss is whole on every rank");
        return success();
      })
      .Default([&](Operation *other) {
        return other->emitOpError("has no tensor-parallel sharding rule in megac-tensor-parallel");
      });
}

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
    if (type.getShape()[s.dim] == shape[s.dim]) { // not localized yet (values can repeat)
      shape[s.dim] /= tp;
      v.setType(RankedTensorType::get(shape, type.getElementType()));
    }
  }
  for (auto fn : module.getOps<func::FuncOp>()) {
    Block &body = fn.getBody().front();
    fn.setFunctionType(FunctionType::get(fn.getContext(), body.getArgumentTypes(),
                                         body.getTerminator()->getOperandTypes()));
  }
  return success();
}

struct TensorParallelPass : public megac::impl::TensorParallelBase<TensorParallelPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<ParallelPlan> plan = readPlan(module, getArgument());
    if (failed(plan))
      return signalPassFailure();
    if (plan->tp == 1)
      return; // nothing to split
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
