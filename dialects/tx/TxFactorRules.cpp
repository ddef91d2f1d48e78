// Each `tx` op's sharding rule in factors (TxFactorRule.h): which dimensions of its operands and
// results move together, which it sums over and which it cannot split. The rules say what the
// maths allows, not what Megatron chooses: the choices are the placement's and propagation's.
#include "tx/TxFactorRule.h"
#include "tx/TxOps.h"

using namespace mlir;
using namespace megac::tx;

namespace {

ArrayRef<int64_t> shapeOf(Value v) { return cast<ShapedType>(v.getType()).getShape(); }

/// A factor for a dimension of `size` (none for size 1), as a one-dimension list.
FactorRule::Dim dimOf(FactorRule &rule, int64_t size, bool needReplication = false) {
  return size == 1 ? FactorRule::Dim{} : FactorRule::Dim{rule.addFactor(size, needReplication)};
}

/// A GEMM's rule from its operands' dimensions: the lhs's leading (batch) dimensions, its rows,
/// the contraction k (summed: a reduction) and the rhs's columns; `extra` operands (a bias) are
/// [n]. `lhs` and `rhs` are the operands' shapes; the result is [batch..., m, n].
FactorRule gemmRule(ArrayRef<int64_t> lhs, ArrayRef<int64_t> rhs, const GemmShape &g, unsigned extra) {
  FactorRule rule;
  FactorRule::Tensor l(lhs.size()), r(rhs.size()), out;
  const int64_t lr = static_cast<int64_t>(lhs.size()), rr = static_cast<int64_t>(rhs.size());
  // Leading dimensions of the lhs: the batch (shared with a batched rhs) or more rows.
  for (int64_t d = 0; d < lr; ++d)
    if (d != g.lhsRowDim && d != g.lhsContractDim) {
      l[d] = dimOf(rule, lhs[d]);
      out.push_back(l[d]);
      if (rr == lr)
        r[d] = l[d];
    }
  if (g.lhsRowDim >= 0) {
    l[g.lhsRowDim] = dimOf(rule, lhs[g.lhsRowDim]);
    out.push_back(l[g.lhsRowDim]);
  }
  l[g.lhsContractDim] = r[g.rhsContractDim] = dimOf(rule, lhs[g.lhsContractDim]);
  r[g.rhsColDim] = dimOf(rule, rhs[g.rhsColDim]);
  out.push_back(r[g.rhsColDim]);
  rule.operands = {l, r};
  for (unsigned i = 0; i < extra; ++i)
    rule.operands.push_back({r[g.rhsColDim]});
  rule.results = {out};
  return rule;
}

/// Norms: rows independent, each row normalised whole; `params` operands (weight, bias) are
/// [hidden]. The leading factors, one per leading dimension, are returned with the rule.
FactorRule normRule(Value input, unsigned params) {
  FactorRule rule;
  ArrayRef<int64_t> shape = shapeOf(input);
  FactorRule::Tensor x;
  for (int64_t size : shape.drop_back())
    x.push_back(dimOf(rule, size));
  const FactorRule::Dim hidden = dimOf(rule, shape.back(), /*needReplication=*/true);
  x.push_back(hidden);
  rule.operands = {x};
  for (unsigned i = 0; i < params; ++i)
    rule.operands.push_back({hidden});
  return rule;
}

/// Attention's [batch, seq, heads, head_dim] operands: query heads grouped over key/value heads
/// (query head h uses key/value head h / group), the key sequence softmax-normalised whole,
/// the query sequence whole too (positions and the causal mask need its offset: context
/// parallelism will split it), head_dim contracted inside a softmax (whole).
struct AttentionFactors {
  FactorRule::Tensor query, keyValue;
};
AttentionFactors attentionFactors(FactorRule &rule, Value query, Value key) {
  ArrayRef<int64_t> q = shapeOf(query), k = shapeOf(key);
  const FactorRule::Dim batch = dimOf(rule, q[0]);
  const FactorRule::Dim seq = dimOf(rule, q[1], /*needReplication=*/true);
  const FactorRule::Dim keySeq = dimOf(rule, k[1], /*needReplication=*/true);
  const FactorRule::Dim kvHeads = dimOf(rule, k[2]);
  const FactorRule::Dim group = dimOf(rule, k[2] > 0 ? q[2] / k[2] : 1);
  const FactorRule::Dim headDim = dimOf(rule, q[3], /*needReplication=*/true);
  FactorRule::Dim heads = kvHeads;
  heads.append(group.begin(), group.end());
  return {{batch, seq, heads, headDim}, {batch, keySeq, kvHeads, headDim}};
}

/// Slice and pad along `dim`: the cut dimension cannot be split (its sizes differ), the others
/// pass through.
FactorRule cutRule(Value input, Value result, int64_t dim) {
  FactorRule rule;
  ArrayRef<int64_t> in = shapeOf(input), out = shapeOf(result);
  FactorRule::Tensor a, b;
  for (int64_t d = 0; d < static_cast<int64_t>(in.size()); ++d) {
    if (d == dim) {
      a.push_back(dimOf(rule, in[d], /*needReplication=*/true));
      b.push_back(dimOf(rule, out[d], /*needReplication=*/true));
    } else {
      a.push_back(dimOf(rule, in[d]));
      b.push_back(a.back());
    }
  }
  rule.operands = {a};
  rule.results = {b};
  return rule;
}

/// An embedding's table [vocab, hidden], its ids [tokens...] and the rows it reads [tokens...,
/// hidden].
struct EmbeddingFactors {
  FactorRule::Tensor table, tokens, rows;
};
EmbeddingFactors embeddingFactors(FactorRule &rule, Value ids, ArrayRef<int64_t> table) {
  EmbeddingFactors f;
  f.tokens = freshFactors(rule, shapeOf(ids));
  const FactorRule::Dim vocab = dimOf(rule, table[0]), hidden = dimOf(rule, table[1]);
  f.table = {vocab, hidden};
  f.rows = f.tokens;
  f.rows.push_back(hidden);
  return f;
}

/// Logits [tokens..., vocab] and labels [tokens...]: the vocabulary whole (a softmax over it).
std::pair<FactorRule::Tensor, FactorRule::Tensor> crossEntropyFactors(FactorRule &rule, Value logits) {
  ArrayRef<int64_t> shape = shapeOf(logits);
  FactorRule::Tensor tokens = freshFactors(rule, shape.drop_back());
  FactorRule::Tensor all = tokens;
  all.push_back(dimOf(rule, shape.back(), /*needReplication=*/true));
  return {all, tokens};
}

} // namespace

