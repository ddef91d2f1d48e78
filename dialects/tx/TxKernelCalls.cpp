// Each tx op's lowering to a runtime kernel (KernelCallOpInterface): which kernel of
// RuntimeKernels.def and its arguments, the shape arithmetic done here (rows, m/n/k, strides),
// in the op order of TxVjp.cpp and TxFactorRules.cpp. The emitters print these calls and nothing
// else about the ops; megac-test-kernel-calls prints them (test/Transforms/kernel-calls.mlir).
#include "tx/TxKernelCall.h"
#include "megac/Analysis/TensorBytes.h"
#include "tx/TxNames.h"
#include "tx/TxOps.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace megac;
using namespace megac::tx;

// ---- shared arithmetic ------------------------------------------------------------------------

namespace {

ArrayRef<int64_t> shapeOf(Value v) { return cast<RankedTensorType>(v.getType()).getShape(); }
int64_t numel(Value v) { return cast<RankedTensorType>(v.getType()).getNumElements(); }
/// The elements of a shape (or of a slice of one).
int64_t product(ArrayRef<int64_t> dims) { return ShapedType::getNumElements(dims); }
KernelArg integer(StringRef label, KernelInt n) { return KernelArg::integer(label, n); }
KernelArg boolean(StringRef label, bool b) { return KernelArg::boolean(label, b); }
KernelArg floating(StringRef label, APFloat f) { return KernelArg::floating(label, f.convertToDouble()); }

FailureOr<KernelCall> refuse(Operation *op, const Twine &why) {
  return op->emitOpError() << "cannot be emitted as C++: " << why;
}

/// Where this rank's share of a vocabulary of `local` rows starts (unlabelled, as the kernels
/// take it), or a labelled 0 when the vocabulary is not split.
KernelArg vocabStart(bool vocabParallel, int64_t local) {
  return vocabParallel ? integer("", KernelInt::tpRankTimes(local)) : integer("vocab_start", 0);
}

/// The real (not padding) columns of this rank's `local` vocabulary columns.
KernelArg validColumns(std::optional<uint64_t> vocabSize, int64_t local) {
  if (!vocabSize)
    return integer("", local);
  return KernelArg::nested({Kernel::valid_columns, {integer("vocab_size", int64_t(*vocabSize)),
                                                    integer("", KernelInt::tpRankTimes(local)),
                                                    integer("vocab_local", local)}});
}

/// A copy of `input` into `result`'s buffer.
KernelCall copyCall(Value result, Value input) {
  return {Kernel::copy_buffer, {result, input, integer("bytes", int64_t(tensorBytes(result.getType())))}};
}

/// `megart::attention_dropout(ctx, ...)` for an attention (or its gradient) on `query` whose
/// probabilities are dropped at `rate`: the heads of this rank's share. Nothing without dropout.
LogicalResult attentionDropout(Operation *op, FloatAttr rateAttr, Value query, std::vector<KernelArg> &args) {
  const double rate = rateAttr ? rateAttr.getValueAsDouble() : 0.0;
  if (rate == 0.0)
    return success();
  const int64_t heads = shapeOf(query)[2];
  ShardingAttr sharding = recordedSharding(query);
  std::optional<int64_t> split = sharding ? sharding.splitDim(names::kTensorAxis) : std::nullopt;
  if (split && *split != 2)
    return refuse(op, "attention dropout with the query split over tp along a dimension other than heads");
  args.push_back(KernelArg::nested(
      {Kernel::attention_dropout,
       {KernelArg::context(KernelArg::StepContext), KernelArg::floating("rate", rate),
        integer("stream", names::kAttentionDropoutStream),
        integer("head_offset", split ? KernelInt::tpRankTimes(heads) : KernelInt(0)),
        integer("heads", split ? KernelInt::tpSizeTimes(heads) : KernelInt(heads))}}));
  return success();
}

/// The attention kernels' window after `causal` (0: every earlier key), given when there is one
/// or when the dropout argument after it follows.
void attentionWindow(std::vector<KernelArg> &args, std::optional<uint64_t> window, FloatAttr dropout) {
  if (window || (dropout && dropout.getValueAsDouble() != 0.0))
    args.push_back(integer("window", int64_t(window.value_or(0))));
}

/// The attention kernels' sizes from [batch, seq, heads, head_dim] queries and keys.
void attentionSizes(std::vector<KernelArg> &args, ArrayRef<int64_t> q, ArrayRef<int64_t> k, bool withSeq) {
  args.push_back(integer("batch", q[0]));
  if (withSeq)
    args.push_back(integer("seq", q[1]));
  args.push_back(integer("heads", q[2]));
  args.push_back(integer("kv_heads", k[2]));
  args.push_back(integer("head_dim", q[3]));
}

/// A broadcast elementwise op: rhs repeats over lhs's leading elements.
KernelCall broadcastCall(Kernel kernel, Value result, Value lhs, Value rhs) {
  const int64_t inner = numel(rhs);
  return {kernel, {result, lhs, rhs, integer("outer", numel(lhs) / inner), integer("inner", inner)}};
}

/// slice / pad along `dim`: the elements before it, its sizes in and out, the elements after.
KernelCall sliceCall(Kernel kernel, Value result, Value input, int64_t dim, KernelInt offset) {
  ArrayRef<int64_t> in = shapeOf(input), out = shapeOf(result);
  return {kernel,
          {result, input, integer("outer", product(in.take_front(dim))), integer("in_dim", in[dim]),
           integer("out_dim", out[dim]), integer("inner", product(in.drop_front(dim + 1))), integer("offset", offset)}};
}

/// A norm over the last dimension: rows of `dim`.
void normSizes(std::vector<KernelArg> &args, Value input, APFloat eps) {
  const int64_t h = shapeOf(input).back();
  args.push_back(integer("rows", numel(input) / h));
  args.push_back(integer("dim", h));
  args.push_back(floating("eps", eps));
}

/// The fused linear layers' GEMM: "in, weight, bias, m, n, k, transpose_b".
template <typename LinearOp>
void linearArgs(LinearOp op, std::vector<KernelArg> &args) {
  const GemmShape g = op.getGemmShape();
  llvm::append_values(args, KernelArg(op.getInput()), KernelArg(op.getWeight()), KernelArg(op.getBias()),
                      integer("m", g.m), integer("n", g.n), integer("k", g.k),
                      boolean("transpose_b", op.getTransposeRhs()));
}

} // namespace

