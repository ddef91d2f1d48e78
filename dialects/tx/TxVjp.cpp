// Vector-Jacobian products of the forward `tx` ops: each op builds the ops that turn the
// cotangents of its results into cotangents of its operands. Non-differentiable operands
// (token ids, labels) get a null value.
#include "tx/TxOps.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace megac::tx;

namespace {

RankedTensorType typeWithShape(Value like, ArrayRef<int64_t> shape) {
  return RankedTensorType::get(shape, cast<RankedTensorType>(like.getType()).getElementType());
}

ArrayRef<int64_t> shapeOf(Value v) { return cast<RankedTensorType>(v.getType()).getShape(); }

Value reshape(OpBuilder &b, Location loc, Value v, ArrayRef<int64_t> shape) {
  if (shapeOf(v) == shape)
    return v;
  return ReshapeOp::create(b, loc, typeWithShape(v, shape), v);
}

/// op(lhs) op(rhs), stored with the element type of `primal`, the value it is the cotangent of
/// (autocast: an fp32 weight's gradient from 16-bit activations is accumulated and kept in fp32),
/// times `scale` when given (the forward's: both gradients of a scaled product carry it).
Value matmul(OpBuilder &b, Location loc, Value lhs, Value rhs, bool transposeLhs, bool transposeRhs, Value primal,
             FloatAttr scale = {}) {
  ArrayRef<int64_t> l = shapeOf(lhs), r = shapeOf(rhs);
  int64_t m = transposeLhs ? l.back() : l[l.size() - 2];
  int64_t n = transposeRhs ? r[r.size() - 2] : r.back();
  SmallVector<int64_t> shape(l.drop_back(2));
  shape.append({m, n});
  return MatmulOp::create(b, loc, typeWithShape(primal, shape), lhs, rhs,
                          transposeLhs ? b.getUnitAttr() : UnitAttr(),
                          transposeRhs ? b.getUnitAttr() : UnitAttr(), scale);
}

/// The cotangent of a value broadcast to `grad`'s shape: summed back to `like`'s shape (and
/// type: an fp32 bias's gradient from a 16-bit one is summed in fp32).
Value sumToShapeOf(OpBuilder &b, Location loc, Value grad, Value like) {
  if (grad.getType() == like.getType())
    return grad;
  return ReduceSumOp::create(b, loc, like.getType(), grad);
}

} // namespace

SmallVector<Value> EmbeddingOp::buildVjp(OpBuilder &b, ValueRange cot) {
  Value table = EmbeddingGradOp::create(b, getLoc(), getTable().getType(), cot[0], getIds(), UnitAttr());
  return {table, nullptr};
}

/// C = op(A) op(B). dop(A) = dC op(B)^T and dop(B) = op(A)^T dC, with the transposes folded
/// into the matmul flags. A weight shared by every batch entry gets its gradient from one
/// matmul over the flattened batch.
SmallVector<Value> MatmulOp::buildVjp(OpBuilder &b, ValueRange cot) {
  Location loc = getLoc();
  Value dc = cot[0], a = getLhs(), w = getRhs();
  FloatAttr s = getScaleAttr();
  bool ta = getTransposeLhs(), tb = getTransposeRhs();
  if (shapeOf(w).size() == 2 && shapeOf(a).size() > 2) {
    if (ta) {
      emitOpError("autodiff does not handle transpose_lhs with a broadcast rhs");
      return {};
    }
    Value da = matmul(b, loc, dc, w, false, !tb, a, s);
    const GemmShape g = getGemmShape(); // the batch folded into its rows
    Value aFlat = reshape(b, loc, a, {g.m, g.k});
    Value dcFlat = reshape(b, loc, dc, {g.m, g.n});
    Value dw = tb ? matmul(b, loc, dcFlat, aFlat, true, false, w, s) : matmul(b, loc, aFlat, dcFlat, true, false, w, s);
    return {da, dw};
  }
  Value da = ta ? matmul(b, loc, w, dc, tb, true, a, s) : matmul(b, loc, dc, w, false, !tb, a, s);
  Value dw = tb ? matmul(b, loc, dc, a, true, ta, w, s) : matmul(b, loc, a, dc, !ta, false, w, s);
  return {da, dw};
}

