// Verifiers of the backward `tx` ops. Autodiff builds these ops, so a failure here points at a
// VJP rule or a pass that rewrote shapes inconsistently.
#include "tx/TxOps.h"
#include "tx/TxVerifyUtils.h"

using namespace mlir;
using namespace megac::tx;
using namespace megac::tx::verify;

LogicalResult ParamGradOp::verify() {
  if (getParam().getDefiningOp<ParamOp>())
    return success();
  return emitOpError("param must be the value of a tx.param");
}

LogicalResult ReduceSumOp::verify() {
  ArrayRef<int64_t> in = shapeOf(getInput()), out = shapeOf(getResult());
  if (out.size() <= in.size() && in.take_back(out.size()) == out)
    return success();
  return emitOpError() << "result has shape " << shapeString(out)
                       << " but expected a trailing part of the input's shape " << shapeString(in);
}

LogicalResult PadOp::verify() {
  ArrayRef<int64_t> in = shapeOf(getInput()), out = shapeOf(getResult());
  int64_t dim = getDim(), offset = getOffset();
  if (dim < 0 || dim >= static_cast<int64_t>(out.size()))
    return emitOpError() << "dim " << dim << " is outside the result " << shapeString(out);
  SmallVector<int64_t> expected(out);
  expected[dim] = in.size() == out.size() ? in[dim] : -1;
  if (failed(expectShape(*this, "input", in, expected,
                         "the result's shape except along the padded dimension")))
    return failure();
  if (offset < 0 || offset + in[dim] > out[dim])
    return emitOpError() << "input placed at [" << offset << ", " << offset + in[dim]
                         << ") of dimension " << dim << " does not fit in " << shapeString(out);
  return success();
}

LogicalResult EmbeddingGradOp::verify() {
  if (failed(expectRank(*this, "result", getResult(), 2, "[vocab, hidden]")))
    return failure();
  SmallVector<int64_t> expected(shapeOf(getIds()));
  expected.push_back(shapeOf(getResult())[1]);
  return expectShape(*this, "grad", shapeOf(getGrad()), expected,
                     "the ids' shape followed by the table's hidden size");
}

LogicalResult LayerNormGradOp::verify() {
  if (failed(verifyNormVector(*this, "weight", getInput(), getWeight())))
    return failure();
  return verifyEpsilon(*this, getEpsilon());
}

LogicalResult RmsNormGradOp::verify() {
  if (failed(verifyNormVector(*this, "weight", getInput(), getWeight())) ||
      failed(verifyWeightOffset(*this, getWeightOffsetAttr())))
    return failure();
  return verifyEpsilon(*this, getEpsilon());
}

LogicalResult AttentionGradOp::verify() {
  if (failed(verifyDropoutRate(*this, getDropoutAttr())) ||
      failed(verifyAttentionWindow(*this, getWindowAttr(), getCausal())))
    return failure();
  return verifyAttentionOperands(*this, getQuery(), getKey(), getValue());
}

AttentionShape AttentionGradOp::getAttentionShape() {
  return denseAttentionShape(shapeOf(getQuery()), shapeOf(getKey()), getCausal(), getWindow(), /*backward=*/true);
}

LogicalResult CrossEntropyGradOp::verify() {
  if (failed(verifyIgnoreIndex(*this, getIgnoreIndexAttr())))
    return failure();
  ArrayRef<int64_t> logits = shapeOf(getLogits());
  if (logits.size() < 2)
    return emitOpError() << "logits must be [..., vocab] with rank >= 2, found " << shapeString(logits);
  return expectShape(*this, "labels", shapeOf(getLabels()), logits.drop_back(),
                     "the logits' shape without the vocab dimension");
}
