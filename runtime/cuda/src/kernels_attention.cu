// Fused attention on the GPU (attention_forward.cuh, attention_backward.cuh): argument checks,
// head_dim dispatch and launches. Kernels are compiled for head_dim buckets 16, 32, 64 and 128;
// a smaller head_dim runs in the next bucket up with zero-padded columns.
#include "attention_backward.cuh"
#include "attention_forward.cuh"
#include "cuda_detail.cuh"

#include "megart/cuda/device.h"
#include "megart/cuda/kernels.h"
#include "megart/error.h"

#include <string>

namespace megart::cuda {
namespace {

using attention::Shape;

constexpr int64_t kMaxHeadDim = 128;
constexpr int64_t kMaxGridYZ = 65535;  // heads on grid y, batch on grid z
constexpr size_t kMaxSmem = 99 * 1024; // opt-in shared memory per block on sm_86/89 (sm_80: 163 KiB)

Shape make_shape(const char *kernel, int64_t batch, int64_t seq, int64_t q_heads, int64_t kv_heads, int64_t head_dim,
                 float scale, bool causal, int64_t window, const AttentionDropout &dropout) {
  if (window < 0 || (window > 0 && !causal))
    throw Error(std::string(kernel) + ": window " + std::to_string(window) +
                (window < 0 ? " is negative" : " needs causal attention") +
                " (0: none; w > 0: each query sees itself and at most w keys before it)");
  if (const std::string error = attention_dropout_error(dropout, q_heads); !error.empty())
    throw Error(std::string(kernel) + ": " + error);
  if (kv_heads <= 0 || q_heads % kv_heads != 0)
    throw Error(std::string(kernel) + ": q_heads (" + std::to_string(q_heads) + ") is not a multiple of kv_heads (" +
                std::to_string(kv_heads) + ")");
  if (head_dim > kMaxHeadDim)
    throw Error(std::string(kernel) + ": head_dim (" + std::to_string(head_dim) +
                ") is larger than the CUDA kernels support (" + std::to_string(kMaxHeadDim) + ")");
  if (batch > kMaxGridYZ || q_heads > kMaxGridYZ)
    throw Error(std::string(kernel) + ": batch (" + std::to_string(batch) + ") and q_heads (" +
                std::to_string(q_heads) + ") must each be at most " + std::to_string(kMaxGridYZ));
  const int heads = static_cast<int>(q_heads), groups = static_cast<int>(kv_heads);
  return Shape{seq, heads, groups, heads / groups, static_cast<int>(head_dim), scale, causal, window, dropout};
}

// Kernels above 48 KiB of dynamic shared memory must opt in, once per kernel.
template <typename Kernel> void allow_smem(Kernel kernel, size_t bytes, const char *what) {
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)), what);
}

unsigned tiles(int64_t seq, int rows) { return static_cast<unsigned>((seq + rows - 1) / rows); }

template <int D, bool kStats>
void launch_forward(float *out, float *lse, float *delta, const float *q, const float *k, const float *v,
                    const float *dout, int64_t batch, const Shape &s) {
  constexpr size_t smem = attention::forward_smem_bytes<D>();
  static_assert(smem <= kMaxSmem);
  // The stream first: making it selects this rank's GPU, which the opt-in below applies to.
  const cudaStream_t stream = compute_stream();
  static const bool ready =
      (allow_smem(attention::forward_kernel<D, kStats>, smem, "cudaFuncSetAttribute(attention forward)"), true);
  (void)ready;
  const dim3 grid(tiles(s.seq, attention::kForwardRows), s.q_heads, static_cast<unsigned>(batch));
  attention::forward_kernel<D, kStats><<<grid, attention::kThreads, smem, stream>>>(out, lse, delta, q, k, v, dout, s);
  detail::check_launch(kStats ? "attention_backward statistics kernel launch" : "attention_forward kernel launch");
}

