// Rotary position embedding, rotate_half convention (HF Llama), with the CPU kernel's float32
// rounding steps: the inverse frequencies are computed on the host exactly as the CPU does and
// passed by value; each block builds its position's cos/sin row in shared memory from the float
// angle, in double, rounded once.
#include "cuda_detail.cuh"

#include <cmath>

namespace megart::cuda {
namespace {

// head_dim up to 1024: the frequencies travel as a kernel argument (2 KiB of the 4 KiB limit).
constexpr int64_t kMaxHalf = 512;

struct InvFreq {
  float value[kMaxHalf];
};

// One block per (batch, position) row of heads * head_dim values. Each thread reads both
// elements of a pair before writing them, so y may alias x exactly.
__global__ void rope_kernel(float *y, const float *x, int64_t rows, int64_t seq, int64_t heads, int64_t half,
                            int64_t position_offset, float position_divisor, float sign, InvFreq freq) {
  extern __shared__ float table[]; // cos [half] then sin [half]
  float *cos_t = table, *sin_t = table + half;
  const int64_t head_dim = 2 * half;
  for (int64_t bs = blockIdx.x; bs < rows; bs += gridDim.x) {
    const float pos = static_cast<float>(bs % seq + position_offset) / position_divisor; // as the CPU
    __syncthreads(); // the previous row's readers are done with the table
    for (int64_t i = threadIdx.x; i < half; i += blockDim.x) {
      const double angle = static_cast<double>(pos * freq.value[i]);
      double s, c;
      sincos(angle, &s, &c);
      cos_t[i] = static_cast<float>(c);
      sin_t[i] = sign * static_cast<float>(s);
    }
    __syncthreads();
    const float *xr = x + bs * heads * head_dim;
    float *yr = y + bs * heads * head_dim;
    for (int64_t k = threadIdx.x; k < heads * half; k += blockDim.x) {
      const int64_t i = k % half, at = (k / half) * head_dim + i;
      const float x1 = xr[at], x2 = xr[at + half];
      yr[at] = x1 * cos_t[i] - x2 * sin_t[i];
      yr[at + half] = x2 * cos_t[i] + x1 * sin_t[i];
    }
  }
}

} // namespace

void rope_forward(float *y, const float *x, int64_t batch, int64_t seq, int64_t heads, int64_t head_dim, float theta,
                  int64_t position_offset, bool inverse, float position_divisor) {
  if (head_dim % 2 != 0)
    throw Error("rope: head_dim (" + std::to_string(head_dim) + ") must be even");
  detail::require(head_dim / 2 <= kMaxHalf, "rope: head_dim (" + std::to_string(head_dim) +
                                                ") is larger than the CUDA kernel supports (" +
                                                std::to_string(2 * kMaxHalf) + ")");
  detail::require(batch >= 0 && seq >= 0 && heads >= 0 && head_dim >= 0,
                  "rope: negative shape [" + std::to_string(batch) + ", " + std::to_string(seq) + ", " +
                      std::to_string(heads) + ", " + std::to_string(head_dim) + "]");
  const int64_t half = head_dim / 2, rows = batch * seq;
  if (rows == 0 || heads == 0 || half == 0)
    return;
  // Exactly the CPU's table: exponent, power and 1/power each rounded to float32.
  InvFreq freq{};
  for (int64_t i = 0; i < half; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(head_dim);
    const float power = static_cast<float>(std::pow(static_cast<double>(theta), exponent));
    freq.value[i] = 1.0f / power;
  }
  const size_t shared = sizeof(float) * 2 * half;
  rope_kernel<<<detail::row_blocks(rows), detail::kThreads, shared, compute_stream()>>>(
      y, x, rows, seq, heads, half, position_offset, position_divisor, inverse ? -1.0f : 1.0f, freq);
  detail::check_launch("rope_forward");
}

} // namespace megart::cuda
