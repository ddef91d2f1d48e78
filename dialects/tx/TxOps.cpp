// Verifiers of the `tx` ops. Each message names the operand, the shape found and the shape
// expected, so a bad spec or a broken pass is easy to trace.
#include "tx/TxOps.h"
#include "tx/TxVerifyUtils.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace megac::tx;
using namespace megac::tx::verify;



//===----------------------------------------------------------------------===//

LogicalResult ParamOp::verify() {
  if (getName().empty())
    return emitOpError("needs a non-empty checkpoint name");
  ArrayRef<int64_t> shape = getType().getShape();
  if (shape.empty())
    return emitOpError() << "'" << getName() << "' must have rank >= 1, found a scalar";
  if (llvm::any_of(shape, [](int64_t d) { return d <= 0; }))
    return emitOpError() << "'" << getName() << "' has an empty dimension: " << shapeString(shape);
  if (getStd() && getStd()->convertToDouble() <= 0.0)
    return emitOpError() << "'" << getName() << "' has std " << getStd()->convertToDouble()
                         << "; it must be > 0";
  if (getStd() && getInit() != ParamInit::Normal)
    return emitOpError() << "'" << getName() << "' gives std for init '"
                         << stringifyParamInit(getInit()) << "'; only 'normal' takes one";
  bool splits = getRole() && (*getRole() == ParamRole::VocabEmbedding || *getRole() == ParamRole::ColumnParallelWeight ||
                              *getRole() == ParamRole::ColumnParallelBias || *getRole() == ParamRole::RowParallelWeight);
  if (splits && (!getParallelDim() || *getParallelDim() >= shape.size()))
    return emitOpError() << "'" << getName() << "' is a " << stringifyParamRole(*getRole())
                         << ", which tensor parallelism splits: it needs a parallel_dim below its rank " << shape.size();
  // The experts' weights: split over tensor parallelism by expert tensor parallelism (their
  // ffn dimension, never the experts').
  const bool expertSplit = getRole() && *getRole() == ParamRole::ExpertWeight && getParallelDim() &&
                           *getParallelDim() >= 1 && *getParallelDim() < shape.size();
  if (!splits && getParallelDim() && !expertSplit)
    return emitOpError() << "'" << getName() << "' has parallel_dim " << *getParallelDim() << " but its role ("
                         << (getRole() ? stringifyParamRole(*getRole()) : StringRef("none"))
                         << ") keeps it whole on every tensor-parallel rank";
  if (!getOffsets())
    return success();
  ArrayRef<int64_t> offsets = *getOffsets();
  ArrayRef<int64_t> full = *getFullShape();
  if (offsets.size() != shape.size() || full.size() != shape.size())
    return emitOpError() << "'" << getName() << "' block offsets " << shapeString(offsets)
                         << " and full shape " << shapeString(full) << " must have rank "
                         << shape.size() << " like the result " << shapeString(shape);
  for (auto [dim, offset] : llvm::enumerate(offsets))
    if (offset < 0 || offset > full[dim] || (!getPadded() && offset + shape[dim] > full[dim]))
      return emitOpError() << "'" << getName() << "' block " << shapeString(shape) << " at "
                           << shapeString(offsets) << " does not fit in the full shape "
                           << shapeString(full) << " (dimension " << dim << ")"
                           << (getPadded() ? "" : "; only a `padded` block may reach past it");
  return success();
}

LogicalResult EmbeddingOp::verify() {
  if (failed(expectRank(*this, "table", getTable(), 2, "[vocab, hidden]")))
    return failure();
  SmallVector<int64_t> expected(shapeOf(getIds()));
  expected.push_back(shapeOf(getTable())[1]);
  return expectShape(*this, "result", shapeOf(getResult()), expected,
                     "the ids' shape followed by the table's hidden size");
}

LogicalResult MatmulOp::verify() {
  ArrayRef<int64_t> lhs = shapeOf(getLhs()), rhs = shapeOf(getRhs());
  if (lhs.size() < 2)
    return emitOpError() << "lhs must have rank >= 2, found " << shapeString(lhs);
  if (rhs.size() != 2 && rhs.size() != lhs.size())
    return emitOpError() << "rhs must be a matrix or have the rank of lhs " << shapeString(lhs)
                         << ", found " << shapeString(rhs);
  const GemmShape g = getGemmShape();
  if (g.k != g.rhsContractSize)
    return emitOpError() << "contraction sizes differ: lhs " << shapeString(lhs) << " gives "
                         << g.k << ", rhs " << shapeString(rhs) << " gives " << g.rhsContractSize;
  if (rhs.size() == lhs.size() && lhs.drop_back(2) != rhs.drop_back(2))
    return emitOpError() << "batch dimensions differ: lhs " << shapeString(lhs) << ", rhs "
                         << shapeString(rhs);
  SmallVector<int64_t> expected(lhs.drop_back(2));
  expected.append({lhs[g.lhsRowDim], g.n});
  return expectShape(*this, "result", shapeOf(getResult()), expected);
}

GemmShape MatmulOp::getGemmShape() {
  return gemmShape(shapeOf(getLhs()), shapeOf(getRhs()), getTransposeLhs(), getTransposeRhs());
}

