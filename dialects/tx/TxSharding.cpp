// Megatron's tensor parallelism as one sharding rule per `tx` op (ShardingRuleOpInterface).
// megac-tensor-parallel runs the rules over the joint forward + backward: forward and backward
// ops alike, so the backward's collectives come from the same rules as the forward's. Every
// collective a rule asks for carries the name of the Megatron rule that needs it.
//
// Megatron's names: a ColumnParallelLinear splits its weight on the output features (its input
// is whole, its output split: no communication forward; backward sums the input gradient over
// tp, Megatron's "f"); a RowParallelLinear splits its weight on the input features (its input
// is split, its output a partial sum reduced over tp, Megatron's "g"). With sequence
// parallelism "g" becomes a reduce-scatter along the sequence and "f" an all-gather.
#include "tx/TxLocations.h"
#include "tx/TxNames.h"
#include "tx/TxOps.h"

#include "mlir/Interfaces/FunctionInterfaces.h"

using namespace mlir;
using namespace megac::tx;

namespace {

ArrayRef<int64_t> shapeOf(Value v) { return cast<RankedTensorType>(v.getType()).getShape(); }
int64_t rankOf(Value v) { return cast<RankedTensorType>(v.getType()).getRank(); }
int64_t product(ArrayRef<int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return n;
}

constexpr Sharding kWhole = Sharding::replicated();

/// The dimension of a reshape's result that carries a split of the input's dimension `d`: the
/// one starting at the same row-major position, with a size the ranks divide.
std::optional<int64_t> reshapeSplitDim(ArrayRef<int64_t> in, ArrayRef<int64_t> out, int64_t d, int64_t tp) {
  int64_t before = product(in.take_front(d));
  for (int64_t o = 0; o < static_cast<int64_t>(out.size()); ++o)
    if (product(out.take_front(o)) == before && out[o] % tp == 0 && out[o] > 1 &&
        (out[o] % in[d] == 0 || in[d] % out[o] == 0) && product(out.drop_front(o)) == product(in.drop_front(d)))
      return o;
  return std::nullopt;
}

/// A mixture of experts' routing is computed whole on every tensor-parallel rank (each rank routes
/// every token of its tp group the same way): every operand whole, every result whole. With expert
/// tensor parallelism 1 the experts too (each rank computes the whole mixture).
LogicalResult shardWhole(Operation *op, ShardingRewriter &r) {
  for (unsigned i = 0; i < op->getNumOperands(); ++i) {
    r.requireWhole(op, i);
    if (r.get(op->getOperand(i)).isSplit())
      r.require(op, i, kWhole, "mixture of experts: whole on every tensor-parallel rank");
  }
  for (Value v : op->getResults())
    r.set(v, kWhole);
  return success();
}

/// Elementwise ops: every operand takes the first one's sharding, whole (not partial).
LogicalResult shardElementwise(Operation *op, ShardingRewriter &r) {
  for (unsigned i = 0; i < op->getNumOperands(); ++i)
    r.requireWhole(op, i);
  Sharding s = r.get(op->getOperand(0));
  for (unsigned i = 1; i < op->getNumOperands(); ++i)
    r.require(op, i, s, "elementwise operands sharded alike");
  for (Value result : op->getResults())
    r.set(result, s);
  return success();
}

/// add / mul with a rhs broadcast over leading dimensions.
LogicalResult shardBroadcastBinary(Operation *op, ShardingRewriter &r, bool linear) {
  Value lhs = op->getOperand(0), rhs = op->getOperand(1);
  Sharding a = r.get(lhs), b = r.get(rhs);
  int64_t offset = rankOf(lhs) - rankOf(rhs);
  if (linear && a.isPartial() && b.isPartial() && offset == 0) {
    r.set(op->getResult(0), a); // a sum of partial sums is a partial sum
    return success();
  }
  if (r.seqSplittable(lhs) && offset == 0 && (a.isPartial() || b.isPartial())) {
    // Sequence parallelism: the row-parallel output is reduce-scattered into the residual stream.
    for (unsigned i = 0; i < 2; ++i) {
      Value operand = op->getOperand(i);
      r.require(op, i, Sharding::split(kSequenceDim),
                r.get(operand).isPartial() ? r.reduceRule(operand, /*scatter=*/true, op->getName().getStringRef())
                                           : "sequence parallel: residual stream split along the sequence");
    }
    r.set(op->getResult(0), Sharding::split(kSequenceDim));
    return success();
  }
  if (r.seqSplittable(lhs) && a.isPartial()) // + a bias or positions
    r.require(op, 0, Sharding::split(kSequenceDim), r.reduceRule(lhs, /*scatter=*/true, op->getName().getStringRef()));
  r.requireWhole(op, 0);
  r.requireWhole(op, 1);
  a = r.get(op->getOperand(0)), b = r.get(op->getOperand(1));
  Sharding result = a;
  if (a.isSplit()) {
    if (a.dim >= offset)
      r.require(op, 1, Sharding::split(a.dim - offset), "operands split alike");
    else
      r.require(op, 1, kWhole, "broadcast operand whole");
  } else if (b.isSplit()) {
    result = Sharding::split(b.dim + offset);
    r.require(op, 0, result, "operands split alike");
  }
  r.set(op->getResult(0), result);
  return success();
}

/// Slice and pad keep the sharding of the dimensions they do not cut.
template <typename Op> LogicalResult shardSliceOrPad(Op op, ShardingRewriter &r) {
  Sharding in = r.get(op.getInput());
  if (in.isSplitAlong(static_cast<int64_t>(op.getDim()))) {
    r.require(op, 0, kWhole, "sliced dimension whole");
    in = kWhole;
  }
  r.set(op.getResult(), in);
  return success();
}

/// Norms work on whole rows; with sequence parallelism, on the local sequence shard.
LogicalResult shardNorm(Operation *norm, ShardingRewriter &r) {
  Value x = norm->getOperand(0);
  Sharding in = r.get(x);
  Sharding s = in.isSplit() && in.dim != rankOf(x) - 1 ? in : kWhole;
  r.require(norm, 0, s, "norm input whole rows (reduces partial sums of a row-parallel layer)");
  for (unsigned i = 1; i < norm->getNumOperands(); ++i)
    r.require(norm, i, kWhole, "norm weights whole");
  r.set(norm->getResult(0), s);
  return success();
}

/// The norm's backward is where a ColumnParallelLinear's input gradient (partial over tp) meets
/// whole rows again: Megatron's "f" backward, an all-reduce (a reduce-scatter along the sequence
/// with sequence parallelism). Each rank then sees only its tokens, so the weight and bias
/// gradients are partial sums there.
LogicalResult shardNormGrad(Operation *grad, ShardingRewriter &r) {
  Value input = grad->getOperand(1);
  Sharding x = r.get(input);
  bool seq = x.isSplit() && x.dim != rankOf(input) - 1;
  Sharding s = seq ? x : kWhole;
  r.require(grad, 0, s,
            seq ? "sequence parallel: column-parallel input gradient reduce-scattered (Megatron's f, backward)"
                : "column-parallel input gradient (Megatron's f, backward)");
  r.require(grad, 1, s, "norm input as in the forward");
  r.require(grad, 2, kWhole, "norm weights whole");
  r.set(grad->getResult(0), s);
  for (Value weightGrad : grad->getResults().drop_front())
    r.set(weightGrad, seq ? Sharding::partial() : kWhole);
  return success();
}

/// Attention: heads split alike (each rank runs its heads and their key / value groups).
LogicalResult shardAttention(Operation *attention, unsigned queryIndex, ShardingRewriter &r) {
  for (unsigned i = 0; i < attention->getNumOperands(); ++i)
    r.requireWhole(attention, i);
  Sharding q = r.get(attention->getOperand(queryIndex));
  Sharding s = q.isSplitAlong(2) ? q : kWhole;
  for (unsigned i = 0; i < attention->getNumOperands(); ++i)
    r.require(attention, i, s, "attention heads split alike");
  for (Value result : attention->getResults())
    r.set(result, s);
  return success();
}

bool vocabSplit(ShardingRewriter &r, Value logits) { return r.get(logits).isSplitAlong(rankOf(logits) - 1); }

} // namespace

