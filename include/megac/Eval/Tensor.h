// Dense tensors of the reference interpreter: row-major, double precision (or integers for
// token ids and labels). Plain std::vector storage: the interpreter checks math, not speed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace megac::eval {

using Shape = std::vector<int64_t>;

int64_t numElements(const Shape &shape);

struct Tensor {
  Shape shape;
  std::vector<double> data; // float tensors
  std::vector<int64_t> ints; // integer tensors (token ids, labels)
  bool isInt = false;

  static Tensor zeros(Shape shape);
  static Tensor integers(Shape shape, std::vector<int64_t> values);

  int64_t numel() const { return numElements(shape); }
  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  /// The size of the last dimension (1 for a scalar).
  int64_t lastDim() const { return shape.empty() ? 1 : shape.back(); }
};

/// The block of `full` that starts at `offsets` and has extent `shape` (a `tx.param ... at`).
Tensor readBlock(const Tensor &full, const Shape &offsets, const Shape &shape);

/// Adds `block` into `full` at `offsets` (the gradient of readBlock).
void addBlock(Tensor &full, const Shape &offsets, const Tensor &block);

} // namespace megac::eval
