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