// ---- forward ops ------------------------------------------------------------------------------

FailureOr<KernelCall> Nf4DequantizeOp::getKernelCall(bool) {
  return KernelCall{Kernel::nf4_dequantize, {getResult(), KernelArg::deref(getWeight())}};
}

FailureOr<KernelCall> EmbeddingOp::getKernelCall(bool) {
  ArrayRef<int64_t> t = shapeOf(getTable());
  if (getVocabParallel())
    return KernelCall{Kernel::embedding_forward_shard,
                      {getResult(), getTable(), getIds(), integer("tokens", numel(getIds())),
                       integer("vocab_local", t[0]), integer("dim", t[1]), vocabStart(true, t[0])}};
  return KernelCall{Kernel::embedding_forward, {getResult(), getTable(), getIds(), integer("tokens", numel(getIds())),
                                                integer("vocab", t[0]), integer("dim", t[1])}};
}

FailureOr<KernelCall> MatmulOp::getKernelCall(bool) {
  ArrayRef<int64_t> l = shapeOf(getLhs()), r = shapeOf(getRhs());
  const bool ta = getTransposeLhs(), tb = getTransposeRhs();
  const GemmShape g = getGemmShape(); // a shared rhs folds the batch into m
  KernelCall call{Kernel::gemm, {getResult(), getLhs(), getRhs()}};
  if (r.size() == 2) {
    if (ta && l.size() > 2)
      return refuse(*this, "transpose_lhs with a shared rhs and batched lhs");
    llvm::append_values(call.args, integer("m", g.m), integer("n", g.n), integer("k", g.k), boolean("transpose_a", ta),
                        boolean("transpose_b", tb));
  } else {
    call.kernel = Kernel::gemm_batched;
    llvm::append_values(call.args, integer("batch", g.batch), integer("m", g.m), integer("n", g.n), integer("k", g.k),
                        boolean("transpose_a", ta), boolean("transpose_b", tb),
                        integer("stride_a", product(l.take_back(2))), integer("stride_b", product(r.take_back(2))),
                        integer("stride_c", g.m * g.n));
  }
  if (getScale()) // the GEMM's alpha
    call.args.push_back(floating("alpha", *getScale()));
  return call;
}