/// The weight is frozen: megac-autodiff asks nothing of this gradient and erases it.
SmallVector<Value> Nf4DequantizeOp::buildVjp(OpBuilder &b, ValueRange cot) { return {cot[0]}; }

SmallVector<Value> AddOp::buildVjp(OpBuilder &b, ValueRange cot) {
  return {cot[0], sumToShapeOf(b, getLoc(), cot[0], getRhs())};
}

SmallVector<Value> MulOp::buildVjp(OpBuilder &b, ValueRange cot) {
  Location loc = getLoc();
  Value dl = MulOp::create(b, loc, cot[0], getRhs());
  Value dr = MulOp::create(b, loc, cot[0], getLhs());
  return {dl, sumToShapeOf(b, loc, dr, getRhs())};
}

SmallVector<Value> ReshapeOp::buildVjp(OpBuilder &b, ValueRange cot) {
  return {reshape(b, getLoc(), cot[0], shapeOf(getInput()))};
}

SmallVector<Value> SliceOp::buildVjp(OpBuilder &b, ValueRange cot) {
  return {PadOp::create(b, getLoc(), getInput().getType(), cot[0], getDim(), getOffset())};
}

SmallVector<Value> LayerNormOp::buildVjp(OpBuilder &b, ValueRange cot) {
  auto grad = LayerNormGradOp::create(b, getLoc(), cot[0], getInput(), getWeight(), getEpsilon());
  return {grad.getInputGrad(), grad.getWeightGrad(), grad.getBiasGrad()};
}

SmallVector<Value> RmsNormOp::buildVjp(OpBuilder &b, ValueRange cot) {
  auto grad = RmsNormGradOp::create(b, getLoc(), cot[0], getInput(), getWeight(), getEpsilon(), getWeightOffsetAttr());
  return {grad.getInputGrad(), grad.getWeightGrad()};
}

/// Linear: the cotangent scaled by the same factor.
SmallVector<Value> ScaleOp::buildVjp(OpBuilder &b, ValueRange cot) {
  return {ScaleOp::create(b, getLoc(), cot[0], getFactorAttr())};
}

SmallVector<Value> GeluOp::buildVjp(OpBuilder &b, ValueRange cot) {
  return {GeluGradOp::create(b, getLoc(), cot[0], getInput(), getApproximation())};
}

SmallVector<Value> SwigluOp::buildVjp(OpBuilder &b, ValueRange cot) {
  auto grad = SwigluGradOp::create(b, getLoc(), cot[0], getGate(), getUp());
  return {grad.getGateGrad(), grad.getUpGrad()};
}

/// The same mask scales the gradient: dropout with the same rate and stream.
SmallVector<Value> DropoutOp::buildVjp(OpBuilder &b, ValueRange cot) {
  return {DropoutOp::create(b, getLoc(), cot[0], getRate(), getStream())};
}

/// A rotation's transpose is the rotation the other way.
SmallVector<Value> RopeOp::buildVjp(OpBuilder &b, ValueRange cot) {
  return {RopeOp::create(b, getLoc(), cot[0].getType(), cot[0], getThetaAttr(),
                         getInverse() ? UnitAttr() : b.getUnitAttr(), getPositionDivisorAttr())};
}

SmallVector<Value> AttentionOp::buildVjp(OpBuilder &b, ValueRange cot) {
  auto grad = AttentionGradOp::create(b, getLoc(), cot[0], getQuery(), getKey(), getValue(),
                                      getCausal(), getWindowAttr(), getScale(), getDropoutAttr());
  return {grad.getQueryGrad(), grad.getKeyGrad(), grad.getValueGrad()};
}

SmallVector<Value> CrossEntropyOp::buildVjp(OpBuilder &b, ValueRange cot) {
  Value logits = CrossEntropyGradOp::create(b, getLoc(), getLogits().getType(), cot[0], getLogits(), getLabels(),
                                            getVocabSizeAttr(), getIgnoreIndexAttr());
  return {logits, nullptr};
}

// ---- mixture of experts -------------------------------------------------------------------------

