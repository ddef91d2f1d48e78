// Shape checks shared by the verifiers of forward and backward `tx` ops.
#pragma once

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <string>

namespace megac::tx::verify {

using namespace mlir;


inline std::string shapeString(ArrayRef<int64_t> shape) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "[";
  llvm::interleaveComma(shape, os);
  os << "]";
  return text;
}

inline RankedTensorType tensorType(Value value) { return cast<RankedTensorType>(value.getType()); }

inline ArrayRef<int64_t> shapeOf(Value value) { return tensorType(value).getShape(); }

/// Fails with "<what> has shape [..] but expected [..]" unless the shapes are equal.
inline LogicalResult expectShape(Operation *op, StringRef what, ArrayRef<int64_t> found,
                          ArrayRef<int64_t> expected, StringRef why = "") {
  if (found == expected)
    return success();
  auto diag = op->emitOpError() << what << " has shape " << shapeString(found)
                                << " but expected " << shapeString(expected);
  if (!why.empty())
    diag << " (" << why << ")";
  return diag;
}

// Element types may differ where a parameter (fp32) meets a 16-bit activation (megac-autocast):
// matmul and linear operands and results, a bias or norm vector, the embedding's table and
// result, a bias gradient's sum. Every other op keeps one element type.
inline LogicalResult expectSameElementType(Operation *op, StringRef what, Value value, Type expected) {
  Type found = tensorType(value).getElementType();
  if (found == expected)
    return success();
  return op->emitOpError() << what << " has element type " << found << " but expected " << expected;
}

inline LogicalResult expectRank(Operation *op, StringRef what, Value value, int64_t rank,
                         StringRef layout) {
  if (tensorType(value).getRank() == rank)
    return success();
  return op->emitOpError() << what << " must have rank " << rank << " " << layout << ", found "
                           << shapeString(shapeOf(value));
}

/// Norm weights (and biases) are vectors of the input's last dimension.
inline LogicalResult verifyNormVector(Operation *op, StringRef what, Value input, Value vec) {
  ArrayRef<int64_t> in = shapeOf(input);
  if (in.empty())
    return op->emitOpError() << "input must have rank >= 1";
  return expectShape(op, what, shapeOf(vec), {in.back()}, "the input's last dimension");
}

/// A loss's ignored label (absent: none) is negative, so that no vocabulary id is ignored.
inline LogicalResult verifyIgnoreIndex(Operation *op, IntegerAttr ignore) {
  if (!ignore || ignore.getInt() < 0)
    return success();
  return op->emitOpError() << "ignore_index must be negative (transformers': -100), found " << ignore.getInt();
}

/// A norm's weight offset (absent: none) is a finite number.
inline LogicalResult verifyWeightOffset(Operation *op, FloatAttr offset) {
  if (!offset || std::isfinite(offset.getValueAsDouble()))
    return success();
  return op->emitOpError() << "weight_offset must be finite, found " << offset.getValueAsDouble();
}

inline LogicalResult verifyEpsilon(Operation *op, APFloat eps) {
  if (eps.convertToDouble() > 0.0)
    return success();
  return op->emitOpError() << "eps must be > 0, found " << eps.convertToDouble();
}

/// Query [b, s, heads, d]; key and value [b, s, groups, d] with heads a multiple of groups.
/// Dropout streams fit the 8 bits the runtime's site key gives them (megart/dropout.h).
inline constexpr int64_t kMaxDropoutStream = 255;

/// A dropout rate (absent: none) must be in [0, 1).
inline LogicalResult verifyDropoutRate(Operation *op, FloatAttr rate) {
  if (!rate || (rate.getValueAsDouble() >= 0.0 && rate.getValueAsDouble() < 1.0))
    return success();
  return op->emitOpError() << "dropout rate must be in [0, 1), found " << rate.getValueAsDouble();
}

/// A sliding window (absent: none) sees the token and at most `window` before it: causal only.
inline LogicalResult verifyAttentionWindow(Operation *op, IntegerAttr window, bool causal) {
  if (!window)
    return success();
  if (!causal)
    return op->emitOpError() << "a window needs causal attention (a window looks back from its query)";
  if (window.getInt() < 1)
    return op->emitOpError() << "window must be >= 1 (the keys before the query it sees), found "
                             << window.getInt();
  return success();
}

inline LogicalResult verifyAttentionOperands(Operation *op, Value query, Value key, Value value) {
  constexpr StringRef layout = "[batch, seq, heads, head_dim]";
  for (auto [what, v] : {std::pair<StringRef, Value>{"query", query}, {"key", key}, {"value", value}})
    if (failed(expectRank(op, what, v, 4, layout)))
      return failure();
  ArrayRef<int64_t> q = shapeOf(query), k = shapeOf(key);
  SmallVector<int64_t> kvExpected{q[0], q[1], k[2], q[3]};
  if (failed(expectShape(op, "key", k, kvExpected,
                         "batch, seq and head_dim of the query, any number of query groups")) ||
      failed(expectShape(op, "value", shapeOf(value), k, "the shape of key")))
    return failure();
  if (q[2] % k[2] != 0)
    return op->emitOpError() << "query heads (" << q[2] << ") must be a multiple of key/value heads ("
                             << k[2] << ")";
  Type element = tensorType(query).getElementType();
  for (Value v : {key, value})
    if (failed(expectSameElementType(op, "operand", v, element)))
      return failure();
  return success();
}

} // namespace megac::tx::verify