FailureOr<KernelCall> AddOp::getKernelCall(bool) {
  return broadcastCall(Kernel::add, getResult(), getLhs(), getRhs());
}
FailureOr<KernelCall> MulOp::getKernelCall(bool) {
  return broadcastCall(Kernel::mul, getResult(), getLhs(), getRhs());
}

FailureOr<KernelCall> SliceOp::getKernelCall(bool decode) {
  // Decoding, the learned positions' row is the position being computed.
  auto param = getInput().getDefiningOp<ParamOp>();
  const bool position =
      decode && param && param.getRole() && *param.getRole() == ParamRole::PositionEmbedding && getDim() == 0;
  return sliceCall(Kernel::slice, getResult(), getInput(), getDim(),
                   position ? KernelInt::decodePosition() : KernelInt(getOffset()));
}

FailureOr<KernelCall> LayerNormOp::getKernelCall(bool) {
  KernelCall call{Kernel::layer_norm_forward, {getResult(), getInput(), getWeight(), getBias()}};
  normSizes(call.args, getInput(), getEpsilon());
  return call;
}

FailureOr<KernelCall> RmsNormOp::getKernelCall(bool) {
  KernelCall call{Kernel::rms_norm_forward, {getResult(), getInput(), getWeight()}};
  normSizes(call.args, getInput(), getEpsilon());
  if (std::optional<APFloat> offset = getWeightOffset()) // the kernel's default: 0
    call.args.push_back(floating("weight_offset", *offset));
  return call;
}

FailureOr<KernelCall> ScaleOp::getKernelCall(bool) {
  return KernelCall{Kernel::scale,
                    {getResult(), getInput(), floating("factor", getFactor()), integer("n", numel(getResult()))}};
}

FailureOr<KernelCall> GeluOp::getKernelCall(bool) {
  const bool tanh = getApproximation() == GeluApproximation::Tanh;
  return KernelCall{tanh ? Kernel::gelu_tanh_forward : Kernel::gelu_erf_forward,
                    {getResult(), getInput(), integer("n", numel(getResult()))}};
}

FailureOr<KernelCall> SwigluOp::getKernelCall(bool) {
  return KernelCall{Kernel::swiglu_forward, {getResult(), getGate(), getUp(), integer("n", numel(getResult()))}};
}

FailureOr<KernelCall> DropoutOp::getKernelCall(bool) {
  if (getRate().isZero())
    return copyCall(getResult(), getInput());
  // This rank's block of the global tensor, whose positions the mask is a function of: a
  // dimension megac-tensor-parallel split over tp starts at the rank's share.
  ShardingAttr sharding = recordedSharding(getResult());
  if (sharding && !sharding.getPartial().empty())
    return refuse(*this, "dropout of partial sums (megac-tensor-parallel makes them whole first)");
  std::optional<int64_t> split = sharding ? sharding.splitDim(names::kTensorAxis) : std::nullopt;
  if (split && *split == 0)
    return refuse(*this, "dropout of a value split over tp along its batch dimension");
  std::vector<KernelInt> shape, offsets, extents;
  for (auto [d, size] : llvm::enumerate(shapeOf(getResult()))) {
    const bool tp = split && static_cast<int64_t>(d) == *split;
    shape.push_back(size);
    offsets.push_back(tp ? KernelInt::tpRankTimes(size) : KernelInt(0));
    extents.push_back(d == 0 ? KernelInt(0) : tp ? KernelInt::tpSizeTimes(size) : KernelInt(size));
  }
  KernelCall block{Kernel::dropout_block,
                   {KernelArg::context(KernelArg::StepContext), floating("rate", getRate()),
                    integer("stream", int64_t(getStream())), KernelArg::list("shape", shape),
                    KernelArg::list("offset", offsets), KernelArg::list("extent", extents)}};
  return KernelCall{Kernel::apply_dropout, {getResult(), getInput(), KernelArg::nested(std::move(block))}};
}

