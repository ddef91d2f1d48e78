// The GEMM with an NF4 weight (megart/nf4.h): a tile of the weight's rows dequantized into fp32
// scratch, then cblas_sgemm writes those columns of C. The scratch is a tile, never the weight.
#include "megart/error.h"
#include "megart/nf4.h"

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <string>
#include <vector>

namespace megart::cpu {
namespace {

constexpr int64_t kTileFloats = int64_t{1} << 18; // 1 MiB of dequantized weight per tile

} // namespace

void gemm_nf4(float *c, const float *a, const Nf4Tensor &w, int64_t m, int64_t n, int64_t k, float beta) {
  constexpr int64_t kIntMax = INT_MAX; // cblas_sgemm's sizes and leading dimensions
  if (m < 0 || n < 1 || k < 1 || m > kIntMax || n > kIntMax || k > kIntMax || w.numel != n * k)
    throw Error("gemm_nf4: m " + std::to_string(m) + ", n " + std::to_string(n) + ", k " + std::to_string(k) +
                " with an NF4 weight of " + std::to_string(w.numel) + " elements; it must hold n x k, each size in [1, 2^31)");
  if (m == 0)
    return;
  const int64_t rows = std::max<int64_t>(1, std::min(n, kTileFloats / k));
  std::vector<float> tile(static_cast<size_t>(rows * k));
  for (int64_t r0 = 0; r0 < n; r0 += rows) {
    const int64_t count = std::min(rows, n - r0);
    nf4_dequantize_range(tile.data(), w, r0 * k, count * k);
    // C[:, r0 : r0 + count] (leading dimension n) = A . tile^T + beta C.
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m), static_cast<int>(count),
                static_cast<int>(k), 1.0f, a, static_cast<int>(k), tile.data(), static_cast<int>(k), beta, c + r0,
                static_cast<int>(n));
  }
}

} // namespace megart::cpu
