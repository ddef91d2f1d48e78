// Verifiers of the mixture-of-experts ops (TxMoeOps.td): each names the operand, the shape found
// and the shape expected.
#include "tx/TxOps.h"
#include "tx/TxVerifyUtils.h"

using namespace mlir;
using namespace megac::tx;
using namespace megac::tx::verify;

namespace {

/// [tokens, k] choices (experts, rows, weights) of `tokens` tokens.
LogicalResult expectChoices(Operation *op, StringRef what, Value v, int64_t tokens, int64_t k) {
  if (failed(expectRank(op, what, v, 2, "[tokens, k]")))
    return failure();
  return expectShape(op, what, shapeOf(v), {tokens, k}, "one entry per token and choice");
}

/// Rows in expert order ([tokens x k, width]) and the [tokens, k] places of the choices in them.
LogicalResult expectExpertRows(Operation *op, StringRef what, Value expertRows, Value rows) {
  if (failed(expectRank(op, "rows", rows, 2, "[tokens, k]")) ||
      failed(expectRank(op, what, expertRows, 2, "[tokens x k, hidden]")))
    return failure();
  const int64_t choices = shapeOf(rows)[0] * shapeOf(rows)[1];
  if (shapeOf(expertRows)[0] != choices)
    return op->emitOpError() << what << " has " << shapeOf(expertRows)[0] << " rows but rows "
                             << shapeString(shapeOf(rows)) << " places " << choices << " choices";
  return success();
}

/// A grouped GEMM's weights [experts, K, N] ([experts, N, K] transposed) against its counts.
LogicalResult expectExpertWeights(Operation *op, StringRef what, Value weights, Value counts) {
  if (failed(expectRank(op, what, weights, 3, "[experts, K, N]")) ||
      failed(expectRank(op, "counts", counts, 1, "[experts]")))
    return failure();
  // One count per expert, or (expert parallelism) per expert of each sending rank.
  const int64_t experts = shapeOf(weights)[0], segments = shapeOf(counts)[0];
  if (experts < 1 || segments % experts != 0)
    return op->emitOpError() << what << " " << shapeString(shapeOf(weights)) << " holds " << experts
                             << " experts but counts " << shapeString(shapeOf(counts)) << " counts " << segments
                             << " segments, not a multiple of them";
  return success();
}

} // namespace

LogicalResult MoeRouteOp::verify() {
  if (failed(expectRank(*this, "logits", getLogits(), 2, "[tokens, experts]")))
    return failure();
  const int64_t tokens = shapeOf(getLogits())[0], experts = shapeOf(getLogits())[1];
  if (getTopk() < 1 || static_cast<int64_t>(getTopk()) > experts)
    return emitOpError() << "topk is " << getTopk() << "; it must be between 1 and the " << experts << " experts";
  const int64_t k = static_cast<int64_t>(getTopk());
  if (failed(expectChoices(*this, "experts", getExperts(), tokens, k)) ||
      failed(expectChoices(*this, "weights", getWeights(), tokens, k)))
    return failure();
  return expectSameElementType(*this, "weights", getWeights(), tensorType(getLogits()).getElementType());
}

LogicalResult MoeDropOp::verify() {
  if (failed(expectRank(*this, "experts", getExperts(), 2, "[tokens, k]")) ||
      failed(expectShape(*this, "weights", shapeOf(getWeights()), shapeOf(getExperts()), "one weight per choice")))
    return failure();
  // Read signed: an attribute written negative must not pass as a huge unsigned count.
  const int64_t experts = getNumExpertsAttr().getInt(), capacity = getCapacityAttr().getInt();
  if (experts < 1)
    return emitOpError() << "has " << experts << " experts; it needs at least 1";
  if (capacity < 0 || capacity > shapeOf(getExperts())[0])
    return emitOpError() << "capacity is " << capacity << "; it must be between 0 and the "
                         << shapeOf(getExperts())[0] << " tokens (at or above them nothing is dropped)";
  return success();
}

LogicalResult MoeAssignOp::verify() {
  if (failed(expectRank(*this, "experts", getExperts(), 2, "[tokens, k]")) ||
      failed(expectRank(*this, "counts", getCounts(), 1, "[experts]")))
    return failure();
  return expectShape(*this, "rows", shapeOf(getRows()), shapeOf(getExperts()), "one row per choice");
}