FailureOr<KernelCall> RopeOp::getKernelCall(bool decode) {
  ArrayRef<int64_t> s = shapeOf(getInput());
  KernelCall call{Kernel::rope_forward,
                  {getResult(), getInput(), integer("batch", s[0]), integer("seq", s[1]), integer("heads", s[2]),
                   integer("head_dim", s[3]), floating("theta", getTheta()),
                   integer("position_offset", decode ? KernelInt::decodePosition() : KernelInt(0)),
                   boolean("inverse", getInverse())}};
  if (std::optional<APFloat> divisor = getPositionDivisor()) // the kernel's default: 1
    call.args.push_back(floating("position_divisor", *divisor));
  return call;
}

FailureOr<KernelCall> AttentionOp::getKernelCall(bool decode) {
  ArrayRef<int64_t> q = shapeOf(getQuery()), k = shapeOf(getKey());
  if (decode) { // one position against the layer's cache
    if (q[1] != 1 || !getCausal())
      return refuse(*this, "decoding needs causal attention over one position");
    KernelCall call{Kernel::attention_decode,
                    {getResult(), getQuery(), getKey(), getValue(), KernelArg::context(KernelArg::KvCache),
                     KernelArg::context(KernelArg::Layer)}};
    attentionSizes(call.args, q, k, /*withSeq=*/false);
    call.args.push_back(floating("scale", getScale()));
    if (std::optional<uint64_t> window = getWindow()) // the kernel's default: 0, every cached key
      call.args.push_back(integer("window", int64_t(*window)));
    return call;
  }
  KernelCall call{Kernel::attention_forward, {getResult(), getQuery(), getKey(), getValue()}};
  attentionSizes(call.args, q, k, /*withSeq=*/true);
  llvm::append_values(call.args, floating("scale", getScale()), boolean("causal", getCausal()));
  attentionWindow(call.args, getWindow(), getDropoutAttr());
  if (failed(attentionDropout(*this, getDropoutAttr(), getQuery(), call.args)))
    return failure();
  return call;
}

/// A loss's ignored label, the kernels' last argument when there is one (their default: none).
void ignoreIndex(std::vector<KernelArg> &args, std::optional<uint64_t> ignore) {
  if (ignore)
    args.push_back(integer("ignore_index", int64_t(*ignore)));
}

FailureOr<KernelCall> CrossEntropyOp::getKernelCall(bool) {
  const int64_t v = shapeOf(getLogits()).back();
  KernelCall call{Kernel::cross_entropy_forward,
                  {getResult(), getLogits(), getLabels(), integer("tokens", numel(getLabels())), integer("vocab", v),
                   integer("vocab_size", int64_t(getVocabSize().value_or(v)))}};
  ignoreIndex(call.args, getIgnoreIndex());
  return call;
}

// ---- backward ops -----------------------------------------------------------------------------

FailureOr<KernelCall> ZerosOp::getKernelCall(bool) {
  return KernelCall{Kernel::zero_buffer, {getResult(), integer("bytes", int64_t(tensorBytes(getType())))}};
}

FailureOr<KernelCall> ReduceSumOp::getKernelCall(bool) {
  const int64_t inner = numel(getResult());
  return KernelCall{Kernel::reduce_sum_leading,
                    {getResult(), getInput(), integer("outer", numel(getInput()) / inner), integer("inner", inner)}};
}

FailureOr<KernelCall> PadOp::getKernelCall(bool) {
  return sliceCall(Kernel::pad, getResult(), getInput(), getDim(), KernelInt(getOffset()));
}

