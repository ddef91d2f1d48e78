// Multi-tensor AdamW and gradient scaling (the CUDA Device's optimizer work). The AdamW update
// is megart::adamw_update's float32 arithmetic in the same operation order, with explicitly
// rounded intrinsics so nvcc cannot fuse a*b+c into an FMA: results are bitwise identical to
// the CPU's (which turns contraction off for the same reason).
#include "multi_tensor.cuh"

namespace megart::cuda {
namespace {

constexpr int64_t kTile = 4096; // elements per block

struct AdamWSlot {
  float *param;
  const float *grad;
  float *exp_avg;
  float *exp_avg_sq;
  int64_t n;
  bool weight_decay;
};
// 40 slots: about 2.3 KiB of arguments with the two factor sets, inside the 4 KiB limit.
using AdamWBatch = detail::TensorBatch<AdamWSlot, 40>;

struct ScaleSlot {
  float *data;
  int64_t n;
};
using ScaleBatch = detail::TensorBatch<ScaleSlot, 128>;

__global__ void adamw_kernel(const __grid_constant__ AdamWBatch batch, const __grid_constant__ AdamWScalars with_decay,
                             const __grid_constant__ AdamWScalars without_decay) {
  const int k = detail::batch_tensor(batch, blockIdx.x);
  const AdamWSlot &t = batch.slot[k];
  const AdamWScalars &s = t.weight_decay ? with_decay : without_decay;
  const int64_t start = (blockIdx.x - batch.first_tile[k]) * kTile;
  const int64_t end = min(t.n, start + kTile);
  for (int64_t i = start + threadIdx.x; i < end; i += blockDim.x) {
    const float g = t.grad[i];
    float p = __fmul_rn(t.param[i], s.decay_factor);
    const float m = __fadd_rn(__fmul_rn(t.exp_avg[i], s.beta1), __fmul_rn(s.one_minus_beta1, g));
    const float v = __fadd_rn(__fmul_rn(t.exp_avg_sq[i], s.beta2), __fmul_rn(__fmul_rn(s.one_minus_beta2, g), g));
    const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(v), s.bias_correction2_sqrt), s.eps);
    p = __fadd_rn(p, __fdiv_rn(__fmul_rn(s.neg_step_size, m), denom));
    t.param[i] = p;
    t.exp_avg[i] = m;
    t.exp_avg_sq[i] = v;
  }
}

__global__ void scale_tensors_kernel(const __grid_constant__ ScaleBatch batch, float coeff) {
  const int k = detail::batch_tensor(batch, blockIdx.x);
  const ScaleSlot &t = batch.slot[k];
  const int64_t start = (blockIdx.x - batch.first_tile[k]) * kTile;
  const int64_t end = min(t.n, start + kTile);
  for (int64_t i = start + threadIdx.x; i < end; i += blockDim.x)
    t.data[i] = t.data[i] * coeff;
}

} // namespace

void adamw_tensors(const AdamWTensor *tensors, int64_t n_tensors, const AdamWScalars &with_decay,
                   const AdamWScalars &without_decay) {
  detail::for_each_batch<AdamWSlot, 40>(
      n_tensors, kTile,
      [&](int64_t i) {
        const AdamWTensor &t = tensors[i];
        return AdamWSlot{t.param, t.grad, t.exp_avg, t.exp_avg_sq, t.n, t.weight_decay};
      },
      [&](int64_t i) { return tensors[i].n; },
      [&](const AdamWBatch &batch, int64_t tiles) {
        adamw_kernel<<<static_cast<unsigned>(tiles), detail::kThreads, 0, compute_stream()>>>(batch, with_decay,
                                                                                              without_decay);
        detail::check_launch("adamw_tensors");
      });
}

void scale_tensors(float *const *tensors, const int64_t *sizes, int64_t n_tensors, float coeff) {
  detail::for_each_batch<ScaleSlot, 128>(
      n_tensors, kTile, [&](int64_t i) { return ScaleSlot{tensors[i], sizes[i]}; },
      [&](int64_t i) { return sizes[i]; },
      [&](const ScaleBatch &batch, int64_t tiles) {
        scale_tensors_kernel<<<static_cast<unsigned>(tiles), detail::kThreads, 0, compute_stream()>>>(batch, coeff);
        detail::check_launch("scale_tensors");
      });
}

} // namespace megart::cuda