/// tx.moe_scatter and tx.moe_gather: tokens [T, H] on one side, expert rows [T k, H] on the other.
template <typename Op> LogicalResult verifyRowMove(Op op, Value tokens, Value expertRows) {
  if (failed(expectExpertRows(op, "the rows in expert order", expertRows, op.getRows())) ||
      failed(expectRank(op, "the token rows", tokens, 2, "[tokens, hidden]")))
    return failure();
  ArrayRef<int64_t> rows = shapeOf(op.getRows());
  if (failed(expectShape(op, "the token rows", shapeOf(tokens), {rows[0], shapeOf(expertRows)[1]},
                         "one row per token, as wide as the rows in expert order")))
    return failure();
  if (op.getWeights() && failed(expectChoices(op, "weights", op.getWeights(), rows[0], rows[1])))
    return failure();
  return expectSameElementType(op, "result", op.getResult(), tensorType(op.getInput()).getElementType());
}

LogicalResult MoeScatterOp::verify() { return verifyRowMove(*this, getInput(), getResult()); }
LogicalResult MoeGatherOp::verify() { return verifyRowMove(*this, getResult(), getInput()); }

LogicalResult GroupedMatmulOp::verify() {
  if (failed(expectRank(*this, "lhs", getLhs(), 2, "[rows, K]")) ||
      failed(expectExpertWeights(*this, "rhs", getRhs(), getCounts())))
    return failure();
  ArrayRef<int64_t> lhs = shapeOf(getLhs()), rhs = shapeOf(getRhs());
  const int64_t k = getTransposeRhs() ? rhs[2] : rhs[1], n = getTransposeRhs() ? rhs[1] : rhs[2];
  if (lhs[1] != k)
    return emitOpError() << "contraction sizes differ: lhs " << shapeString(lhs) << " gives " << lhs[1] << ", rhs "
                         << shapeString(rhs) << (getTransposeRhs() ? " (transposed)" : "") << " gives " << k;
  return expectShape(*this, "result", shapeOf(getResult()), {lhs[0], n}, "[rows, N]");
}

/// One [m x k] by [k x n] product: the cost model's view of a grouped GEMM's experts together (the
/// experts' sizes are data; their FLOPs sum to this).
static GemmShape summedGemm(int64_t m, int64_t k, int64_t n) {
  GemmShape g;
  g.m = m;
  g.k = g.rhsContractSize = k;
  g.n = n;
  return g;
}

/// Every row once by its expert's [K, N] weight: [rows x K] by [K x N].
GemmShape GroupedMatmulOp::getGemmShape() {
  return summedGemm(shapeOf(getLhs())[0], shapeOf(getLhs())[1], shapeOf(getResult())[1]);
}

/// Each expert's K x N gradient summed over its rows: [K x rows] by [rows x N].
GemmShape GroupedMatmulWeightGradOp::getGemmShape() {
  return summedGemm(shapeOf(getLhs())[1], shapeOf(getLhs())[0], shapeOf(getGrad())[1]);
}

LogicalResult MoeRouteGradOp::verify() {
  if (failed(expectRank(*this, "probs", getProbs(), 2, "[tokens, experts]")))
    return failure();
  const int64_t tokens = shapeOf(getProbs())[0];
  const int64_t k = shapeOf(getWeights()).size() == 2 ? shapeOf(getWeights())[1] : 0;
  if (failed(expectChoices(*this, "weights", getWeights(), tokens, k)))
    return failure();
  return expectChoices(*this, "experts", getExperts(), tokens, k);
}

LogicalResult MoeRowDotOp::verify() {
  if (failed(expectExpertRows(*this, "expert_rows", getExpertRows(), getRows())) ||
      failed(expectRank(*this, "tokens", getTokens(), 2, "[tokens, hidden]")))
    return failure();
  ArrayRef<int64_t> rows = shapeOf(getRows());
  if (failed(expectShape(*this, "tokens", shapeOf(getTokens()), {rows[0], shapeOf(getExpertRows())[1]},
                         "one row per token, as wide as expert_rows")))
    return failure();
  return expectShape(*this, "result", shapeOf(getResult()), rows, "one dot product per choice");
}

LogicalResult GroupedMatmulWeightGradOp::verify() {
  if (failed(expectRank(*this, "lhs", getLhs(), 2, "[rows, K]")) ||
      failed(expectRank(*this, "grad", getGrad(), 2, "[rows, N]")) ||
      failed(expectExpertWeights(*this, "result", getResult(), getCounts())))
    return failure();
  ArrayRef<int64_t> lhs = shapeOf(getLhs()), grad = shapeOf(getGrad());
  if (lhs[0] != grad[0])
    return emitOpError() << "lhs " << shapeString(lhs) << " and grad " << shapeString(grad)
                         << " must have the same rows";
  const int64_t experts = shapeOf(getResult())[0];
  SmallVector<int64_t> expected = getTranspose() ? SmallVector<int64_t>{experts, grad[1], lhs[1]}
                                                 : SmallVector<int64_t>{experts, lhs[1], grad[1]};
  return expectShape(*this, "result", shapeOf(getResult()), expected,
                     getTranspose() ? "[experts, N, K]" : "[experts, K, N]");
}