// ---- rewriter helpers ---------------------------------------------------------------------------

ShardingRewriter::~ShardingRewriter() = default;

std::string ShardingRewriter::reduceRule(Value v, bool scatter, StringRef before) const {
  Operation *made = v.getDefiningOp();
  if (scatter) {
    if (isa_and_nonnull<MatmulOp>(made))
      return "sequence parallel: row-parallel output reduce-scattered along the sequence (Megatron's g)";
    if (isa_and_nonnull<EmbeddingOp>(made))
      return "sequence parallel: embedding reduce-scattered along the sequence";
    return "sequence parallel: partial sums reduce-scattered along the sequence";
  }
  std::string rule = "partial sums over tp reduced before " + before.str();
  if (isa_and_nonnull<MatmulOp>(made))
    return "row-parallel output (Megatron's g): " + rule;
  if (isa_and_nonnull<EmbeddingOp>(made))
    return "vocab-parallel embedding: " + rule;
  return rule;
}

void ShardingRewriter::requireWhole(Operation *op, unsigned i) {
  Value v = op->getOperand(i);
  if (get(v).isPartial())
    require(op, i, kWhole, reduceRule(v, /*scatter=*/false, op->getName().getStringRef()));
}

bool ShardingRewriter::seqSplittable(Value v) const {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return sequenceParallel() && t && t.getRank() == 3 && t.getShape()[kSequenceDim] % tensorParallelSize() == 0;
}