FailureOr<KernelCall> EmbeddingGradOp::getKernelCall(bool) {
  ArrayRef<int64_t> t = shapeOf(getResult());
  if (getVocabParallel())
    return KernelCall{Kernel::embedding_backward_shard,
                      {getResult(), getGrad(), getIds(), integer("tokens", numel(getIds())),
                       integer("vocab_local", t[0]), integer("dim", t[1]), vocabStart(true, t[0])}};
  return KernelCall{Kernel::embedding_backward, {getResult(), getGrad(), getIds(), integer("tokens", numel(getIds())),
                                                 integer("vocab", t[0]), integer("dim", t[1])}};
}

FailureOr<KernelCall> LayerNormGradOp::getKernelCall(bool) {
  KernelCall call{Kernel::layer_norm_backward,
                  {getInputGrad(), getWeightGrad(), getBiasGrad(), getGrad(), getInput(), getWeight()}};
  normSizes(call.args, getInput(), getEpsilon());
  return call;
}

FailureOr<KernelCall> RmsNormGradOp::getKernelCall(bool) {
  KernelCall call{Kernel::rms_norm_backward, {getInputGrad(), getWeightGrad(), getGrad(), getInput(), getWeight()}};
  normSizes(call.args, getInput(), getEpsilon());
  if (std::optional<APFloat> offset = getWeightOffset())
    call.args.push_back(floating("weight_offset", *offset));
  return call;
}

FailureOr<KernelCall> GeluGradOp::getKernelCall(bool) {
  const bool tanh = getApproximation() == GeluApproximation::Tanh;
  return KernelCall{tanh ? Kernel::gelu_tanh_backward : Kernel::gelu_erf_backward,
                    {getResult(), getGrad(), getInput(), integer("n", numel(getResult()))}};
}

FailureOr<KernelCall> SwigluGradOp::getKernelCall(bool) {
  return KernelCall{Kernel::swiglu_backward,
                    {getGateGrad(), getUpGrad(), getGrad(), getGate(), getUp(), integer("n", numel(getGrad()))}};
}

FailureOr<KernelCall> AttentionGradOp::getKernelCall(bool) {
  ArrayRef<int64_t> q = shapeOf(getQuery()), k = shapeOf(getKey());
  KernelCall call{Kernel::attention_backward,
                  {getQueryGrad(), getKeyGrad(), getValueGrad(), getGrad(), getQuery(), getKey(), getValue()}};
  attentionSizes(call.args, q, k, /*withSeq=*/true);
  llvm::append_values(call.args, floating("scale", getScale()), boolean("causal", getCausal()));
  attentionWindow(call.args, getWindow(), getDropoutAttr());
  if (failed(attentionDropout(*this, getDropoutAttr(), getQuery(), call.args)))
    return failure();
  return call;
}

FailureOr<KernelCall> CrossEntropyGradOp::getKernelCall(bool) {
  const int64_t v = shapeOf(getLogits()).back();
  KernelCall call{Kernel::cross_entropy_backward,
                  {getResult(), KernelArg::hostScalar(getGrad()), getLogits(), getLabels(),
                   integer("tokens", numel(getLabels())), integer("vocab", v),
                   integer("vocab_size", int64_t(getVocabSize().value_or(v)))}};
  ignoreIndex(call.args, getIgnoreIndex());
  return call;
}

// ---- vocabulary-parallel cross-entropy ----------------------------------------------------------

FailureOr<KernelCall> LogitsMaxOp::getKernelCall(bool) {
  const int64_t v = shapeOf(getLogits()).back();
  return KernelCall{Kernel::logits_max, {getResult(), getLogits(), integer("tokens", numel(getResult())),
                                         integer("vocab", v), validColumns(getVocabSize(), v)}};
}

FailureOr<KernelCall> LogitsSumExpOp::getKernelCall(bool) {
  const int64_t v = shapeOf(getLogits()).back();
  return KernelCall{Kernel::logits_sum_exp, {getResult(), getLogits(), getMax(), integer("tokens", numel(getResult())),
                                             integer("vocab", v), validColumns(getVocabSize(), v)}};
}