/// The logits' cotangent from the probabilities' and the weights'; the choice of experts has none.
SmallVector<Value> MoeRouteOp::buildVjp(OpBuilder &b, ValueRange cot) {
  Value d = MoeRouteGradOp::create(b, getLoc(), getLogits().getType(), cot[0], cot[2], getProbs(), getExperts(),
                                   getWeights(), getPreSoftmaxAttr());
  return {d};
}

/// A copy to the choices' rows (times a weight): the rows summed back (weighted), and each
/// weight's cotangent the dot product of its token's row with its row's cotangent.
SmallVector<Value> MoeScatterOp::buildVjp(OpBuilder &b, ValueRange cot) {
  Value input = MoeGatherOp::create(b, getLoc(), getInput().getType(), cot[0], getRows(), getWeights());
  if (!getWeights())
    return {input, nullptr};
  Value weights = MoeRowDotOp::create(b, getLoc(), getWeights().getType(), getInput(), cot[0], getRows());
  return {input, nullptr, weights};
}

SmallVector<Value> MoeGatherOp::buildVjp(OpBuilder &b, ValueRange cot) {
  Value input = MoeScatterOp::create(b, getLoc(), getInput().getType(), cot[0], getRows(), getWeights());
  if (!getWeights())
    return {input, nullptr};
  Value weights = MoeRowDotOp::create(b, getLoc(), getWeights().getType(), cot[0], getInput(), getRows());
  return {input, nullptr, weights};
}

/// Which choices an expert keeps is not differentiable: the weights' gradient flows through the
/// frontend's product with the mask, not through the decision.
SmallVector<Value> MoeDropOp::buildVjp(OpBuilder &, ValueRange) { return {nullptr, nullptr}; }

/// Rows sent to the experts' ranks come back the way they went, and the other way round.
SmallVector<Value> MoeDispatchOp::buildVjp(OpBuilder &b, ValueRange cot) {
  return {MoeCombineOp::create(b, getLoc(), getInput().getType(), cot[0], getCounts(), getReceived(), getRanksAttr()),
          nullptr, nullptr};
}

SmallVector<Value> MoeCombineOp::buildVjp(OpBuilder &b, ValueRange cot) {
  return {MoeDispatchOp::create(b, getLoc(), getInput().getType(), cot[0], getCounts(), getReceived(), getRanksAttr()),
          nullptr, nullptr};
}

/// Per expert, C = A W: dA = dC W^T (the transpose flag flipped) and dW = A^T dC, kept in the
/// weight's type.
SmallVector<Value> GroupedMatmulOp::buildVjp(OpBuilder &b, ValueRange cot) {
  Value lhs = GroupedMatmulOp::create(b, getLoc(), getLhs().getType(), cot[0], getRhs(), getCounts(),
                                      getTransposeRhs() ? UnitAttr() : b.getUnitAttr());
  Value rhs = GroupedMatmulWeightGradOp::create(b, getLoc(), getRhs().getType(), getLhs(), cot[0], getCounts(),
                                                getTransposeRhsAttr());
  return {lhs, rhs, nullptr};
}

/// The probabilities' cotangent: row 1 of the load's for every token (the counts have none).
SmallVector<Value> RouterLoadOp::buildVjp(OpBuilder &b, ValueRange cot) {
  return {RouterLoadGradOp::create(b, getLoc(), getProbs().getType(), cot[0]), nullptr};
}

SmallVector<Value> LoadBalancingLossOp::buildVjp(OpBuilder &b, ValueRange cot) {
  return {LoadBalancingLossGradOp::create(b, getLoc(), cot[0], getLoad(), getScaleAttr())};
}

SmallVector<Value> GateRowsOp::buildVjp(OpBuilder &b, ValueRange cot) {
  auto grad = GateRowsGradOp::create(b, getLoc(), getInput().getType(), getGate().getType(), cot[0], getInput(),
                                     getGate());
  return {grad.getInputGrad(), grad.getGateGrad()};
}

SmallVector<Value> RouterZLossOp::buildVjp(OpBuilder &b, ValueRange cot) {
  return {RouterZLossGradOp::create(b, getLoc(), getLogits().getType(), cot[0], getLogits())};
}
