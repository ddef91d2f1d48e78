#include "tx/TxNames.h"
#include "GradCheck.h"

#include "RandomInputs.h"
#include "megac/Eval/Interpreter.h"
#include "megac/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "llvm/Support/Format.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
using namespace megac::eval;

namespace megac::gradcheck {

namespace {
constexpr llvm::StringLiteral kEntry = megac::names::kForwardEntry;

/// The largest difference between the two gradients, absolute and relative to the
/// gradient's scale (so tiny entries of a large gradient do not dominate).
struct Comparison {
  double maxAbs = 0.0, maxRel = 0.0;
};

Comparison compare(const Tensor &analytic, const std::vector<double> &numeric) {
  Comparison c;
  double scale = 0.0;
  for (std::size_t i = 0; i < numeric.size(); ++i) {
    c.maxAbs = std::max(c.maxAbs, std::abs(analytic.data[i] - numeric[i]));
    scale = std::max({scale, std::abs(analytic.data[i]), std::abs(numeric[i])});
  }
  c.maxRel = scale > 0.0 ? c.maxAbs / scale : 0.0;
  return c;
}

std::string shapeText(const Shape &shape) {
  std::string s;
  for (std::size_t i = 0; i < shape.size(); ++i)
    s += (i ? "x" : "") + std::to_string(shape[i]);
  return s;
}

FailureOr<func::FuncOp> lookupEntry(ModuleOp module) {
  auto entry = module.lookupSymbol<func::FuncOp>(kEntry);
  if (!entry)
    return module.emitError() << "megac-gradcheck: no function @" << kEntry;
  auto loss = entry.getNumResults() == 1 ? dyn_cast<RankedTensorType>(entry.getResultTypes()[0])
                                         : RankedTensorType();
  if (entry.getNumArguments() != 2 || !loss || loss.getRank() != 0)
    return entry.emitOpError("must be @forward(ids, labels) -> scalar loss for megac-gradcheck");
  return entry;
}

/// The module differentiated by megac-autodiff, as a new module.
FailureOr<OwningOpRef<ModuleOp>> differentiate(ModuleOp module) {
  OwningOpRef<ModuleOp> joint(module.clone());
  PassManager pm(module.getContext());
  pm.addPass(megac::createAutodiff());
  if (failed(pm.run(*joint)))
    return failure();
  return joint;
}

/// Central differences of the loss with respect to every element of `value`, which is
/// perturbed in place and restored.
FailureOr<std::vector<double>> numericGradient(Tensor &value,
                                               llvm::function_ref<FailureOr<double>()> loss,
                                               double step) {
  std::vector<double> grad(value.numel());
  for (int64_t i = 0; i < value.numel(); ++i) {
    double x = value.data[i], h = step * std::max(1.0, std::abs(x));
    value.data[i] = x + h;
    FailureOr<double> plus = loss();
    value.data[i] = x - h;
    FailureOr<double> minus = loss();
    value.data[i] = x;
    if (failed(plus) || failed(minus))
      return failure();
    grad[i] = (*plus - *minus) / (2.0 * h);
  }
  return grad;
}
} // namespace

LogicalResult checkGradients(ModuleOp module, const Options &options, llvm::raw_ostream &os) {
  FailureOr<func::FuncOp> entry = lookupEntry(module);
  if (failed(entry))
    return failure();
  Random random(options.seed);
  ParamStore store;
  std::vector<std::string> names;
  if (failed(fillParams(module, random, store, names)))
    return failure();
  FailureOr<std::vector<Tensor>> inputs = makeIdsAndLabels(module, *entry, random);
  if (failed(inputs))
    return failure();

  Interpreter forward(module, store);
  auto forwardLoss = [&]() -> FailureOr<double> {
    FailureOr<std::vector<Tensor>> out = forward.run(kEntry, *inputs);
    if (failed(out))
      return failure();
    return (*out)[0].data[0];
  };
  FailureOr<double> loss = forwardLoss();
  if (failed(loss))
    return failure();

  // Analytic gradients: @train_step with dloss = 1 fills store.grads through tx.param_grad.
  FailureOr<OwningOpRef<ModuleOp>> joint = differentiate(module);
  if (failed(joint))
    return failure();
  Interpreter trainStep(**joint, store);
  std::vector<Tensor> args = *inputs;
  args.push_back(Tensor::zeros({}));
  args.back().data[0] = 1.0;
  FailureOr<std::vector<Tensor>> stepOut = trainStep.run(megac::names::kTrainStep, args);
  if (failed(stepOut))
    return failure();

  os << llvm::format("gradcheck: loss %.12f (seed %llu), central differences with step %.0e, "
                     "tolerance %.0e\n",
                     *loss, static_cast<unsigned long long>(options.seed), options.step,
                     options.tolerance);
  // Autodiff must leave the forward computation alone.
  double stepLoss = (*stepOut)[0].data[0];
  bool lossMatches = std::abs(stepLoss - *loss) <= 1e-12 * std::max(1.0, std::abs(*loss));
  if (!lossMatches)
    os << llvm::format("FAIL: @train_step returns loss %.12f, @forward %.12f\n", stepLoss, *loss);

  std::size_t width = 0; // align the columns
  for (const std::string &name : names)
    width = std::max(width, name.size() + shapeText(store.values[name].shape).size() + 3);
  unsigned failures = 0;
  for (const std::string &name : names) {
    Tensor &value = store.values[name];
    Tensor analytic = store.grads.count(name) ? store.grads[name] : Tensor::zeros(value.shape);
    FailureOr<std::vector<double>> numeric = numericGradient(value, forwardLoss, options.step);
    if (failed(numeric))
      return failure();
    Comparison c = compare(analytic, *numeric);
    bool pass = c.maxRel <= options.tolerance;
    failures += !pass;
    os << llvm::left_justify(name + " [" + shapeText(value.shape) + "]", width)
       << llvm::format("  max abs err %.3e  max rel err %.3e  %s\n", c.maxAbs, c.maxRel,
                       pass ? "PASS" : "FAIL");
  }
  os << "gradcheck: " << names.size() << " params, ";
  if (failures == 0)
    os << "all passed\n";
  else
    os << failures << " failed\n";
  return success(failures == 0 && lossMatches);
}

} // namespace megac::gradcheck
