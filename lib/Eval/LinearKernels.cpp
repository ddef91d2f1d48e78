// Matmul, broadcasting elementwise ops and data movement (reshape, slice, pad, embedding).
#include "megac/Eval/Kernels.h"

namespace megac::eval {

Tensor matmul(const Tensor &lhs, const Tensor &rhs, bool transposeLhs, bool transposeRhs) {
  std::size_t lr = lhs.shape.size(), rr = rhs.shape.size();
  int64_t lRows = lhs.shape[lr - 2], lCols = lhs.shape[lr - 1];
  int64_t rRows = rhs.shape[rr - 2], rCols = rhs.shape[rr - 1];
  int64_t m = transposeLhs ? lCols : lRows, k = transposeLhs ? lRows : lCols;
  int64_t n = transposeRhs ? rRows : rCols;
  bool sharedRhs = rr == 2; // one matrix for every batch entry
  Shape shape(lhs.shape.begin(), lhs.shape.end() - 2);
  shape.push_back(m);
  shape.push_back(n);
  Tensor out = Tensor::zeros(shape);
  int64_t batch = lhs.numel() / (lRows * lCols);
  for (int64_t b = 0; b < batch; ++b) {
    const double *a = lhs.data.data() + b * lRows * lCols;
    const double *w = rhs.data.data() + (sharedRhs ? 0 : b * rRows * rCols);
    double *c = out.data.data() + b * m * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0.0;
        for (int64_t p = 0; p < k; ++p) {
          double av = transposeLhs ? a[p * lCols + i] : a[i * lCols + p];
          double wv = transposeRhs ? w[j * rCols + p] : w[p * rCols + j];
          sum += av * wv;
        }
        c[i * n + j] = sum;
      }
  }
  return out;
}

Tensor broadcastAdd(const Tensor &lhs, const Tensor &rhs) {
  Tensor out = lhs;
  int64_t r = rhs.numel();
  for (int64_t i = 0; i < out.numel(); ++i)
    out.data[i] += rhs.data[i % r];
  return out;
}

Tensor broadcastMul(const Tensor &lhs, const Tensor &rhs) {
  Tensor out = lhs;
  int64_t r = rhs.numel();
  for (int64_t i = 0; i < out.numel(); ++i)
    out.data[i] *= rhs.data[i % r];
  return out;
}

Tensor reduceSum(const Tensor &input, const Shape &shape) {
  Tensor out = Tensor::zeros(shape);
  int64_t r = out.numel();
  for (int64_t i = 0; i < input.numel(); ++i)
    out.data[i % r] += input.data[i];
  return out;
}

Tensor reshape(const Tensor &input, const Shape &shape) {
  Tensor out = input;
  out.shape = shape;
  return out;
}

namespace {
/// A tensor seen as [outer, dim, inner] around one dimension.
struct AroundDim {
  int64_t outer = 1, inner = 1;
  AroundDim(const Shape &shape, int64_t dim) {
    for (int64_t d = 0; d < dim; ++d)
      outer *= shape[d];
    for (std::size_t d = dim + 1; d < shape.size(); ++d)
      inner *= shape[d];
  }
};
} // namespace

Tensor slice(const Tensor &input, int64_t dim, int64_t offset, int64_t size) {
  Shape shape = input.shape;
  shape[dim] = size;
  Tensor out = Tensor::zeros(shape);
  AroundDim v(input.shape, dim);
  int64_t inDim = input.shape[dim];
  for (int64_t o = 0; o < v.outer; ++o)
    for (int64_t j = 0; j < size; ++j)
      for (int64_t i = 0; i < v.inner; ++i)
        out.data[(o * size + j) * v.inner + i] = input.data[(o * inDim + offset + j) * v.inner + i];
  return out;
}

Tensor pad(const Tensor &input, int64_t dim, int64_t offset, const Shape &shape) {
  Tensor out = Tensor::zeros(shape);
  AroundDim v(shape, dim);
  int64_t size = input.shape[dim], outDim = shape[dim];
  for (int64_t o = 0; o < v.outer; ++o)
    for (int64_t j = 0; j < size; ++j)
      for (int64_t i = 0; i < v.inner; ++i)
        out.data[(o * outDim + offset + j) * v.inner + i] = input.data[(o * size + j) * v.inner + i];
  return out;
}

Tensor embedding(const Tensor &table, const Tensor &ids) {
  int64_t hidden = table.shape[1];
  Shape shape = ids.shape;
  shape.push_back(hidden);
  Tensor out = Tensor::zeros(shape);
  for (int64_t t = 0; t < ids.numel(); ++t)
    for (int64_t h = 0; h < hidden; ++h)
      out.data[t * hidden + h] = table.data[ids.ints[t] * hidden + h];
  return out;
}

Tensor embeddingGrad(const Tensor &grad, const Tensor &ids, int64_t vocab) {
  int64_t hidden = grad.lastDim();
  Tensor out = Tensor::zeros({vocab, hidden});
  for (int64_t t = 0; t < ids.numel(); ++t)
    for (int64_t h = 0; h < hidden; ++h)
      out.data[ids.ints[t] * hidden + h] += grad.data[t * hidden + h];
  return out;
}

} // namespace megac::eval
