// Each tx op's reference semantics for the double-precision interpreter (lib/Eval,
// megac-gradcheck): ReferenceEvalOpInterface. It checks what the op's verifier cannot (ids in
// range, a dropout rate the interpreter can reproduce) and calls the op's reference kernel
// (include/megac/Eval/Kernels.h), in the op order of TxVjp.cpp and TxKernelCalls.cpp.
#include "megac/Eval/Kernels.h"
#include "tx/TxOps.h"

using namespace mlir;
using namespace megac::eval;
using namespace megac::tx;

namespace {
using Results = SmallVector<Tensor>;

Shape shapeOf(Value v) {
  ArrayRef<int64_t> s = cast<RankedTensorType>(v.getType()).getShape();
  return Shape(s.begin(), s.end());
}

/// Token ids and labels index a table or a vocabulary: out of range is an input error.
/// Ids in [0, bound), or `ignored` (a loss's ignored label).
LogicalResult checkRange(Operation *op, StringRef what, const Tensor &ids, int64_t bound,
                         std::optional<uint64_t> ignored = std::nullopt) {
  for (int64_t id : ids.ints)
    if ((id < 0 || id >= bound) && !(ignored && id == int64_t(*ignored)))
      return op->emitOpError() << what << " " << id << " is outside [0, " << bound << ")";
  return success();
}

Results one(Tensor t) {
  Results r;
  r.push_back(std::move(t));
  return r;
}
} // namespace

// ---- forward ops ------------------------------------------------------------------------------

FailureOr<Results> EmbeddingOp::evaluate(ArrayRef<const Tensor *> in) {
  if (failed(checkRange(*this, "token id", *in[1], in[0]->shape[0])))
    return failure();
  return one(embedding(*in[0], *in[1]));
}

FailureOr<Results> MatmulOp::evaluate(ArrayRef<const Tensor *> in) {
  Tensor product = matmul(*in[0], *in[1], getTransposeLhs(), getTransposeRhs());
  if (getScale())
    for (double &v : product.data)
      v *= getScale()->convertToDouble();
  return one(std::move(product));
}

FailureOr<Results> AddOp::evaluate(ArrayRef<const Tensor *> in) {
  return one(broadcastAdd(*in[0], *in[1]));
}

FailureOr<Results> MulOp::evaluate(ArrayRef<const Tensor *> in) {
  return one(broadcastMul(*in[0], *in[1]));
}

FailureOr<Results> ReshapeOp::evaluate(ArrayRef<const Tensor *> in) {
  return one(reshape(*in[0], shapeOf(getResult())));
}

FailureOr<Results> SliceOp::evaluate(ArrayRef<const Tensor *> in) {
  int64_t size = shapeOf(getResult())[getDim()];
  return one(slice(*in[0], getDim(), getOffset(), size));
}

FailureOr<Results> LayerNormOp::evaluate(ArrayRef<const Tensor *> in) {
  return one(layerNorm(*in[0], *in[1], *in[2], getEpsilon().convertToDouble()));
}

FailureOr<Results> RmsNormOp::evaluate(ArrayRef<const Tensor *> in) {
  return one(rmsNorm(*in[0], *in[1], getEpsilon().convertToDouble(),
                     getWeightOffset() ? getWeightOffset()->convertToDouble() : 0.0));
}

FailureOr<Results> ScaleOp::evaluate(ArrayRef<const Tensor *> in) {
  Tensor y = *in[0];
  for (double &v : y.data)
    v *= getFactor().convertToDouble();
  return one(std::move(y));
}

FailureOr<Results> GeluOp::evaluate(ArrayRef<const Tensor *> in) {
  return one(gelu(*in[0], getApproximation() == GeluApproximation::Tanh));
}

FailureOr<Results> SwigluOp::evaluate(ArrayRef<const Tensor *> in) {
  return one(swiglu(*in[0], *in[1]));
}

FailureOr<Results> DropoutOp::evaluate(ArrayRef<const Tensor *> in) {
  // The mask depends on the runtime's random stream; only the identity is checkable.
  if (getRate().convertToDouble() != 0.0)
    return emitOpError("with a nonzero rate cannot be evaluated by the reference "
                       "interpreter: use rate 0.0 when checking gradients");
  return one(*in[0]);
}

FailureOr<Results> RopeOp::evaluate(ArrayRef<const Tensor *> in) {
  return one(rope(*in[0], getTheta().convertToDouble(), getInverse(),
                  getPositionDivisor() ? getPositionDivisor()->convertToDouble() : 1.0));
}