FactorRule ParamOp::getFactorRule() {
  FactorRule rule;
  rule.results = {freshFactors(rule, shapeOf(getResult()))};
  return rule;
}

FactorRule ZerosOp::getFactorRule() {
  FactorRule rule;
  rule.results = {freshFactors(rule, shapeOf(getResult()))};
  return rule;
}

FactorRule ParamGradOp::getFactorRule() {
  FactorRule rule;
  FactorRule::Tensor t = freshFactors(rule, shapeOf(getParam()));
  rule.operands = {t, t};
  return rule;
}

// Elementwise: every operand and result alike (a bias broadcast over the leading dimensions).
FactorRule AddOp::getFactorRule() { return elementwiseRule(*this); }
FactorRule MulOp::getFactorRule() { return elementwiseRule(*this); }
FactorRule GeluOp::getFactorRule() { return elementwiseRule(*this); }
FactorRule ScaleOp::getFactorRule() { return elementwiseRule(*this); }
FactorRule GeluGradOp::getFactorRule() { return elementwiseRule(*this); }
FactorRule SwigluOp::getFactorRule() { return elementwiseRule(*this); }
FactorRule SwigluGradOp::getFactorRule() { return elementwiseRule(*this); }
FactorRule DropoutOp::getFactorRule() { return elementwiseRule(*this); }
FactorRule Nf4DequantizeOp::getFactorRule() { return elementwiseRule(*this); }