ShardingAttr Sharding::toAttr(MLIRContext *context, int64_t rank) const {
  Builder b(context);
  ArrayAttr none = b.getArrayAttr({}), tp = b.getArrayAttr({b.getStringAttr(megac::names::kTensorAxis)});
  SmallVector<Attribute> dims(rank, none);
  if (isSplit() && dim < rank)
    dims[dim] = tp;
  return ShardingAttr::get(context, b.getArrayAttr(dims), isPartial() ? tp : none);
}

ShardingAttr megac::tx::recordedSharding(Value v) {
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    auto fn = dyn_cast<FunctionOpInterface>(arg.getOwner()->getParentOp());
    return fn ? fn.getArgAttrOfType<ShardingAttr>(arg.getArgNumber(), megac::names::kShardingAttr) : ShardingAttr();
  }
  Attribute recorded = v.getDefiningOp()->getAttr(megac::names::kShardingAttr);
  if (auto perResult = dyn_cast_or_null<ArrayAttr>(recorded))
    return dyn_cast<ShardingAttr>(perResult[cast<OpResult>(v).getResultNumber()]);
  return dyn_cast_or_null<ShardingAttr>(recorded);
}

// ---- parameters ---------------------------------------------------------------------------------

/// Megatron's placement: the parameter's role says whether tensor parallelism splits it
/// (VocabParallelEmbedding; ColumnParallelLinear's weight and bias; RowParallelLinear's weight)
/// and `parallel_dim` along which dimension. Everything else is whole on every rank.
LogicalResult ParamOp::shard(ShardingRewriter &r) {
  std::optional<uint64_t> dim = getParallelDim();
  r.set(getResult(), dim ? Sharding::split(static_cast<int64_t>(*dim)) : kWhole);
  if (!dim)
    return success();
  Builder b(getContext());
  if (!getOffsets()) { // the checkpoint tensor keeps the global shape
    ArrayRef<int64_t> shape = getType().getShape();
    setOffsetsAttr(b.getDenseI64ArrayAttr(SmallVector<int64_t>(shape.size(), 0)));
    setFullShapeAttr(b.getDenseI64ArrayAttr(shape));
  }
  return success();
}

