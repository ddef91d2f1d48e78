#include "ReverseSweep.h"

#include "tx/TxOps.h"

using namespace mlir;
using namespace megac;

ReverseSweep::ReverseSweep(Block &block) : block(block), b(block.getTerminator()) {}

Value ReverseSweep::cotangentOrZeros(Value primal) {
  if (Value c = cotangent(primal))
    return c;
  return tx::ZerosOp::create(b, primal.getLoc(), primal.getType());
}

void ReverseSweep::accumulate(Value primal, Value c) {
  Value &slot = cotangents[primal];
  // A value used twice (a residual stream, a tied embedding) sums its cotangents.
  slot = slot ? tx::AddOp::create(b, c.getLoc(), slot, c).getResult() : c;
}

LogicalResult ReverseSweep::run(CustomVjp custom) {
  SmallVector<Operation *> forward;
  for (Operation &op : block.without_terminator())
    forward.push_back(&op);

  for (Operation *op : llvm::reverse(forward)) {
    if (llvm::none_of(op->getResults(), [&](Value r) { return cotangent(r); }))
      continue;
    if (isa<tx::ParamOp>(op))
      continue; // a leaf: its cotangent is read by the caller
    SmallVector<Value> operandCotangents;
    if (auto vjp = dyn_cast<tx::VjpOpInterface>(op)) {
      SmallVector<Value> resultCotangents;
      for (Value r : op->getResults())
        resultCotangents.push_back(cotangentOrZeros(r));
      operandCotangents = vjp.buildVjp(b, resultCotangents);
      if (operandCotangents.size() != op->getNumOperands())
        return failure(); // buildVjp emitted the error
    } else {
      FailureOr<SmallVector<Value>> result = custom(op, *this);
      if (failed(result))
        return failure();
      operandCotangents = std::move(*result);
    }
    for (auto [operand, c] : llvm::zip_equal(op->getOperands(), operandCotangents))
      if (c)
        accumulate(operand, c);
  }
  return success();
}