FactorRule ReshapeOp::getFactorRule() { return reshapeRule(shapeOf(getInput()), shapeOf(getResult())); }

FactorRule SliceOp::getFactorRule() { return cutRule(getInput(), getResult(), getDim()); }
FactorRule PadOp::getFactorRule() { return cutRule(getInput(), getResult(), getDim()); }

// Rows pass through; the leading dimensions are summed over for the result of lower rank.
FactorRule ReduceSumOp::getFactorRule() {
  FactorRule rule;
  FactorRule::Tensor in = freshFactors(rule, shapeOf(getInput()));
  rule.operands = {in};
  rule.results = {FactorRule::Tensor(in.end() - shapeOf(getResult()).size(), in.end())};
  return rule;
}

FactorRule MatmulOp::getFactorRule() {
  return gemmRule(shapeOf(getLhs()), shapeOf(getRhs()), getGemmShape(), 0);
}

// An embedding reads one row of the table per token: the vocabulary is summed over (a row range
// per rank gives partial sums, Megatron's VocabParallelEmbedding).
FactorRule EmbeddingOp::getFactorRule() {
  FactorRule rule;
  EmbeddingFactors f = embeddingFactors(rule, getIds(), shapeOf(getTable()));
  rule.operands = {f.table, f.tokens};
  rule.results = {f.rows};
  return rule;
}

// The table's gradient: every token's row added in (the tokens are summed over).
FactorRule EmbeddingGradOp::getFactorRule() {
  FactorRule rule;
  EmbeddingFactors f = embeddingFactors(rule, getIds(), shapeOf(getResult()));
  rule.operands = {f.rows, f.tokens};
  rule.results = {f.table};
  return rule;
}

FactorRule LayerNormOp::getFactorRule() {
  FactorRule rule = normRule(getInput(), 2);
  rule.results = {rule.operands[0]};
  return rule;
}

FactorRule RmsNormOp::getFactorRule() {
  FactorRule rule = normRule(getInput(), 1);
  rule.results = {rule.operands[0]};
  return rule;
}

// The weight's and bias's gradients are summed over the rows.
FactorRule LayerNormGradOp::getFactorRule() {
  FactorRule rule = normRule(getInput(), 0);
  const FactorRule::Tensor x = rule.operands[0];
  rule.operands = {x, x, {x.back()}};
  rule.results = {x, {x.back()}, {x.back()}};
  return rule;
}

FactorRule RmsNormGradOp::getFactorRule() {
  FactorRule rule = normRule(getInput(), 0);
  const FactorRule::Tensor x = rule.operands[0];
  rule.operands = {x, x, {x.back()}};
  rule.results = {x, {x.back()}};
  return rule;
}

// Rotary embeddings rotate pairs within head_dim at each position's angle: the sequence and
// head_dim stay whole (a split sequence needs its offset, as attention's).
FactorRule RopeOp::getFactorRule() {
  FactorRule rule;
  ArrayRef<int64_t> s = shapeOf(getInput());
  FactorRule::Tensor t = {dimOf(rule, s[0]), dimOf(rule, s[1], true), dimOf(rule, s[2]), dimOf(rule, s[3], true)};
  rule.operands = {t};
  rule.results = {t};
  return rule;
}

FactorRule AttentionOp::getFactorRule() {
  FactorRule rule;
  AttentionFactors f = attentionFactors(rule, getQuery(), getKey());
  rule.operands = {f.query, f.keyValue, f.keyValue};
  rule.results = {f.query};
  return rule;
}

FactorRule AttentionGradOp::getFactorRule() {
  FactorRule rule;
  AttentionFactors f = attentionFactors(rule, getQuery(), getKey());
  rule.operands = {f.query, f.query, f.keyValue, f.keyValue};
  rule.results = {f.query, f.keyValue, f.keyValue};
  return rule;
}