/// A gradient is sharded like its parameter. With sequence parallelism a whole parameter used on
/// each rank's sequence shard gets a partial gradient there, which Megatron all-reduces over tp:
/// the norms' weights and biases, and a RowParallelLinear's bias (added after the
/// reduce-scatter).
LogicalResult ParamGradOp::shard(ShardingRewriter &r) {
  if (!r.get(getGrad()).isPartial()) {
    r.require(*this, 1, r.get(getParam()), "gradient sharded like its parameter");
    return success();
  }
  auto param = getParam().getDefiningOp<ParamOp>();
  std::optional<ParamRole> role = param ? param.getRole() : std::nullopt;
  StringRef rule = "partial gradient summed over tp";
  if (role == ParamRole::Norm)
    rule = "sequence parallel: norm weight gradient summed over tp";
  else if (role == ParamRole::RowParallelBias)
    rule = "sequence parallel: row-parallel bias gradient summed over tp";
  r.require(*this, 1, r.get(getParam()), rule);
  // The sum is the parameter's gradient: named after the parameter.
  if (StringRef name = valueName(getParam()); !name.empty())
    getGrad().getDefiningOp()->setLoc(derivedLoc(getGrad(), "d_" + name, "megac-tensor-parallel"));
  return success();
}

LogicalResult ZerosOp::shard(ShardingRewriter &r) {
  r.set(getResult(), kWhole);
  return success();
}

// ---- linear algebra -----------------------------------------------------------------------------

/// ColumnParallelLinear: whole input x column-split weight -> output split on its last dimension.
/// RowParallelLinear: input and weight split on the contraction -> partial sums. Sequence
/// parallelism all-gathers a sequence-split input before a column-parallel layer. Batched
/// products (attention-shaped, weight gradients) keep a split of a batch or row dimension.
LogicalResult MatmulOp::shard(ShardingRewriter &r) {
  r.requireWhole(*this, 0);
  r.requireWhole(*this, 1);
  int64_t lr = rankOf(getLhs()), outRank = rankOf(getResult());
  bool ta = getTransposeLhs();
  const GemmShape g = getGemmShape();
  int64_t mDim = g.lhsRowDim, kLhs = g.lhsContractDim, kRhs = g.rhsContractDim, nDim = g.rhsColDim;
  Sharding a = r.get(getLhs()), w = r.get(getRhs());
  bool sharedRhs = g.sharedRhs; // rows of every batch entry are independent
  Sharding result = kWhole;
  if (!a.isSplit() && !w.isSplit()) {
    result = kWhole;
  } else if (!a.isSplit() && w.isSplitAlong(nDim)) {
    result = Sharding::split(outRank - 1); // column-parallel
  } else if (a.isSplit() && w.isSplitAlong(nDim)) {
    // Sequence parallelism: the sequence-split activation made whole for a column-parallel
    // layer, in forward, and again in backward for its weight gradient (which contracts over
    // the tokens), as Megatron re-gathers it rather than keep the whole sequence.
    r.require(*this, 0, kWhole,
              ta ? "sequence parallel: all-gather along the sequence again in backward for a column-parallel weight "
                   "gradient"
                 : "sequence parallel: all-gather along the sequence before a column-parallel layer");
    result = Sharding::split(outRank - 1);
  } else if (a.isSplitAlong(kLhs) && w.isSplitAlong(kRhs)) {
    result = Sharding::partial(); // row-parallel: each rank sums its share of k
  } else if (a.isSplitAlong(kLhs) && !w.isSplit()) {
    r.require(*this, 1, Sharding::split(kRhs), "contraction split like the other operand");
    result = Sharding::partial();
  } else if (!a.isSplit() && w.isSplitAlong(kRhs)) {
    r.require(*this, 0, Sharding::split(kLhs), "contraction split like the other operand");
    result = Sharding::partial();
  } else if ((a.isSplitAlong(mDim) || (sharedRhs && a.isSplit() && a.dim < lr - 2)) && !w.isSplit()) {
    result = Sharding::split(a.isSplitAlong(mDim) ? outRank - 2 : a.dim);
  } else if (!sharedRhs && a.isSplit() && a == w && a.dim < lr - 2) {
    result = a; // same batch entries on each rank
  } else if (a.isSplitAlong(mDim) && w.isSplitAlong(kRhs)) {
    // Sequence parallelism at one sample a microbatch: a weight gradient whose rows are split
    // (GPT-2's row-parallel [in, out] weights, Llama's column-parallel [out, in] ones, the
    // vocabulary-parallel output layer) while its other operand is split on the tokens (the
    // contraction, which a flattened batch of one keeps split): that operand gathered, as Megatron
    // does, and each rank computes its own rows.
    r.require(*this, 1, kWhole,
              "sequence parallel: all-gather along the sequence again in backward for a weight gradient split on its "
              "rows");
    result = Sharding::split(outRank - 2);
  } else { // no single split fits: make the operands whole
    r.require(*this, 0, kWhole, "matmul operands gathered: no split fits both");
    r.require(*this, 1, kWhole, "matmul operands gathered: no split fits both");
  }
  r.set(getResult(), result);
  return success();
}

