#include "megac/Eval/Tensor.h"

#include <cassert>

namespace megac::eval {

int64_t numElements(const Shape &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

Tensor Tensor::zeros(Shape shape) {
  Tensor t;
  t.shape = std::move(shape);
  t.data.assign(t.numel(), 0.0);
  return t;
}

Tensor Tensor::integers(Shape shape, std::vector<int64_t> values) {
  Tensor t;
  t.shape = std::move(shape);
  t.ints = std::move(values);
  t.isInt = true;
  assert(static_cast<int64_t>(t.ints.size()) == t.numel());
  return t;
}

/// Flat index in `full` of the block element with flat index `i`.
static int64_t blockToFull(int64_t i, const Shape &offsets, const Shape &block, const Shape &full) {
  int64_t index = 0, stride = 1;
  for (int64_t d = static_cast<int64_t>(block.size()) - 1; d >= 0; --d) {
    index += (offsets[d] + i % block[d]) * stride;
    i /= block[d];
    stride *= full[d];
  }
  return index;
}

Tensor readBlock(const Tensor &full, const Shape &offsets, const Shape &shape) {
  Tensor out = Tensor::zeros(shape);
  for (int64_t i = 0; i < out.numel(); ++i)
    out.data[i] = full.data[blockToFull(i, offsets, shape, full.shape)];
  return out;
}

void addBlock(Tensor &full, const Shape &offsets, const Tensor &block) {
  for (int64_t i = 0; i < block.numel(); ++i)
    full.data[blockToFull(i, offsets, block.shape, full.shape)] += block.data[i];
}

} // namespace megac::eval