FailureOr<KernelCall> TargetLogitOp::getKernelCall(bool) {
  const int64_t v = shapeOf(getLogits()).back();
  return KernelCall{Kernel::target_logit, {getResult(), getLogits(), getLabels(), integer("tokens", numel(getResult())),
                                           integer("vocab", v), vocabStart(getVocabParallel(), v)}};
}

FailureOr<KernelCall> CrossEntropyFromStatsOp::getKernelCall(bool) {
  KernelCall call{Kernel::cross_entropy_from_stats,
                  {getResult(), getMax(), getSumExp(), getTarget(), integer("tokens", numel(getMax()))}};
  if (getLabels()) { // the labels, then the ignored one
    call.args.push_back(getLabels());
    ignoreIndex(call.args, getIgnoreIndex());
  }
  return call;
}

FailureOr<KernelCall> CrossEntropyGradFromStatsOp::getKernelCall(bool) {
  const int64_t v = shapeOf(getLogits()).back();
  KernelCall call{Kernel::cross_entropy_backward_from_stats,
                  {getResult(), KernelArg::hostScalar(getGrad()), getLogits(), getLabels(), getMax(), getSumExp(),
                   integer("tokens", numel(getMax())), integer("vocab", v), vocabStart(getVocabParallel(), v),
                   validColumns(getVocabSize(), v)}};
  ignoreIndex(call.args, getIgnoreIndex());
  return call;
}

// ---- fused ops --------------------------------------------------------------------------------

FailureOr<KernelCall> MatmulBiasOp::getKernelCall(bool) {
  KernelCall call{Kernel::gemm_bias, {getResult()}};
  linearArgs(*this, call.args);
  return call;
}

FailureOr<KernelCall> MatmulBiasGeluOp::getKernelCall(bool) {
  KernelCall call{Kernel::gemm_bias_gelu, {getPre(), getResult()}};
  linearArgs(*this, call.args);
  call.args.push_back(boolean("tanh", getApproximation() == GeluApproximation::Tanh));
  return call;
}

FailureOr<KernelCall> MatmulNf4Op::getKernelCall(bool) {
  const GemmShape g = getGemmShape();
  return KernelCall{Kernel::gemm_nf4, {getResult(), getInput(), KernelArg::deref(getWeight()), integer("m", g.m),
                                       integer("n", g.n), integer("k", g.k),
                                       boolean("transpose_b", getTransposeRhs())}};
}

// ---- mixture of experts -------------------------------------------------------------------------

namespace {

/// `call` of a mixture-of-experts kernel: templates over the activations' type (float, bf16 or
/// fp16; megart/kernels.h), whose floating-point operands are that type or float.
FailureOr<KernelCall> moeCall(Operation *op, KernelCall call) {
  Type half;
  for (Value v : llvm::concat<Value>(op->getOperands(), op->getResults()))
    if (auto t = cast<RankedTensorType>(v.getType()); isa<FloatType>(t.getElementType()) && !t.getElementType().isF32()) {
      if (half && half != t.getElementType())
        return refuse(op, "the mixture-of-experts kernels take one 16-bit activation type per call");
      half = t.getElementType();
    }
  return call;
}

/// A move between token rows and rows in expert order (weighted when weights are given).
FailureOr<KernelCall> rowMoveCall(Operation *op, Kernel plain, Kernel weighted, Value result, Value input, Value rows,
                                  Value weights, int64_t hidden) {
  ArrayRef<int64_t> r = shapeOf(rows);
  std::vector<KernelArg> args{result, input, rows};
  if (weights)
    args.push_back(weights);
  for (KernelArg a : {integer("tokens", r[0]), integer("topk", r[1]), integer("hidden", hidden)})
    args.push_back(a);
  return moeCall(op, {weights ? weighted : plain, std::move(args)});
}

} // namespace

FailureOr<KernelCall> MoeRouteOp::getKernelCall(bool) {
  ArrayRef<int64_t> l = shapeOf(getLogits());
  return moeCall(
      *this, {Kernel::moe_route_forward,
              {getProbs(), getExperts(), getWeights(), getLogits(), integer("tokens", l[0]), integer("experts", l[1]),
               integer("topk", int64_t(getTopk())), boolean("pre_softmax", getPreSoftmax())}});
}