LogicalResult AddOp::shard(ShardingRewriter &r) { return shardBroadcastBinary(*this, r, /*linear=*/true); }
LogicalResult MulOp::shard(ShardingRewriter &r) { return shardBroadcastBinary(*this, r, /*linear=*/false); }

/// Summing over a split leading dimension leaves partial sums; over others the split remains.
LogicalResult ReduceSumOp::shard(ShardingRewriter &r) {
  Sharding s = r.get(getInput());
  int64_t dropped = rankOf(getInput()) - rankOf(getResult());
  if (s.isSplit())
    s = s.dim >= dropped ? Sharding::split(s.dim - dropped) : Sharding::partial();
  r.set(getResult(), s);
  return success();
}

/// A split survives a reshape that keeps the split dimension's elements together.
LogicalResult ReshapeOp::shard(ShardingRewriter &r) {
  Sharding s = r.get(getInput());
  if (s.isSplit()) {
    std::optional<int64_t> d =
        reshapeSplitDim(shapeOf(getInput()), shapeOf(getResult()), s.dim, r.tensorParallelSize());
    if (!d) {
      // Under sequence parallelism: a sequence-split activation flattened over batch x sequence
      // (a weight gradient's input in backward), gathered again as Megatron does.
      r.require(*this, 0, kWhole,
                r.sequenceParallel() && s.dim == kSequenceDim
                    ? "sequence parallel: all-gather along the sequence again in backward (a flattened view of a "
                      "sequence-split activation)"
                    : "reshape cannot keep this split");
      s = kWhole;
    } else {
      s = Sharding::split(*d);
    }
  }
  r.set(getResult(), s);
  return success();
}

LogicalResult SliceOp::shard(ShardingRewriter &r) { return shardSliceOrPad(*this, r); }
LogicalResult PadOp::shard(ShardingRewriter &r) { return shardSliceOrPad(*this, r); }

// ---- norms and activations ----------------------------------------------------------------------

LogicalResult LayerNormOp::shard(ShardingRewriter &r) { return shardNorm(*this, r); }
LogicalResult RmsNormOp::shard(ShardingRewriter &r) { return shardNorm(*this, r); }
LogicalResult LayerNormGradOp::shard(ShardingRewriter &r) { return shardNormGrad(*this, r); }
LogicalResult RmsNormGradOp::shard(ShardingRewriter &r) { return shardNormGrad(*this, r); }

/// A dequantized weight is split as the weight is (each rank holds its block, quantized alone).
LogicalResult Nf4DequantizeOp::shard(ShardingRewriter &r) { return shardElementwise(*this, r); }
LogicalResult GeluOp::shard(ShardingRewriter &r) { return shardElementwise(*this, r); }
LogicalResult GeluGradOp::shard(ShardingRewriter &r) { return shardElementwise(*this, r); }
LogicalResult SwigluOp::shard(ShardingRewriter &r) { return shardElementwise(*this, r); }
LogicalResult SwigluGradOp::shard(ShardingRewriter &r) { return shardElementwise(*this, r); }
/// Masks are drawn on global coordinates (megart/dropout.h), so any split draws the single rank's
/// mask. Partial sums become whole first: with sequence parallelism reduce-scattered along the
/// sequence, as Megatron's bias-dropout-add after a row-parallel layer.
LogicalResult DropoutOp::shard(ShardingRewriter &r) {
  Value input = getInput();
  if (r.get(input).isPartial() && r.seqSplittable(input))
    r.require(*this, 0, Sharding::split(kSequenceDim), r.reduceRule(input, /*scatter=*/true, getOperationName()));
  return shardElementwise(*this, r);
}

