// What one transformer layer keeps from its forward for its backward (its share of the activation
// memory), read from the compiled module: per layer kind, each saved activation with its rank-local
// bytes, and the same in units of s x b x h elements (sequence, micro batch, hidden), the unit of
// Megatron's activation formulas (arXiv 2205.05198). Printed by `megac compile`, written to
// OUT/rank-memory.json.
#pragma once

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>

namespace megac {

struct SavedActivation {
  std::string name;
  int64_t elements = 0, bytes = 0;
};

struct LayerActivations {
  std::string layer;     // the layer function (one per layer kind)
  bool recomputed = false; // full recomputation: what the first layer of a group keeps (its input)
  llvm::SmallVector<SavedActivation> values;
  int64_t sbh = 1;       // s x b x h of the model, the formulas' unit
  int64_t bytes() const;
  int64_t elements() const;
};

/// One entry per layer kind, and one more per recomputed kind (full recomputation).
llvm::SmallVector<LayerActivations> layerActivations(mlir::ModuleOp module);

/// "activations kept per layer ..." lines, each starting with `prefix`.
void printLayerActivations(llvm::ArrayRef<LayerActivations> layers, llvm::StringRef prefix, llvm::raw_ostream &os);
llvm::json::Array layerActivationsJson(llvm::ArrayRef<LayerActivations> layers);

} // namespace megac