FailureOr<KernelCall> MoeAssignOp::getKernelCall(bool) {
  ArrayRef<int64_t> e = shapeOf(getExperts());
  return KernelCall{Kernel::moe_assign,
                    {getRows(), getCounts(), getExperts(), integer("tokens", e[0]), integer("topk", e[1]),
                     integer("experts", shapeOf(getCounts())[0])}};
}

FailureOr<KernelCall> MoeDropOp::getKernelCall(bool) {
  ArrayRef<int64_t> e = shapeOf(getExperts());
  return moeCall(*this, {Kernel::moe_drop,
                         {getKept(), getMask(), getExperts(), getWeights(), integer("tokens", e[0]),
                          integer("topk", e[1]), integer("experts", static_cast<int64_t>(getNumExperts())),
                          integer("capacity", static_cast<int64_t>(getCapacity())),
                          boolean("by_position", getByPosition())}});
}

FailureOr<KernelCall> MoeScatterOp::getKernelCall(bool) {
  return rowMoveCall(*this, Kernel::moe_scatter, Kernel::moe_scatter_weighted, getResult(), getInput(), getRows(),
                     getWeights(), shapeOf(getInput())[1]);
}

FailureOr<KernelCall> MoeGatherOp::getKernelCall(bool) {
  return rowMoveCall(*this, Kernel::moe_gather, Kernel::moe_gather_weighted, getResult(), getInput(), getRows(),
                     getWeights(), shapeOf(getInput())[1]);
}

FailureOr<KernelCall> MoeExchangeCountsOp::getKernelCall(bool) {
  return KernelCall{Kernel::moe_exchange_counts,
                    {KernelArg::context(KernelArg::StepContext), getReceived(), getCounts(),
                     integer("experts", shapeOf(getCounts())[0])}};
}

/// tx.moe_dispatch and tx.moe_combine: `local` rows in expert order, `exchanged` every rank's rows
/// of this rank's experts.
template <typename Op> static FailureOr<KernelCall> expertExchangeCall(Op op, Kernel kernel, Value local, Value exchanged) {
  return moeCall(op, {kernel,
                      {KernelArg::context(KernelArg::StepContext), op.getResult(), op.getInput(), op.getCounts(),
                       op.getReceived(), integer("experts", shapeOf(op.getCounts())[0]),
                       integer("local_rows", shapeOf(local)[0]), integer("exchanged_rows", shapeOf(exchanged)[0]),
                       integer("hidden", shapeOf(local)[1])}});
}

FailureOr<KernelCall> MoeDispatchOp::getKernelCall(bool) {
  return expertExchangeCall(*this, Kernel::moe_dispatch, getInput(), getResult());
}

FailureOr<KernelCall> MoeCombineOp::getKernelCall(bool) {
  return expertExchangeCall(*this, Kernel::moe_combine, getResult(), getInput());
}

FailureOr<KernelCall> GroupedMatmulOp::getKernelCall(bool) {
  ArrayRef<int64_t> a = shapeOf(getLhs()), w = shapeOf(getRhs());
  return moeCall(*this, {Kernel::grouped_gemm,
                         {getResult(), getLhs(), getRhs(), getCounts(), integer("segments", shapeOf(getCounts())[0]),
                          integer("experts", w[0]), integer("rows", a[0]), integer("k", a[1]),
                          integer("n", shapeOf(getResult())[1]), boolean("transpose_w", getTransposeRhs())}});
}

FailureOr<KernelCall> MoeRouteGradOp::getKernelCall(bool) {
  ArrayRef<int64_t> p = shapeOf(getProbs());
  return moeCall(*this, {Kernel::moe_route_backward,
                         {getResult(), getProbsGrad(), getWeightsGrad(), getProbs(), getExperts(), getWeights(),
                          integer("tokens", p[0]), integer("experts", p[1]), integer("topk", shapeOf(getWeights())[1]),
                          boolean("pre_softmax", getPreSoftmax())}});
}