/// Partial sums are made whole first (the single rank scales the sum, not its parts): with
/// sequence parallelism reduce-scattered along the sequence, as before dropout.
LogicalResult ScaleOp::shard(ShardingRewriter &r) {
  Value input = getInput();
  if (r.get(input).isPartial() && r.seqSplittable(input))
    r.require(*this, 0, Sharding::split(kSequenceDim), r.reduceRule(input, /*scatter=*/true, getOperationName()));
  return shardElementwise(*this, r);
}

// ---- attention ----------------------------------------------------------------------------------

/// Rotary embeddings rotate each head by its position: heads may be split, sequences not.
LogicalResult RopeOp::shard(ShardingRewriter &r) {
  r.requireWhole(*this, 0);
  Sharding s = r.get(getInput());
  if (s.isSplit() && s.dim != 2) {
    r.require(*this, 0, kWhole, "rope needs whole sequences");
    s = kWhole;
  }
  r.set(getResult(), s);
  return success();
}

LogicalResult AttentionOp::shard(ShardingRewriter &r) { return shardAttention(*this, /*queryIndex=*/0, r); }
LogicalResult AttentionGradOp::shard(ShardingRewriter &r) { return shardAttention(*this, /*queryIndex=*/1, r); }

// ---- embedding and loss -------------------------------------------------------------------------

/// VocabParallelEmbedding: each rank looks up the ids in its share of the vocabulary (zero rows
/// for the others), so the result is a partial sum.
LogicalResult EmbeddingOp::shard(ShardingRewriter &r) {
  Sharding table = r.get(getTable());
  bool vocab = table.isSplitAlong(0);
  if (table.isSplit() && !vocab)
    r.require(*this, 0, kWhole, "embedding table whole");
  if (vocab)
    setVocabParallel(true);
  r.set(getResult(), vocab ? Sharding::partial() : kWhole);
  return success();
}

/// The gradient of a VocabParallelEmbedding's table: each rank scatters the rows of its share.
LogicalResult EmbeddingGradOp::shard(ShardingRewriter &r) {
  r.requireWhole(*this, 0);
  r.require(*this, 0, kWhole, "embedding gradient from whole rows");
  bool vocab = llvm::any_of(getIds().getUsers(), [](Operation *user) {
    auto forward = dyn_cast<EmbeddingOp>(user);
    return forward && forward.getVocabParallel();
  });
  setVocabParallel(vocab);
  r.set(getResult(), vocab ? Sharding::split(0) : kWhole);
  return success();
}

