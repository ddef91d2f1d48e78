#include "EvalOps.h"

#include "megac/Eval/Kernels.h"
#include "tx/TxOps.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace megac::tx;

namespace megac::eval {

namespace {
using Results = SmallVector<Tensor>;

Shape shapeOf(Value v) {
  ArrayRef<int64_t> s = cast<RankedTensorType>(v.getType()).getShape();
  return Shape(s.begin(), s.end());
}

/// Token ids and labels index a table or a vocabulary: out of range is an input error.
LogicalResult checkRange(Operation *op, StringRef what, const Tensor &ids, int64_t bound) {
  for (int64_t id : ids.ints)
    if (id < 0 || id >= bound)
      return op->emitOpError() << what << " " << id << " is outside [0, " << bound << ")";
  return success();
}

Results one(Tensor t) {
  Results r;
  r.push_back(std::move(t));
  return r;
}
} // namespace

FailureOr<SmallVector<Tensor>> evalTxOp(Operation *op, ArrayRef<const Tensor *> in) {
  auto arg = [&](unsigned i) -> const Tensor & { return *in[i]; };
  return llvm::TypeSwitch<Operation *, FailureOr<Results>>(op)
      // forward ops
      .Case([&](EmbeddingOp o) -> FailureOr<Results> {
        if (failed(checkRange(o, "token id", arg(1), arg(0).shape[0])))
          return failure();
        return one(embedding(arg(0), arg(1)));
      })
      .Case([&](MatmulOp o) -> FailureOr<Results> {
        Tensor product = matmul(arg(0), arg(1), o.getTransposeLhs(), o.getTransposeRhs());
        if (o.getScale())
          for (double &v : product.data)
            v *= o.getScale()->convertToDouble();
        return one(std::move(product));
      })
      .Case([&](AddOp) -> FailureOr<Results> { return one(broadcastAdd(arg(0), arg(1))); })
      .Case([&](MulOp) -> FailureOr<Results> { return one(broadcastMul(arg(0), arg(1))); })
      .Case([&](ReshapeOp o) -> FailureOr<Results> { return one(reshape(arg(0), shapeOf(o.getResult()))); })
      .Case([&](SliceOp o) -> FailureOr<Results> {
        int64_t size = shapeOf(o.getResult())[o.getDim()];
        return one(slice(arg(0), o.getDim(), o.getOffset(), size));
      })
      .Case([&](LayerNormOp o) -> FailureOr<Results> {
        return one(layerNorm(arg(0), arg(1), arg(2), o.getEpsilon().convertToDouble()));
      })
      .Case([&](RmsNormOp o) -> FailureOr<Results> {
        return one(rmsNorm(arg(0), arg(1), o.getEpsilon().convertToDouble()));
      })
      .Case([&](GeluOp o) -> FailureOr<Results> {
        return one(gelu(arg(0), o.getApproximation() == GeluApproximation::Tanh));
      })
      .Case([&](SwigluOp) -> FailureOr<Results> { return one(swiglu(arg(0), arg(1))); })
      .Case([&](DropoutOp o) -> FailureOr<Results> {
        // The mask depends on the runtime's random stream; only the identity is checkable.
        if (o.getRate().convertToDouble() != 0.0)
          return o.emitOpError("with a nonzero rate cannot be evaluated by the reference "
                               "interpreter: use rate 0.0 when checking gradients");
        return one(arg(0));
      })
      .Case([&](RopeOp o) -> FailureOr<Results> {
        return one(rope(arg(0), o.getTheta().convertToDouble(), o.getInverse()));
      })
      .Case([&](AttentionOp o) -> FailureOr<Results> {
        return one(attention(arg(0), arg(1), arg(2), o.getCausal(), o.getScale().convertToDouble()));
      })
      .Case([&](CrossEntropyOp o) -> FailureOr<Results> {
        if (failed(checkRange(o, "label", arg(1), arg(0).lastDim())))
          return failure();
        return one(crossEntropy(arg(0), arg(1)));
      })
      // backward ops
      .Case([&](ZerosOp o) -> FailureOr<Results> { return one(Tensor::zeros(shapeOf(o.getResult()))); })
      .Case([&](ReduceSumOp o) -> FailureOr<Results> { return one(reduceSum(arg(0), shapeOf(o.getResult()))); })
      .Case([&](PadOp o) -> FailureOr<Results> {
        return one(pad(arg(0), o.getDim(), o.getOffset(), shapeOf(o.getResult())));
      })
      .Case([&](EmbeddingGradOp o) -> FailureOr<Results> {
        int64_t vocab = shapeOf(o.getResult())[0];
        if (failed(checkRange(o, "token id", arg(1), vocab)))
          return failure();
        return one(embeddingGrad(arg(0), arg(1), vocab));
      })
      .Case([&](LayerNormGradOp o) -> FailureOr<Results> {
        NormGrads g = layerNormGrad(arg(0), arg(1), arg(2), o.getEpsilon().convertToDouble());
        return Results{std::move(g.input), std::move(g.weight), std::move(g.bias)};
      })
      .Case([&](RmsNormGradOp o) -> FailureOr<Results> {
        NormGrads g = rmsNormGrad(arg(0), arg(1), arg(2), o.getEpsilon().convertToDouble());
        return Results{std::move(g.input), std::move(g.weight)};
      })
      .Case([&](GeluGradOp o) -> FailureOr<Results> {
        return one(geluGrad(arg(0), arg(1), o.getApproximation() == GeluApproximation::Tanh));
      })
      .Case([&](SwigluGradOp) -> FailureOr<Results> {
        SwigluGrads g = swigluGrad(arg(0), arg(1), arg(2));
        return Results{std::move(g.gate), std::move(g.up)};
      })
      .Case([&](AttentionGradOp o) -> FailureOr<Results> {
        AttentionGrads g = attentionGrad(arg(0), arg(1), arg(2), arg(3), o.getCausal(),
                                         o.getScale().convertToDouble());
        return Results{std::move(g.query), std::move(g.key), std::move(g.value)};
      })
      .Case([&](CrossEntropyGradOp o) -> FailureOr<Results> {
        if (failed(checkRange(o, "label", arg(2), arg(1).lastDim())))
          return failure();
        return one(crossEntropyGrad(arg(0), arg(1), arg(2)));
      })
      .Default([](Operation *op) -> FailureOr<Results> {
        return op->emitOpError("is not supported by the reference interpreter");
      });
}

} // namespace megac::eval