/// rhs must equal lhs or a trailing part of it.
static LogicalResult verifyBroadcastRhs(Operation *op, Value lhs, Value rhs) {
  ArrayRef<int64_t> l = shapeOf(lhs), r = shapeOf(rhs);
  if (r.size() > l.size() || l.take_back(r.size()) != r)
    return op->emitOpError() << "rhs has shape " << shapeString(r)
                             << " but expected the shape of lhs " << shapeString(l)
                             << " or a trailing part of it";
  return success();
}

LogicalResult AddOp::verify() { return verifyBroadcastRhs(*this, getLhs(), getRhs()); }
LogicalResult MulOp::verify() { return verifyBroadcastRhs(*this, getLhs(), getRhs()); }

LogicalResult ReshapeOp::verify() {
  RankedTensorType in = tensorType(getInput()), out = getType();
  if (in.getNumElements() != out.getNumElements())
    return emitOpError() << "cannot reshape " << shapeString(in.getShape()) << " ("
                         << in.getNumElements() << " elements) to " << shapeString(out.getShape())
                         << " (" << out.getNumElements() << " elements)";
  return expectSameElementType(*this, "result", getResult(), in.getElementType());
}

LogicalResult SliceOp::verify() {
  ArrayRef<int64_t> in = shapeOf(getInput()), out = shapeOf(getResult());
  int64_t dim = getDim(), offset = getOffset();
  if (dim < 0 || dim >= static_cast<int64_t>(in.size()))
    return emitOpError() << "dim " << dim << " is outside the input " << shapeString(in);
  SmallVector<int64_t> expected(in);
  expected[dim] = out.size() == in.size() ? out[dim] : -1;
  if (failed(expectShape(*this, "result", out, expected,
                         "the input's shape except along the sliced dimension")))
    return failure();
  if (offset < 0 || offset + out[dim] > in[dim])
    return emitOpError() << "slice [" << offset << ", " << offset + out[dim] << ") of dimension "
                         << dim << " does not fit in the input " << shapeString(in);
  return expectSameElementType(*this, "result", getResult(), tensorType(getInput()).getElementType());
}


LogicalResult LayerNormOp::verify() {
  if (failed(verifyNormVector(*this, "weight", getInput(), getWeight())) ||
      failed(verifyNormVector(*this, "bias", getInput(), getBias())))
    return failure();
  return verifyEpsilon(*this, getEpsilon());
}

LogicalResult RmsNormOp::verify() {
  if (failed(verifyNormVector(*this, "weight", getInput(), getWeight())) ||
      failed(verifyWeightOffset(*this, getWeightOffsetAttr())))
    return failure();
  return verifyEpsilon(*this, getEpsilon());
}

LogicalResult ScaleOp::verify() {
  const double factor = getFactor().convertToDouble();
  if (std::isfinite(factor) && std::abs(factor) <= 1e30)
    return success();
  return emitOpError() << "factor must be finite (at most 1e30 in size), found " << factor;
}

LogicalResult SwigluOp::verify() {
  if (getUp().getType() == getGate().getType())
    return success();
  return emitOpError() << "up has type " << getUp().getType() << " but expected "
                       << getGate().getType() << " (the type of gate)";
}

LogicalResult DropoutOp::verify() {
  if (failed(verifyDropoutRate(*this, getRateAttr())))
    return failure();
  if (getStream() > static_cast<uint64_t>(kMaxDropoutStream))
    return emitOpError() << "stream must be in [0, " << kMaxDropoutStream << "], found " << getStream();
  return success();
}

LogicalResult RopeOp::verify() {
  if (failed(expectRank(*this, "input", getInput(), 4, "[batch, seq, heads, head_dim]")))
    return failure();
  if (shapeOf(getInput())[3] % 2 != 0)
    return emitOpError() << "head_dim must be even to rotate pairs, found "
                         << shapeOf(getInput())[3];
  if (getTheta().convertToDouble() <= 0.0)
    return emitOpError() << "theta must be > 0, found " << getTheta().convertToDouble();
  if (std::optional<APFloat> divisor = getPositionDivisor();
      divisor && !(divisor->convertToDouble() > 0.0 && divisor->convertToDouble() <= 1e6))
    return emitOpError() << "positions_divided_by must be above 0 and at most 1e6, found "
                         << divisor->convertToDouble();
  return success();
}

LogicalResult AttentionOp::verify() {
  if (failed(verifyDropoutRate(*this, getDropoutAttr())) ||
      failed(verifyAttentionWindow(*this, getWindowAttr(), getCausal())))
    return failure();
  if (failed(verifyAttentionOperands(*this, getQuery(), getKey(), getValue())))
    return failure();
  return expectShape(*this, "result", shapeOf(getResult()), shapeOf(getQuery()), "the shape of query");
}

AttentionShape AttentionOp::getAttentionShape() {
  return denseAttentionShape(shapeOf(getQuery()), shapeOf(getKey()), getCausal(), getWindow(), /*backward=*/false);
}

LogicalResult CrossEntropyOp::verify() {
  if (failed(verifyIgnoreIndex(*this, getIgnoreIndexAttr())))
    return failure();
  ArrayRef<int64_t> logits = shapeOf(getLogits());
  if (logits.size() < 2)
    return emitOpError() << "logits must be [..., vocab] with rank >= 2, found "
                         << shapeString(logits);
  return expectShape(*this, "labels", shapeOf(getLabels()), logits.drop_back(),
                     "the logits' shape without the vocab dimension");
}

#define GET_OP_CLASSES
#include "tx/TxOps.cpp.inc"