FailureOr<Results> AttentionOp::evaluate(ArrayRef<const Tensor *> in) {
  return one(attention(*in[0], *in[1], *in[2], getCausal(), int64_t(getWindow().value_or(0)),
                       getScale().convertToDouble()));
}

FailureOr<Results> CrossEntropyOp::evaluate(ArrayRef<const Tensor *> in) {
  if (failed(checkRange(*this, "label", *in[1], in[0]->lastDim(), getIgnoreIndex())))
    return failure();
  return one(crossEntropy(*in[0], *in[1], getIgnoreIndex() ? std::optional<int64_t>(int64_t(*getIgnoreIndex()))
                                                          : std::nullopt));
}

// ---- backward ops -----------------------------------------------------------------------------

FailureOr<Results> ZerosOp::evaluate(ArrayRef<const Tensor *>) {
  return one(Tensor::zeros(shapeOf(getResult())));
}

FailureOr<Results> ReduceSumOp::evaluate(ArrayRef<const Tensor *> in) {
  return one(reduceSum(*in[0], shapeOf(getResult())));
}

FailureOr<Results> PadOp::evaluate(ArrayRef<const Tensor *> in) {
  return one(pad(*in[0], getDim(), getOffset(), shapeOf(getResult())));
}

FailureOr<Results> EmbeddingGradOp::evaluate(ArrayRef<const Tensor *> in) {
  int64_t vocab = shapeOf(getResult())[0];
  if (failed(checkRange(*this, "token id", *in[1], vocab)))
    return failure();
  return one(embeddingGrad(*in[0], *in[1], vocab));
}

FailureOr<Results> LayerNormGradOp::evaluate(ArrayRef<const Tensor *> in) {
  NormGrads g = layerNormGrad(*in[0], *in[1], *in[2], getEpsilon().convertToDouble());
  return Results{std::move(g.input), std::move(g.weight), std::move(g.bias)};
}

FailureOr<Results> RmsNormGradOp::evaluate(ArrayRef<const Tensor *> in) {
  NormGrads g = rmsNormGrad(*in[0], *in[1], *in[2], getEpsilon().convertToDouble(),
                            getWeightOffset() ? getWeightOffset()->convertToDouble() : 0.0);
  return Results{std::move(g.input), std::move(g.weight)};
}

FailureOr<Results> GeluGradOp::evaluate(ArrayRef<const Tensor *> in) {
  return one(geluGrad(*in[0], *in[1], getApproximation() == GeluApproximation::Tanh));
}

FailureOr<Results> SwigluGradOp::evaluate(ArrayRef<const Tensor *> in) {
  SwigluGrads g = swigluGrad(*in[0], *in[1], *in[2]);
  return Results{std::move(g.gate), std::move(g.up)};
}

FailureOr<Results> AttentionGradOp::evaluate(ArrayRef<const Tensor *> in) {
  AttentionGrads g = attentionGrad(*in[0], *in[1], *in[2], *in[3], getCausal(), int64_t(getWindow().value_or(0)),
                                   getScale().convertToDouble());
  return Results{std::move(g.query), std::move(g.key), std::move(g.value)};
}

FailureOr<Results> CrossEntropyGradOp::evaluate(ArrayRef<const Tensor *> in) {
  if (failed(checkRange(*this, "label", *in[2], in[1]->lastDim(), getIgnoreIndex())))
    return failure();
  return one(crossEntropyGrad(*in[0], *in[1], *in[2],
                              getIgnoreIndex() ? std::optional<int64_t>(int64_t(*getIgnoreIndex())) : std::nullopt));
}

// ---- mixture of experts -------------------------------------------------------------------------

FailureOr<Results> MoeRouteOp::evaluate(ArrayRef<const Tensor *> in) {
  Routing r = moeRoute(*in[0], int64_t(getTopk()), getPreSoftmax());
  return Results{std::move(r.probs), std::move(r.experts), std::move(r.weights)};
}

FailureOr<Results> MoeDropOp::evaluate(ArrayRef<const Tensor *> in) {
  const int64_t experts = static_cast<int64_t>(getNumExperts());
  if (failed(checkRange(*this, "expert", *in[0], experts)))
    return failure();
  Dropping d = moeDrop(*in[0], *in[1], experts, static_cast<int64_t>(getCapacity()), getByPosition());
  return Results{std::move(d.kept), std::move(d.mask)};
}