/// tx.moe_exchange_counts, tx.moe_dispatch, tx.moe_combine: the experts' counts split evenly
/// over `ranks` ranks.
static LogicalResult expectExpertCounts(Operation *op, Value counts, int64_t ranks) {
  if (failed(expectRank(op, "counts", counts, 1, "[experts]")))
    return failure();
  const int64_t experts = shapeOf(counts)[0];
  if (ranks < 1 || experts % ranks != 0)
    return op->emitOpError() << "the " << experts << " experts do not split over " << ranks
                             << " expert-parallel ranks";
  return success();
}

LogicalResult MoeExchangeCountsOp::verify() {
  return expectExpertCounts(*this, getCounts(), static_cast<int64_t>(getRanks()));
}

/// The rows in expert order ([tokens x k, hidden]) on one side, the rows of this rank's experts
/// from every rank ([ranks x capacity, hidden]) on the other.
template <typename Op> static LogicalResult verifyExpertExchange(Op op, Value local, Value exchanged) {
  const int64_t ranks = static_cast<int64_t>(op.getRanks());
  if (failed(expectExpertCounts(op, op.getCounts(), ranks)) ||
      failed(expectShape(op, "received", shapeOf(op.getReceived()), shapeOf(op.getCounts()),
                         "one count per expert of each rank")) ||
      failed(expectRank(op, "the rows in expert order", local, 2, "[tokens x k, hidden]")) ||
      failed(expectRank(op, "the exchanged rows", exchanged, 2, "[ranks x capacity, hidden]")))
    return failure();
  ArrayRef<int64_t> l = shapeOf(local), x = shapeOf(exchanged);
  if (x[1] != l[1] || x[0] % ranks != 0)
    return op.emitOpError() << "the exchanged rows " << shapeString(x) << " must be " << ranks
                            << " ranks' equal shares of rows as wide as the " << shapeString(l) << " rows in expert order";
  return expectSameElementType(op, "result", op.getResult(), tensorType(op.getInput()).getElementType());
}

LogicalResult MoeDispatchOp::verify() { return verifyExpertExchange(*this, getInput(), getResult()); }
LogicalResult MoeCombineOp::verify() { return verifyExpertExchange(*this, getResult(), getInput()); }

LogicalResult RouterLoadOp::verify() {
  if (failed(expectRank(*this, "probs", getProbs(), 2, "[tokens, experts]")))
    return failure();
  const int64_t experts = shapeOf(getProbs())[1];
  if (failed(expectShape(*this, "counts", shapeOf(getCounts()), {experts}, "one count per expert")))
    return failure();
  return expectShape(*this, "result", shapeOf(getResult()), {2, experts}, "counts, then summed probabilities");
}

LogicalResult RecordExpertLoadOp::verify() { return expectRank(*this, "counts", getCounts(), 1, "[experts]"); }

LogicalResult LoadBalancingLossOp::verify() {
  if (failed(expectRank(*this, "load", getLoad(), 2, "[2, experts]")))
    return failure();
  if (shapeOf(getLoad())[0] != 2)
    return emitOpError() << "load " << shapeString(shapeOf(getLoad())) << " must have 2 rows (counts, probabilities)";
  if (!(getScale().convertToDouble() > 0.0))
    return emitOpError() << "scale is " << getScale().convertToDouble() << "; it must be positive";
  return success();
}

LogicalResult RouterLoadGradOp::verify() {
  if (failed(expectRank(*this, "grad", getGrad(), 2, "[2, experts]")) ||
      failed(expectRank(*this, "result", getResult(), 2, "[tokens, experts]")))
    return failure();
  if (shapeOf(getResult())[1] != shapeOf(getGrad())[1])
    return emitOpError() << "result " << shapeString(shapeOf(getResult())) << " and grad "
                         << shapeString(shapeOf(getGrad())) << " must have the same experts";
  return success();
}

LogicalResult GateRowsOp::verify() {
  if (failed(expectRank(*this, "input", getInput(), 2, "[tokens, hidden]")))
    return failure();
  return expectShape(*this, "gate", shapeOf(getGate()), {shapeOf(getInput())[0], 1}, "one logit per token");
}

LogicalResult RouterZLossOp::verify() {
  return expectRank(*this, "logits", getLogits(), 2, "[tokens, experts]");
}
