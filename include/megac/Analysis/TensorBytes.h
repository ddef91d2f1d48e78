// The bytes a tensor's buffer takes: element size from its type (4 for f32 and i32, 2 for the
// 16-bit activations of --bf16 / --fp16), one definition for the emitter, the memory and
// communication plans and the simulator.
#pragma once

#include "mlir/IR/BuiltinTypes.h"

#include <cstdint>

namespace megac {

/// Bytes of one element of a ranked tensor type.
inline int64_t elementBytes(mlir::Type tensorType) {
  return mlir::cast<mlir::RankedTensorType>(tensorType).getElementTypeBitWidth() / 8;
}

/// Bytes of a whole ranked tensor of `tensorType`.
inline int64_t tensorBytes(mlir::Type tensorType) {
  return mlir::cast<mlir::RankedTensorType>(tensorType).getNumElements() * elementBytes(tensorType);
}

} // namespace megac
