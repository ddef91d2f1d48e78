#include "megac/Analysis/LayerActivations.h"
#include "megac/Analysis/TensorBytes.h"
#include "megac/Plan/PlanDialect.h"

#include "tx/TxLocations.h"
#include "tx/TxNames.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/Format.h"

using namespace mlir;
using namespace megac;

int64_t LayerActivations::bytes() const {
  int64_t total = 0;
  for (const SavedActivation &v : values)
    total += v.bytes;
  return total;
}

int64_t LayerActivations::elements() const {
  int64_t total = 0;
  for (const SavedActivation &v : values)
    total += v.elements;
  return total;
}

static SavedActivation saved(Value v, StringRef name) {
  auto type = cast<RankedTensorType>(v.getType());
  SavedActivation s;
  s.name = name.empty() ? "?" : name.str();
  s.elements = type.getNumElements();
  s.bytes = tensorBytes(type);
  return s;
}

SmallVector<LayerActivations> megac::layerActivations(ModuleOp module) {
  SmallVector<LayerActivations> result;
  auto model = module->getAttrOfType<DictionaryAttr>(names::kModelAttr);
  int64_t sbh = 1;
  if (model)
    for (StringRef key : {"seq_length", "micro_batch_size", "hidden_size"})
      if (auto v = model.getAs<IntegerAttr>(key))
        sbh *= v.getInt();
  for (auto fwd : module.getOps<func::FuncOp>()) {
    auto savedFrom = fwd->getAttrOfType<IntegerAttr>(names::kSavedFromAttr);
    if (!savedFrom || roleOf(fwd) != FunctionRole::LayerForward)
      continue;
    StringRef layer = fwd.getSymName().drop_back(names::kForwardSuffix.size());
    auto bwd = module.lookupSymbol<func::FuncOp>(names::backwardHalf(layer));
    auto forwardArgs = bwd ? bwd->getAttrOfType<DenseI64ArrayAttr>(names::kForwardArgsAttr) : DenseI64ArrayAttr();
    if (!forwardArgs)
      continue;
    Block &body = fwd.getBody().front();
    // The layer's input (argument 0, the residual stream) counts when the backward reads it. The
    // saved activations are named as the backward's arguments that bring them (a fused op's
    // second result has no name of its own).
    LayerActivations kept{layer.str(), false, {}, sbh};
    if (llvm::is_contained(forwardArgs.asArrayRef(), 0))
      kept.values.push_back(saved(body.getArgument(0), tx::valueName(body.getArgument(0))));
    const unsigned firstSaved = forwardArgs.size();
    for (auto [i, v] : llvm::enumerate(body.getTerminator()->getOperands().drop_front(savedFrom.getInt())))
      kept.values.push_back(saved(v, tx::valueName(bwd.getArgument(firstSaved + i))));
    // With full recomputation a layer reruns from its input; the first of a group keeps only that.
    // (Split over tp with --distribute-saved-activations: then what the forward keeps is the split.)
    if (module.lookupSymbol(names::forwardOnly(layer))) {
      Value input = body.getArgument(0);
      module.walk([&](Operation *op) {
        if (op->hasAttr(names::kSavedForAttr) && op->getNumResults() == 1)
          input = op->getResult(0);
      });
      result.push_back({layer.str(), true, {saved(input, tx::valueName(body.getArgument(0)))}, sbh});
    }
    // Layers that are not recomputed (all but full recomputation's; block's later layers).
    bool stashing = false;
    module.walk([&](func::CallOp call) {
      stashing |= call.getCallee() == fwd.getSymName() && !call->hasAttr(names::kRecomputeAttr);
    });
    if (stashing)
      result.push_back(std::move(kept));
  }
  return result;
}

void megac::printLayerActivations(ArrayRef<LayerActivations> layers, StringRef prefix, raw_ostream &os) {
  for (const LayerActivations &l : layers) {
    os << prefix << "activations kept per layer (@" << l.layer
       << (l.recomputed ? ", recomputed: a group's first layer keeps its input, the others nothing" : "") << "): "
       << llvm::format("%.3f", double(l.elements()) / double(l.sbh)) << " sbh elements = " << l.bytes() << " bytes (";
    for (auto [i, v] : llvm::enumerate(l.values))
      os << (i ? ", " : "") << v.name << " " << llvm::format("%.3g", double(v.elements) / double(l.sbh));
    os << ")\n";
  }
}

llvm::json::Array megac::layerActivationsJson(ArrayRef<LayerActivations> layers) {
  llvm::json::Array list;
  for (const LayerActivations &l : layers) {
    llvm::json::Array values;
    for (const SavedActivation &v : l.values)
      values.push_back(llvm::json::Object{{"name", v.name}, {"elements", v.elements}, {"bytes", v.bytes}});
    list.push_back(llvm::json::Object{{"layer", l.layer},
                                      {"recomputed", l.recomputed},
                                      {"bytes", l.bytes()},
                                      {"sbh_elements", double(l.elements()) / double(l.sbh)},
                                      {"values", std::move(values)}});
  }
  return list;
}
