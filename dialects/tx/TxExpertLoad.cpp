#include "tx/TxExpertLoad.h"

#include "tx/TxNames.h"
#include "tx/TxOps.h"

using namespace mlir;

namespace megac::tx {

std::optional<ExpertLoadShape> expertLoadShape(ModuleOp module) {
  std::optional<ExpertLoadShape> shape;
  module.walk([&](RecordExpertLoadOp r) {
    auto model = module->getAttrOfType<DictionaryAttr>(names::kModelAttr);
    shape = ExpertLoadShape{cast<IntegerAttr>(model.get("num_layers")).getInt(), r.getCounts().getType().getDimSize(0)};
    return WalkResult::interrupt();
  });
  return shape;
}

} // namespace megac::tx
