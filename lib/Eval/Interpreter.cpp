// Walks a function's single block in order; each value maps to a tensor. Calls recurse,
// parameters come from the store and parameter gradients go back into it.
#include "megac/Eval/Interpreter.h"

#include "tx/TxOps.h"

#include "llvm/ADT/DenseMap.h"

using namespace mlir;

namespace megac::eval {

namespace {
Shape toShape(ArrayRef<int64_t> s) { return Shape(s.begin(), s.end()); }
Shape resultShape(Operation *op) { return toShape(cast<RankedTensorType>(op->getResult(0).getType()).getShape()); }

/// Where a parameter's block starts in its checkpoint tensor (all zeros without `at`).
Shape blockOffsets(tx::ParamOp p) {
  if (p.getOffsets())
    return toShape(*p.getOffsets());
  return Shape(p.getType().getRank(), 0);
}
} // namespace

FailureOr<std::vector<Tensor>> Interpreter::run(StringRef name, const std::vector<Tensor> &args) {
  auto fn = module.lookupSymbol<func::FuncOp>(name);
  if (!fn)
    return module.emitError() << "no function @" << name << " to interpret";
  return runFunction(fn, args);
}

FailureOr<Tensor> Interpreter::readParam(Operation *op) {
  auto p = cast<tx::ParamOp>(op);
  auto it = params.values.find(p.getName().str());
  if (it == params.values.end())
    return p.emitOpError() << "'" << p.getName() << "' has no value in the parameter store";
  Shape full = p.getFullShape() ? toShape(*p.getFullShape()) : resultShape(p);
  if (it->second.shape != full)
    return p.emitOpError() << "'" << p.getName() << "' has a stored value of another shape";
  return readBlock(it->second, blockOffsets(p), resultShape(p));
}

LogicalResult Interpreter::addParamGrad(Operation *op, const Tensor &grad) {
  auto p = cast<tx::ParamGradOp>(op).getParam().getDefiningOp<tx::ParamOp>();
  std::string name = p.getName().str();
  auto value = params.values.find(name);
  if (value == params.values.end())
    return op->emitOpError() << "'" << name << "' has no value in the parameter store";
  Tensor &sum = params.grads[name];
  if (sum.shape.empty() && sum.data.empty())
    sum = Tensor::zeros(value->second.shape);
  addBlock(sum, blockOffsets(p), grad); // repeated param_grads of one parameter add up
  return success();
}

FailureOr<std::vector<Tensor>> Interpreter::runFunction(func::FuncOp fn, const std::vector<Tensor> &args) {
  if (fn.isExternal() || !fn.getBody().hasOneBlock())
    return fn.emitOpError("needs a body of one block to be interpreted");
  Block &body = fn.getBody().front();
  if (args.size() != body.getNumArguments())
    return fn.emitOpError() << "takes " << body.getNumArguments() << " arguments, given " << args.size();

  DenseMap<Value, Tensor> env;
  for (auto [arg, tensor] : llvm::zip_equal(body.getArguments(), args))
    env[arg] = tensor;

  for (Operation &op : body) {
    // Operand pointers stay valid until results are inserted below.
    SmallVector<const Tensor *> operands;
    for (Value v : op.getOperands())
      operands.push_back(&env.find(v)->second);

    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      std::vector<Tensor> results;
      for (const Tensor *t : operands)
        results.push_back(*t);
      return results;
    }

    SmallVector<Tensor> results;
    if (auto call = dyn_cast<func::CallOp>(op)) {
      auto callee = module.lookupSymbol<func::FuncOp>(call.getCallee());
      if (!callee)
        return call.emitOpError() << "calls unknown function @" << call.getCallee();
      std::vector<Tensor> callArgs;
      for (const Tensor *t : operands)
        callArgs.push_back(*t);
      FailureOr<std::vector<Tensor>> out = runFunction(callee, callArgs);
      if (failed(out))
        return failure();
      results.append(out->begin(), out->end());
    } else if (isa<tx::ParamOp>(op)) {
      FailureOr<Tensor> value = readParam(&op);
      if (failed(value))
        return failure();
      results.push_back(std::move(*value));
    } else if (isa<tx::ParamGradOp>(op)) {
      if (failed(addParamGrad(&op, *operands[1])))
        return failure();
    } else if (auto evaluated = dyn_cast<tx::ReferenceEvalOpInterface>(op)) {
      FailureOr<SmallVector<Tensor>> out = evaluated.evaluate(operands);
      if (failed(out))
        return failure();
      results = std::move(*out);
    } else {
      return op.emitOpError("is not supported by the reference interpreter");
    }
    for (auto [value, tensor] : llvm::zip_equal(op.getResults(), results))
      env[value] = std::move(tensor);
  }
  return fn.emitOpError("has no func.return");
}

} // namespace megac::eval
