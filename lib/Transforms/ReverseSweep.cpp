#include "ReverseSweep.h"

#include "tx/TxLocations.h"
#include "tx/TxOps.h"

using namespace mlir;
using namespace megac;

ReverseSweep::ReverseSweep(Block &block) : block(block), b(block.getTerminator()) {}

Location megac::gradientLoc(Value primal) {
  StringRef name = tx::valueName(primal);
  return tx::derivedLoc(primal, name.empty() ? llvm::Twine() : "d_" + name, "megac-autodiff");
}

Value ReverseSweep::cotangentOrZeros(Value primal) {
  if (Value c = cotangent(primal))
    return c;
  return tx::ZerosOp::create(b, gradientLoc(primal), primal.getType());
}

void ReverseSweep::accumulate(Value primal, Value c) {
  Value &slot = cotangents[primal];
  // A value used twice (a residual stream, a tied embedding) sums its cotangents.
  slot = slot ? tx::AddOp::create(b, gradientLoc(primal), slot, c).getResult() : c;
}

/// Names the ops one op's VJP made after what they compute: an op that makes one operand's
/// cotangent is d_<operand>, a reshape of a forward value (a matmul's input flattened for its
/// weight gradient) <value>_2d, the others d_<the op's result>.
static void nameVjpOps(Operation *primal, ArrayRef<Operation *> made, ArrayRef<Value> operandCotangents) {
  if (primal->getNumResults() == 0)
    return;
  for (Operation *op : made) {
    auto view = dyn_cast<tx::ReshapeOp>(op);
    Value input = view ? view.getInput() : Value();
    bool ofForward = input && !tx::valueName(input).empty() && !tx::valueName(input).starts_with("d_") &&
                     !llvm::is_contained(made, input.getDefiningOp());
    op->setLoc(ofForward ? tx::derivedLoc(input, tx::valueName(input) + "_2d", "megac-autodiff")
                         : gradientLoc(primal->getResult(0)));
  }
  for (auto [operand, c] : llvm::zip_equal(primal->getOperands(), operandCotangents)) {
    Operation *def = c ? c.getDefiningOp() : nullptr;
    if (def && def->getNumResults() == 1 && llvm::is_contained(made, def))
      def->setLoc(gradientLoc(operand));
  }
}

LogicalResult ReverseSweep::run(CustomVjp custom) {
  SmallVector<Operation *> forward;
  for (Operation &op : block.without_terminator())
    forward.push_back(&op);

  for (Operation *op : llvm::reverse(forward)) {
    if (llvm::none_of(op->getResults(), [&](Value r) { return cotangent(r); }))
      continue;
    if (op->getNumOperands() == 0)
      continue; // a leaf (a parameter, whose cotangent the caller reads; a constant)
    Operation *before = block.getTerminator()->getPrevNode();
    SmallVector<Value> operandCotangents;
    if (auto vjp = dyn_cast<tx::VjpOpInterface>(op)) {
      SmallVector<Value> resultCotangents;
      for (Value r : op->getResults()) // integer results (a router's choices) have none
        resultCotangents.push_back(isa<FloatType>(getElementTypeOrSelf(r)) ? cotangentOrZeros(r) : Value());
      operandCotangents = vjp.buildVjp(b, resultCotangents);
      if (operandCotangents.size() != op->getNumOperands())
        return failure(); // buildVjp emitted the error
    } else {
      FailureOr<SmallVector<Value>> result = custom(op, *this);
      if (failed(result))
        return failure();
      operandCotangents = std::move(*result);
    }
    SmallVector<Operation *> made;
    for (Operation *m = before ? before->getNextNode() : &block.front(); m != block.getTerminator();
         m = m->getNextNode())
      made.push_back(m);
    nameVjpOps(op, made, operandCotangents);
    for (auto [operand, c] : llvm::zip_equal(op->getOperands(), operandCotangents))
      if (c)
        accumulate(operand, c);
  }
  return success();
}