/// Megatron's vocabulary-parallel cross-entropy: the softmax over vocabulary-split logits from
/// three all-reduced per-token statistics; the logits are never gathered.
LogicalResult CrossEntropyOp::shard(ShardingRewriter &r) {
  if (!vocabSplit(r, getLogits())) {
    r.require(*this, 0, kWhole, "cross-entropy over whole logits");
    r.set(getResult(), kWhole);
    return success();
  }
  OpBuilder b(*this);
  auto at = [&](StringRef name) { return derivedLoc(getResult(), name, "megac-tensor-parallel"); };
  SmallVector<int64_t> tokenShape(shapeOf(getLogits()).drop_back());
  auto tokenType = RankedTensorType::get(tokenShape, getType().getElementType());
  IntegerAttr vocabSize = getVocabSizeAttr(); // padding columns stay out of the softmax
  Value localMax = LogitsMaxOp::create(b, at("logits_max"), tokenType, getLogits(), vocabSize);
  Value max =
      r.allReduce(b, localMax, shard::ReductionKind::Max, "vocab-parallel cross-entropy: max over the vocabulary");
  Value localSum = LogitsSumExpOp::create(b, at("logits_sum_exp"), tokenType, getLogits(), max, vocabSize);
  Value sum = r.allReduce(b, localSum, shard::ReductionKind::Sum, "vocab-parallel cross-entropy: sum of exponentials");
  Value localTarget =
      TargetLogitOp::create(b, at("target_logit"), tokenType, getLogits(), getLabels(), b.getUnitAttr());
  Value target = r.allReduce(b, localTarget, shard::ReductionKind::Sum, "vocab-parallel cross-entropy: target logit");
  Value loss = CrossEntropyFromStatsOp::create(b, getLoc(), getType(), max, sum, target,
                                               getIgnoreIndexAttr() ? getLabels() : Value(), getIgnoreIndexAttr());
  for (Value v : {localMax, localSum, localTarget, loss})
    r.set(v, kWhole);
  r.recordSoftmaxStats(getLogits(), max, sum);
  getResult().replaceAllUsesWith(loss);
  erase();
  return success();
}

/// Its backward: softmax minus one-hot on each rank's vocabulary share, from the forward's
/// all-reduced statistics; the gradient of the logits stays split like the logits.
LogicalResult CrossEntropyGradOp::shard(ShardingRewriter &r) {
  if (!vocabSplit(r, getLogits())) {
    r.require(*this, 1, kWhole, "cross-entropy over whole logits");
    r.set(getResult(), kWhole);
    return success();
  }
  std::optional<std::pair<Value, Value>> stats = r.softmaxStats(getLogits());
  if (!stats)
    return emitOpError("has vocabulary-split logits but no forward cross-entropy to take statistics from");
  OpBuilder b(*this);
  Value grad = CrossEntropyGradFromStatsOp::create(b, getLoc(), getType(), getGrad(), getLogits(), getLabels(),
                                                   stats->first, stats->second, b.getUnitAttr(), getVocabSizeAttr(),
                                                   getIgnoreIndexAttr());
  r.set(grad, r.get(getLogits()));
  getResult().replaceAllUsesWith(grad);
  erase();
  return success();
}

// ---- mixture of experts ---------------------------------------------------------------------------

LogicalResult MoeRouteOp::shard(ShardingRewriter &r) { return shardWhole(*this, r); }
LogicalResult MoeAssignOp::shard(ShardingRewriter &r) { return shardWhole(*this, r); }
LogicalResult MoeDropOp::shard(ShardingRewriter &r) { return shardWhole(*this, r); }
LogicalResult MoeScatterOp::shard(ShardingRewriter &r) { return shardWhole(*this, r); }
LogicalResult MoeExchangeCountsOp::shard(ShardingRewriter &r) { return shardWhole(*this, r); }
LogicalResult MoeDispatchOp::shard(ShardingRewriter &r) { return shardWhole(*this, r); }
LogicalResult MoeRouteGradOp::shard(ShardingRewriter &r) { return shardWhole(*this, r); }

// ---- expert tensor parallelism --------------------------------------------------------------
// Megatron's default (--expert-tensor-parallel-size = tp): each expert's weights split as a dense
// SwiGLU MLP's (gate and up on the ffn features, column-parallel; down on its input features,
// row-parallel), so the rows in expert order, whole on every tp rank, leave the down projection
// as partial sums. Moving rows (the exchanges, the sum back into tokens, a choice's dot product)
// is linear: the partial sums go on through them and are reduced once, on the tokens (Megatron's
// g), where the layer adds them to the residual stream.

/// An op linear in operand `linear`: partial sums there give partial sums (the other operands
/// whole); otherwise the op computes whole.
LogicalResult shardLinearInRows(Operation *op, unsigned linear, ShardingRewriter &r) {
  if (!r.get(op->getOperand(linear)).isPartial())
    return shardWhole(op, r);
  for (unsigned i = 0; i < op->getNumOperands(); ++i)
    if (i != linear) {
      r.requireWhole(op, i);
      if (r.get(op->getOperand(i)).isSplit())
        r.require(op, i, kWhole, "expert tensor parallel: whole beside the partial sums of the experts' rows");
    }
  for (Value v : op->getResults())
    r.set(v, Sharding::partial());
  return success();
}