// The mean loss over the tokens (summed over), softmax over the whole vocabulary (Megatron's
// vocabulary-parallel cross-entropy is a different algorithm: its own ops).
FactorRule CrossEntropyOp::getFactorRule() {
  FactorRule rule;
  auto [logits, tokens] = crossEntropyFactors(rule, getLogits());
  rule.operands = {logits, tokens};
  rule.results = {{}};
  return rule;
}

FactorRule CrossEntropyGradOp::getFactorRule() {
  FactorRule rule;
  auto [logits, tokens] = crossEntropyFactors(rule, getLogits());
  rule.operands = {{}, logits, tokens};
  rule.results = {logits};
  return rule;
}

// ---- mixture of experts ---------------------------------------------------------------------
// Tokens may be split (each rank routes its own); the rows in expert order are the tokens'
// choices, [tokens x k] as merged factors, so a split of the tokens splits them too (each rank
// orders its own choices). A choice of experts (top k, a softmax over the experts, a group of
// rows per expert) needs every expert: the experts stay whole until expert parallelism.

namespace {

struct MoeFactors {
  FactorRule::Dim tokens, choices, hidden;
  /// [tokens, k] choices and [tokens x k, hidden] rows in expert order.
  FactorRule::Tensor perChoice() const { return {tokens, choices}; }
  FactorRule::Tensor expertRows(FactorRule::Dim width) const {
    FactorRule::Dim merged = tokens;
    merged.append(choices.begin(), choices.end());
    return {merged, width};
  }
};

MoeFactors moeFactors(FactorRule &rule, Value choices, int64_t hidden) {
  ArrayRef<int64_t> c = shapeOf(choices);
  return {dimOf(rule, c[0]), dimOf(rule, c[1], /*needReplication=*/true), dimOf(rule, hidden)};
}

/// tx.moe_scatter / tx.moe_gather: token rows [tokens, hidden], rows in expert order, choices.
FactorRule rowMoveRule(Value rows, Value weights, Value tokenRows, bool toExperts) {
  FactorRule rule;
  MoeFactors f = moeFactors(rule, rows, shapeOf(tokenRows)[1]);
  FactorRule::Tensor tokens = {f.tokens, f.hidden}, expert = f.expertRows(f.hidden);
  rule.operands = {toExperts ? tokens : expert, f.perChoice()};
  if (weights)
    rule.operands.push_back(f.perChoice());
  rule.results = {toExperts ? expert : tokens};
  return rule;
}

/// A grouped GEMM's factors: rows in expert order (merged tokens x k) by [experts, K, N] weights.
/// Split rows are each rank's own tokens' rows with its own counts (tx.moe_assign's, per rank).
struct GroupedGemmFactors {
  FactorRule::Tensor lhs, rhs, counts, out;
};
GroupedGemmFactors groupedGemmFactors(FactorRule &rule, ArrayRef<int64_t> lhs, ArrayRef<int64_t> rhs,
                                      bool transposed, int64_t segments) {
  const FactorRule::Dim rows = dimOf(rule, lhs[0]);
  const FactorRule::Dim experts = dimOf(rule, rhs[0], /*needReplication=*/true);
  const FactorRule::Dim k = dimOf(rule, lhs[1]), n = dimOf(rule, transposed ? rhs[1] : rhs[2]);
  // Expert parallelism's received counts: a count per expert of each sending rank, whole too.
  const FactorRule::Dim counts = segments == rhs[0] ? experts : dimOf(rule, segments, /*needReplication=*/true);
  return {{rows, k}, transposed ? FactorRule::Tensor{experts, n, k} : FactorRule::Tensor{experts, k, n}, {counts},
          {rows, n}};
}

} // namespace