template <int D>
void launch_backward(float *dq, float *dk, float *dv, const float *dout, const float *q, const float *k, const float *v,
                     const float *lse, const float *delta, int64_t batch, const Shape &s) {
  constexpr size_t dq_smem = attention::dq_smem_bytes<D>(), dkv_smem = attention::dkv_smem_bytes<D>();
  static_assert(dq_smem <= kMaxSmem && dkv_smem <= kMaxSmem);
  const cudaStream_t stream = compute_stream(); // selects this rank's GPU before the opt-in
  static const bool ready =
      (allow_smem(attention::dq_kernel<D>, dq_smem, "cudaFuncSetAttribute(attention dq)"),
       allow_smem(attention::dkv_kernel<D>, dkv_smem, "cudaFuncSetAttribute(attention dk dv)"), true);
  (void)ready;
  const dim3 dq_grid(tiles(s.seq, attention::kDqRows), s.q_heads, static_cast<unsigned>(batch));
  attention::dq_kernel<D>
      <<<dq_grid, attention::kThreads, dq_smem, stream>>>(dq, q, k, v, dout, lse, delta, s);
  detail::check_launch("attention_backward dq kernel launch");
  const dim3 dkv_grid(tiles(s.seq, attention::kDkvKeys), s.kv_heads, static_cast<unsigned>(batch));
  attention::dkv_kernel<D>
      <<<dkv_grid, attention::kThreads, dkv_smem, stream>>>(dk, dv, q, k, v, dout, lse, delta, s);
  detail::check_launch("attention_backward dk/dv kernel launch");
}

// The smallest compiled head_dim bucket that holds head_dim (make_shape bounds it by 128).
int bucket(int64_t head_dim) { return head_dim <= 16 ? 16 : head_dim <= 32 ? 32 : head_dim <= 64 ? 64 : 128; }

template <bool kStats>
void forward_any(float *out, float *lse, float *delta, const float *q, const float *k, const float *v,
                 const float *dout, int64_t batch, const Shape &s) {
  switch (bucket(s.head_dim)) {
  case 16: return launch_forward<16, kStats>(out, lse, delta, q, k, v, dout, batch, s);
  case 32: return launch_forward<32, kStats>(out, lse, delta, q, k, v, dout, batch, s);
  case 64: return launch_forward<64, kStats>(out, lse, delta, q, k, v, dout, batch, s);
  default: return launch_forward<128, kStats>(out, lse, delta, q, k, v, dout, batch, s);
  }
}

} // namespace

void attention_forward(float *out, const float *q, const float *k, const float *v, int64_t batch, int64_t seq,
                       int64_t q_heads, int64_t kv_heads, int64_t head_dim, float scale, bool causal,
                       int64_t window, const AttentionDropout &dropout) {
  const Shape s =
      make_shape("attention_forward", batch, seq, q_heads, kv_heads, head_dim, scale, causal, window, dropout);
  if (batch == 0 || seq == 0 || q_heads == 0 || head_dim <= 0)
    return;
  forward_any<false>(out, nullptr, nullptr, q, k, v, nullptr, batch, s);
}

void attention_backward(float *dq, float *dk, float *dv, const float *dout, const float *q, const float *k,
                        const float *v, int64_t batch, int64_t seq, int64_t q_heads, int64_t kv_heads, int64_t head_dim,
                        float scale, bool causal, int64_t window, const AttentionDropout &dropout) {
  const Shape s =
      make_shape("attention_backward", batch, seq, q_heads, kv_heads, head_dim, scale, causal, window, dropout);
  if (batch == 0 || seq == 0 || q_heads == 0 || head_dim <= 0)
    return;
  // Per query row: lse and delta, [batch, q_heads, seq] each, in the shared workspace (the
  // kernels below are its only users until this returns).
  const size_t rows = static_cast<size_t>(batch * q_heads * seq);
  float *lse = static_cast<float *>(detail::workspace(2 * rows * sizeof(float))), *delta = lse + rows;
  forward_any<true>(nullptr, lse, delta, q, k, v, dout, batch, s);
  switch (bucket(head_dim)) {
  case 16: return launch_backward<16>(dq, dk, dv, dout, q, k, v, lse, delta, batch, s);
  case 32: return launch_backward<32>(dq, dk, dv, dout, q, k, v, lse, delta, batch, s);
  case 64: return launch_backward<64>(dq, dk, dv, dout, q, k, v, lse, delta, batch, s);
  default: return launch_backward<128>(dq, dk, dv, dout, q, k, v, lse, delta, batch, s);
  }
}

} // namespace megart::cuda