LogicalResult MoeGatherOp::shard(ShardingRewriter &r) { return shardLinearInRows(*this, 0, r); }
LogicalResult MoeCombineOp::shard(ShardingRewriter &r) { return shardLinearInRows(*this, 0, r); }
LogicalResult MoeRowDotOp::shard(ShardingRewriter &r) { return shardLinearInRows(*this, 1, r); }

/// Whole rows through an expert weight split on N: rows split on N (column-parallel); rows split
/// on K through a weight split on K: partial sums (row-parallel). A whole weight: whole.
LogicalResult GroupedMatmulOp::shard(ShardingRewriter &r) {
  const int64_t nDim = getTransposeRhs() ? 1 : 2, kDim = getTransposeRhs() ? 2 : 1;
  const Sharding w = r.get(getRhs());
  if (!w.isSplitAlong(nDim) && !w.isSplitAlong(kDim))
    return shardWhole(*this, r);
  r.requireWhole(*this, 0);
  for (unsigned i = 1; i < 3; ++i)
    r.requireWhole(*this, i);
  if (r.get(getCounts()).isSplit())
    r.require(*this, 2, kWhole, "expert tensor parallel: the counts whole");
  if (w.isSplitAlong(nDim)) {
    if (r.get(getLhs()).isSplit())
      r.require(*this, 0, kWhole, "expert tensor parallel: rows whole before a column-parallel expert projection");
    r.set(getResult(), Sharding::split(1));
    return success();
  }
  if (!r.get(getLhs()).isSplitAlong(1))
    r.require(*this, 0, Sharding::split(1), "contraction split like the other operand");
  r.set(getResult(), Sharding::partial());
  return success();
}

/// An expert weight's gradient from its rows and theirs: split as the weight is, on N (the rows'
/// gradient split) or on K (the input rows split).
LogicalResult GroupedMatmulWeightGradOp::shard(ShardingRewriter &r) {
  for (unsigned i = 0; i < 3; ++i)
    r.requireWhole(*this, i);
  const Sharding lhs = r.get(getLhs()), grad = r.get(getGrad());
  const int64_t nDim = getTranspose() ? 1 : 2, kDim = getTranspose() ? 2 : 1;
  if (!lhs.isSplit() && grad.isSplitAlong(1))
    r.set(getResult(), Sharding::split(nDim));
  else if (lhs.isSplitAlong(1) && !grad.isSplit())
    r.set(getResult(), Sharding::split(kDim));
  else
    return shardWhole(*this, r);
  if (r.get(getCounts()).isSplit())
    r.require(*this, 2, kWhole, "expert tensor parallel: the counts whole");
  return success();
}
LogicalResult RouterLoadOp::shard(ShardingRewriter &r) { return shardWhole(*this, r); }
LogicalResult RouterLoadGradOp::shard(ShardingRewriter &r) { return shardWhole(*this, r); }
LogicalResult LoadBalancingLossOp::shard(ShardingRewriter &r) { return shardWhole(*this, r); }
LogicalResult LoadBalancingLossGradOp::shard(ShardingRewriter &r) { return shardWhole(*this, r); }
LogicalResult MetricOp::shard(ShardingRewriter &r) { return shardWhole(*this, r); }
LogicalResult RecordExpertLoadOp::shard(ShardingRewriter &r) { return shardWhole(*this, r); }
LogicalResult GateRowsOp::shard(ShardingRewriter &r) { return shardWhole(*this, r); }
LogicalResult GateRowsGradOp::shard(ShardingRewriter &r) { return shardWhole(*this, r); }
LogicalResult RouterZLossOp::shard(ShardingRewriter &r) { return shardWhole(*this, r); }
LogicalResult RouterZLossGradOp::shard(ShardingRewriter &r) { return shardWhole(*this, r); }
