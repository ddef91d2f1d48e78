#include "RandomInputs.h"

#include "tx/TxOps.h"

#include <algorithm>
#include <limits>

using namespace mlir;
using namespace megac::eval;

namespace megac::gradcheck {

uint64_t Random::next() {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

double Random::uniform(double lo, double hi) {
  double unit = static_cast<double>(next() >> 11) * 0x1.0p-53;
  return lo + (hi - lo) * unit;
}

int64_t Random::below(int64_t n) { return static_cast<int64_t>(next() % static_cast<uint64_t>(n)); }

LogicalResult fillParams(ModuleOp module, Random &random, ParamStore &store,
                         std::vector<std::string> &names) {
  WalkResult walk = module.walk([&](tx::ParamOp p) {
    ArrayRef<int64_t> full = p.getFullShape() ? *p.getFullShape() : p.getType().getShape();
    std::string name = p.getName().str();
    auto it = store.values.find(name);
    if (it != store.values.end()) {
      if (ArrayRef<int64_t>(it->second.shape) == full)
        return WalkResult::advance();
      p.emitOpError() << "'" << name << "' is declared with two different full shapes";
      return WalkResult::interrupt();
    }
    Tensor t = Tensor::zeros(Shape(full.begin(), full.end()));
    for (double &v : t.data)
      v = random.uniform(-1.0, 1.0);
    store.values[name] = std::move(t);
    names.push_back(name);
    return WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
}

FailureOr<std::vector<Tensor>> makeIdsAndLabels(ModuleOp module, func::FuncOp entry, Random &random) {
  constexpr int64_t none = std::numeric_limits<int64_t>::max();
  int64_t idBound = none, labelBound = none;
  module.walk([&](tx::EmbeddingOp e) {
    idBound = std::min(idBound, cast<RankedTensorType>(e.getTable().getType()).getShape()[0]);
  });
  module.walk([&](tx::CrossEntropyOp c) {
    labelBound = std::min(labelBound, cast<RankedTensorType>(c.getLogits().getType()).getShape().back());
  });

  std::vector<Tensor> inputs;
  for (auto [i, bound] : llvm::enumerate(std::vector<int64_t>{idBound, labelBound})) {
    auto type = dyn_cast<RankedTensorType>(entry.getArgumentTypes()[i]);
    if (!type || !type.hasStaticShape() || !type.getElementType().isInteger())
      return entry.emitOpError() << "argument " << i << " must be a static integer tensor (ids, labels)";
    std::vector<int64_t> values(type.getNumElements());
    for (int64_t &v : values)
      v = bound == none ? 0 : random.below(bound); // an unused input: any valid value
    inputs.push_back(Tensor::integers(Shape(type.getShape().begin(), type.getShape().end()), values));
  }
  return inputs;
}

} // namespace megac::gradcheck