FailureOr<Results> MoeAssignOp::evaluate(ArrayRef<const Tensor *> in) {
  const int64_t experts = shapeOf(getCounts())[0];
  const uint64_t dropped = static_cast<uint64_t>(-1); // tx.moe_drop's mark
  if (failed(checkRange(*this, "expert", *in[0], experts, dropped)))
    return failure();
  Assignment a = moeAssign(*in[0], experts);
  return Results{std::move(a.rows), std::move(a.counts)};
}

/// Rows are tx.moe_assign's: each in [0, tokens x k), each once.
static LogicalResult checkRows(Operation *op, const Tensor &rows) {
  std::vector<bool> seen(rows.numel(), false);
  for (int64_t r : rows.ints) {
    if (r < 0 || r >= rows.numel() || seen[r])
      return op->emitOpError() << "row " << r << " is outside [0, " << rows.numel() << ") or given twice";
    seen[r] = true;
  }
  return success();
}

FailureOr<Results> MoeScatterOp::evaluate(ArrayRef<const Tensor *> in) {
  if (failed(checkRows(*this, *in[1])))
    return failure();
  return one(moeScatter(*in[0], *in[1], in.size() > 2 ? in[2] : nullptr));
}

FailureOr<Results> MoeGatherOp::evaluate(ArrayRef<const Tensor *> in) {
  if (failed(checkRows(*this, *in[1])))
    return failure();
  return one(moeGather(*in[0], *in[1], in.size() > 2 ? in[2] : nullptr));
}

/// Counts are tx.moe_assign's: non-negative, the rows in all.
static LogicalResult checkCounts(Operation *op, const Tensor &counts, int64_t rows) {
  int64_t sum = 0;
  for (int64_t c : counts.ints) {
    if (c < 0)
      return op->emitOpError() << "count " << c << " is negative";
    sum += c;
  }
  if (sum != rows)
    return op->emitOpError() << "counts sum to " << sum << " but there are " << rows << " rows";
  return success();
}

FailureOr<Results> GroupedMatmulOp::evaluate(ArrayRef<const Tensor *> in) {
  if (failed(checkCounts(*this, *in[2], in[0]->shape[0])))
    return failure();
  return one(groupedMatmul(*in[0], *in[1], *in[2], getTransposeRhs()));
}

FailureOr<Results> MoeRouteGradOp::evaluate(ArrayRef<const Tensor *> in) {
  if (failed(checkRange(*this, "expert", *in[3], in[2]->shape[1])))
    return failure();
  return one(moeRouteGrad(*in[0], *in[1], *in[2], *in[3], *in[4], getPreSoftmax()));
}

FailureOr<Results> MoeRowDotOp::evaluate(ArrayRef<const Tensor *> in) {
  if (failed(checkRows(*this, *in[2])))
    return failure();
  return one(moeRowDot(*in[0], *in[1], *in[2]));
}

FailureOr<Results> GroupedMatmulWeightGradOp::evaluate(ArrayRef<const Tensor *> in) {
  if (failed(checkCounts(*this, *in[2], in[0]->shape[0])))
    return failure();
  return one(groupedMatmulWeightGrad(*in[0], *in[1], *in[2], shapeOf(getResult())[0], getTranspose()));
}

FailureOr<Results> RouterLoadOp::evaluate(ArrayRef<const Tensor *> in) {
  return one(routerLoad(*in[0], *in[1]));
}

FailureOr<Results> RouterLoadGradOp::evaluate(ArrayRef<const Tensor *> in) {
  return one(routerLoadGrad(*in[0], shapeOf(getResult())[0]));
}

FailureOr<Results> LoadBalancingLossOp::evaluate(ArrayRef<const Tensor *> in) {
  return one(loadBalancingLoss(*in[0], getScale().convertToDouble()));
}

FailureOr<Results> LoadBalancingLossGradOp::evaluate(ArrayRef<const Tensor *> in) {
  return one(loadBalancingLossGrad(*in[0], *in[1], getScale().convertToDouble()));
}

FailureOr<Results> GateRowsOp::evaluate(ArrayRef<const Tensor *> in) { return one(gateRows(*in[0], *in[1])); }

FailureOr<Results> GateRowsGradOp::evaluate(ArrayRef<const Tensor *> in) {
  GateRowsGrads g = gateRowsGrad(*in[0], *in[1], *in[2]);
  return Results{std::move(g.input), std::move(g.gate)};
}

FailureOr<Results> RouterZLossOp::evaluate(ArrayRef<const Tensor *> in) { return one(routerZLoss(*in[0])); }

FailureOr<Results> RouterZLossGradOp::evaluate(ArrayRef<const Tensor *> in) {
  return one(routerZLossGrad(*in[0], *in[1]));
}