FailureOr<KernelCall> MoeRowDotOp::getKernelCall(bool) {
  ArrayRef<int64_t> r = shapeOf(getRows());
  return moeCall(*this, {Kernel::moe_row_dot,
                         {getResult(), getTokens(), getExpertRows(), getRows(), integer("tokens", r[0]),
                          integer("topk", r[1]), integer("hidden", shapeOf(getTokens())[1])}});
}

FailureOr<KernelCall> GroupedMatmulWeightGradOp::getKernelCall(bool) {
  ArrayRef<int64_t> a = shapeOf(getLhs());
  return moeCall(*this, {Kernel::grouped_gemm_weight_grad,
                         {getResult(), getLhs(), getGrad(), getCounts(), integer("segments", shapeOf(getCounts())[0]),
                          integer("experts", shapeOf(getResult())[0]), integer("rows", a[0]), integer("k", a[1]), integer("n", shapeOf(getGrad())[1]),
                          boolean("transpose", getTranspose())}});
}

FailureOr<KernelCall> RouterLoadOp::getKernelCall(bool) {
  ArrayRef<int64_t> p = shapeOf(getProbs());
  return moeCall(*this, {Kernel::router_load,
                         {getResult(), getProbs(), getCounts(), integer("tokens", p[0]), integer("experts", p[1])}});
}

FailureOr<KernelCall> RouterLoadGradOp::getKernelCall(bool) {
  ArrayRef<int64_t> r = shapeOf(getResult());
  return moeCall(*this, {Kernel::router_load_backward,
                         {getResult(), getGrad(), integer("tokens", r[0]), integer("experts", r[1])}});
}

FailureOr<KernelCall> LoadBalancingLossOp::getKernelCall(bool) {
  return moeCall(*this,
                 {Kernel::load_balancing_loss,
                  {getResult(), getLoad(), integer("experts", shapeOf(getLoad())[1]), floating("scale", getScale())}});
}

FailureOr<KernelCall> LoadBalancingLossGradOp::getKernelCall(bool) {
  return moeCall(*this, {Kernel::load_balancing_loss_backward,
                         {getResult(), KernelArg::hostScalar(getGrad()), getLoad(),
                          integer("experts", shapeOf(getLoad())[1]), floating("scale", getScale())}});
}

FailureOr<KernelCall> MetricOp::getKernelCall(bool) {
  return KernelCall{
      Kernel::record_metric,
      {KernelArg::context(KernelArg::StepContext), integer("metric", static_cast<int64_t>(getMetric())), getValue()}};
}

FailureOr<KernelCall> RecordExpertLoadOp::getKernelCall(bool) {
  return KernelCall{Kernel::record_expert_load,
                    {KernelArg::context(KernelArg::StepContext), getCounts(),
                     integer("experts", shapeOf(getCounts())[0])}};
}

FailureOr<KernelCall> GateRowsOp::getKernelCall(bool) {
  ArrayRef<int64_t> x = shapeOf(getInput());
  return moeCall(*this, {Kernel::gate_rows_forward,
                         {getResult(), getInput(), getGate(), integer("tokens", x[0]), integer("hidden", x[1])}});
}

FailureOr<KernelCall> GateRowsGradOp::getKernelCall(bool) {
  ArrayRef<int64_t> x = shapeOf(getInput());
  return moeCall(*this, {Kernel::gate_rows_backward,
                         {getInputGrad(), getGateGrad(), getGrad(), getInput(), getGate(), integer("tokens", x[0]),
                          integer("hidden", x[1])}});
}

FailureOr<KernelCall> RouterZLossOp::getKernelCall(bool) {
  ArrayRef<int64_t> l = shapeOf(getLogits());
  return moeCall(
      *this, {Kernel::router_z_loss, {getResult(), getLogits(), integer("tokens", l[0]), integer("experts", l[1])}});
}

FailureOr<KernelCall> RouterZLossGradOp::getKernelCall(bool) {
  ArrayRef<int64_t> l = shapeOf(getLogits());
  return moeCall(*this, {Kernel::router_z_loss_backward,
                         {getResult(), KernelArg::hostScalar(getGrad()), getLogits(), integer("tokens", l[0]),
                          integer("experts", l[1])}});
}