FactorRule MoeRouteOp::getFactorRule() {
  FactorRule rule;
  ArrayRef<int64_t> l = shapeOf(getLogits());
  const FactorRule::Dim tokens = dimOf(rule, l[0]), experts = dimOf(rule, l[1], /*needReplication=*/true);
  const FactorRule::Dim choices = dimOf(rule, int64_t(getTopk()), /*needReplication=*/true);
  rule.operands = {{tokens, experts}};
  rule.results = {{tokens, experts}, {tokens, choices}, {tokens, choices}};
  return rule;
}

// The counts are summed over the tokens: a split of the tokens leaves each rank its own.
FactorRule MoeAssignOp::getFactorRule() {
  FactorRule rule;
  MoeFactors f = moeFactors(rule, getExperts(), 1);
  rule.operands = {f.perChoice()};
  rule.results = {f.perChoice(), {dimOf(rule, shapeOf(getCounts())[0], /*needReplication=*/true)}};
  return rule;
}

// Each rank drops among its own tokens' choices (the capacity is per microbatch and rank).
FactorRule MoeDropOp::getFactorRule() {
  FactorRule rule;
  MoeFactors f = moeFactors(rule, getExperts(), 1);
  rule.operands = {f.perChoice(), f.perChoice()};
  rule.results = {f.perChoice(), f.perChoice()};
  return rule;
}

FactorRule MoeScatterOp::getFactorRule() { return rowMoveRule(getRows(), getWeights(), getInput(), true); }
FactorRule MoeGatherOp::getFactorRule() { return rowMoveRule(getRows(), getWeights(), getResult(), false); }

FactorRule GroupedMatmulOp::getFactorRule() {
  FactorRule rule;
  GroupedGemmFactors f =
      groupedGemmFactors(rule, shapeOf(getLhs()), shapeOf(getRhs()), getTransposeRhs(), shapeOf(getCounts())[0]);
  rule.operands = {f.lhs, f.rhs, f.counts};
  rule.results = {f.out};
  return rule;
}

// Expert parallelism's exchanges move rows between the ranks of an ep group, which the
// propagation does not see: no dimension has a factor, so each operand and result keeps the
// sharding its other ops give it (the rows in expert order their tokens' split over dp; the
// received rows, one rank's already, none; the counts whole).
static FactorRule opaqueRule(Operation *op) {
  FactorRule rule;
  for (Value v : op->getOperands())
    rule.operands.push_back(FactorRule::Tensor(shapeOf(v).size()));
  for (Value v : op->getResults())
    rule.results.push_back(FactorRule::Tensor(shapeOf(v).size()));
  return rule;
}

FactorRule MoeExchangeCountsOp::getFactorRule() { return opaqueRule(*this); }
FactorRule MoeDispatchOp::getFactorRule() { return opaqueRule(*this); }
FactorRule MoeCombineOp::getFactorRule() { return opaqueRule(*this); }

FactorRule MoeRouteGradOp::getFactorRule() {
  FactorRule rule;
  ArrayRef<int64_t> p = shapeOf(getProbs());
  const FactorRule::Dim tokens = dimOf(rule, p[0]), experts = dimOf(rule, p[1], /*needReplication=*/true);
  const FactorRule::Dim choices = dimOf(rule, shapeOf(getWeights())[1], /*needReplication=*/true);
  rule.operands = {{tokens, experts}, {tokens, choices}, {tokens, experts}, {tokens, choices}, {tokens, choices}};
  rule.results = {{tokens, experts}};
  return rule;
}

// Each choice's dot product sums over the hidden size.
FactorRule MoeRowDotOp::getFactorRule() {
  FactorRule rule;
  MoeFactors f = moeFactors(rule, getRows(), shapeOf(getTokens())[1]);
  rule.operands = {{f.tokens, f.hidden}, f.expertRows(f.hidden), f.perChoice()};
  rule.results = {f.perChoice()};
  return rule;
}

// The weights' gradients sum over the rows.
FactorRule GroupedMatmulWeightGradOp::getFactorRule() {
  FactorRule rule;
  GroupedGemmFactors f =
      groupedGemmFactors(rule, shapeOf(getLhs()), shapeOf(getResult()), getTranspose(), shapeOf(getCounts())[0]);
  rule.operands = {f.lhs, f.out, f.counts};
  rule.results = {f.rhs};
  return rule;
}

