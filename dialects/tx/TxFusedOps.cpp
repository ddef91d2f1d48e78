// Verifiers of the fused linear-layer ops: input [..., K], weight [K, N] ([N, K] transposed),
// bias [N] (if any), results [..., N].
#include "tx/TxOps.h"
#include "tx/TxVerifyUtils.h"

using namespace mlir;
using namespace megac::tx;
using namespace megac::tx::verify;

// bias: null for a GEMM without one.
static LogicalResult verifyLinear(Operation *op, Value input, Value weight, Value bias, bool transposed,
                                  Value result) {
  ArrayRef<int64_t> in = shapeOf(input), w = shapeOf(weight);
  if (in.empty())
    return op->emitOpError() << "input must have rank >= 1";
  if (failed(expectRank(op, "weight", weight, 2, transposed ? "[N, K]" : "[K, N]")))
    return failure();
  const GemmShape g = linearGemmShape(in, w, transposed);
  if (g.k != g.rhsContractSize)
    return op->emitOpError() << "contraction sizes differ: input " << shapeString(in) << " gives " << g.k
                             << ", weight " << shapeString(w) << " gives " << g.rhsContractSize;
  if (bias && failed(expectShape(op, "bias", shapeOf(bias), {g.n}, "the weight's output dimension")))
    return failure();
  SmallVector<int64_t> expected(in.drop_back());
  expected.push_back(g.n);
  return expectShape(op, "result", shapeOf(result), expected);
}

LogicalResult MatmulBiasOp::verify() {
  return verifyLinear(*this, getInput(), getWeight(), getBias(), getTransposeRhs(), getResult());
}

LogicalResult MatmulBiasGeluOp::verify() {
  return verifyLinear(*this, getInput(), getWeight(), getBias(), getTransposeRhs(), getPre());
}

LogicalResult MatmulNf4Op::verify() {
  return verifyLinear(*this, getInput(), getWeight(), Value(), getTransposeRhs(), getResult());
}

GemmShape MatmulBiasOp::getGemmShape() {
  return linearGemmShape(shapeOf(getInput()), shapeOf(getWeight()), getTransposeRhs());
}

GemmShape MatmulBiasGeluOp::getGemmShape() {
  return linearGemmShape(shapeOf(getInput()), shapeOf(getWeight()), getTransposeRhs());
}

GemmShape MatmulNf4Op::getGemmShape() {
  return linearGemmShape(shapeOf(getInput()), shapeOf(getWeight()), getTransposeRhs());
}