// A router's load sums over the tokens (each rank's load is its own tokens').
FactorRule RouterLoadOp::getFactorRule() {
  FactorRule rule;
  ArrayRef<int64_t> p = shapeOf(getProbs());
  const FactorRule::Dim tokens = dimOf(rule, p[0]), experts = dimOf(rule, p[1]);
  rule.operands = {{tokens, experts}, {experts}};
  rule.results = {{dimOf(rule, 2, /*needReplication=*/true), experts}};
  return rule;
}

FactorRule RouterLoadGradOp::getFactorRule() {
  FactorRule rule;
  ArrayRef<int64_t> r = shapeOf(getResult());
  const FactorRule::Dim tokens = dimOf(rule, r[0]), experts = dimOf(rule, r[1]);
  rule.operands = {{dimOf(rule, 2, /*needReplication=*/true), experts}};
  rule.results = {{tokens, experts}};
  return rule;
}

// A sum over the experts of the two rows' product.
FactorRule LoadBalancingLossOp::getFactorRule() {
  FactorRule rule;
  const FactorRule::Dim rows = dimOf(rule, 2, /*needReplication=*/true), experts = dimOf(rule, shapeOf(getLoad())[1]);
  rule.operands = {{rows, experts}};
  rule.results = {{}};
  return rule;
}

FactorRule LoadBalancingLossGradOp::getFactorRule() {
  FactorRule rule;
  const FactorRule::Tensor load = {dimOf(rule, 2, /*needReplication=*/true), dimOf(rule, shapeOf(getLoad())[1])};
  rule.operands = {{}, load};
  rule.results = {load};
  return rule;
}

// Every tensor-parallel rank records the same counts (the experts' tokens are whole there).
FactorRule RecordExpertLoadOp::getFactorRule() {
  FactorRule rule;
  rule.operands = {{dimOf(rule, shapeOf(getCounts())[0], /*needReplication=*/true)}};
  return rule;
}

FactorRule MetricOp::getFactorRule() {
  FactorRule rule;
  rule.operands = {{}};
  return rule;
}

// Each token's row by its own gate: the hidden size free, the gate's a sum over it in the gradient.
FactorRule GateRowsOp::getFactorRule() {
  FactorRule rule;
  ArrayRef<int64_t> x = shapeOf(getInput());
  const FactorRule::Dim tokens = dimOf(rule, x[0]), hidden = dimOf(rule, x[1]);
  rule.operands = {{tokens, hidden}, {tokens, {}}};
  rule.results = {{tokens, hidden}};
  return rule;
}

FactorRule GateRowsGradOp::getFactorRule() {
  FactorRule rule;
  ArrayRef<int64_t> x = shapeOf(getInput());
  const FactorRule::Dim tokens = dimOf(rule, x[0]), hidden = dimOf(rule, x[1]);
  rule.operands = {{tokens, hidden}, {tokens, hidden}, {tokens, {}}};
  rule.results = {{tokens, hidden}, {tokens, {}}};
  return rule;
}

// A mean over the tokens of each token's logsumexp over the experts (whole).
FactorRule RouterZLossOp::getFactorRule() {
  FactorRule rule;
  ArrayRef<int64_t> l = shapeOf(getLogits());
  rule.operands = {{dimOf(rule, l[0]), dimOf(rule, l[1], /*needReplication=*/true)}};
  rule.results = {{}};
  return rule;
}

FactorRule RouterZLossGradOp::getFactorRule() {
  FactorRule rule;
  ArrayRef<int64_t> l = shapeOf(getLogits());
  const FactorRule::Tensor logits = {dimOf(rule, l[0]), dimOf(rule, l[1], /*needReplication=*/true)};
  rule.operands = {{}, logits};
  rule.results = {logits};
  return rule;
}
