#include "megart/device.h"

#include "megart/aligned_buffer.h"
#include "megart/bf16.h"
#include "megart/kernels.h"

#include <cstdlib>
#include <cstring>
#include <string>

namespace megart {

namespace {

class CpuDevice final : public Device {
public:
  std::string describe() const override { return "cpu"; }

  void *allocate(std::size_t bytes) override { return allocate_aligned_zeroed(bytes); }
  void release(void *p) noexcept override { std::free(p); }
  void zero(void *p, std::size_t bytes) override { std::memset(p, 0, bytes); }
  void copy_from_host(void *dst, const void *src, std::size_t bytes) override {
    if (dst != src)
      std::memcpy(dst, src, bytes);
  }
  void copy_to_host(void *dst, const void *src, std::size_t bytes) override {
    if (dst != src)
      std::memcpy(dst, src, bytes);
  }
  void synchronize() override {}
  // Only the GEMMs change precision (the autocast model, as on CUDA): bf16 / fp16 are emulated
  // by rounding the GEMM operands (cpu::set_gemm_precision); every other kernel stays fp32.
  void set_compute_precision(Precision p) override { cpu::set_gemm_precision(p); }
  std::string describe_precision(Precision p) const override {
    const std::string name = precision_name(p);
    return name + " emulated on the CPU (GEMM inputs rounded to " + name +
           ", fp32 accumulate; for checking numerics, slower than fp32)";
  }

  double sum_of_squares(const TensorList &tensors) override { return grad_sum_of_squares(tensors); }
  void scale(const MutableTensorList &tensors, float coeff) override { scale_grads(tensors, coeff); }
  void to_bf16(uint16_t *out, const float *in, int64_t n) override {
#pragma omp parallel for schedule(static) if (n > (1 << 16))
    for (int64_t i = 0; i < n; ++i)
      out[i] = float_to_bf16(in[i]);
  }
  void from_bf16(float *out, const uint16_t *in, int64_t n) override {
#pragma omp parallel for schedule(static) if (n > (1 << 16))
    for (int64_t i = 0; i < n; ++i)
      out[i] = bf16_to_float(in[i]);
  }
  void adamw(const std::vector<AdamWTensor> &tensors, const AdamWScalars &with_decay,
             const AdamWScalars &without_decay) override {
    for (const AdamWTensor &t : tensors)
      adamw_update(t.weight_decay ? with_decay : without_decay, t.param, t.grad, t.exp_avg,
                   t.exp_avg_sq, t.n);
  }
};

} // namespace

Device &cpu_device() {
  static CpuDevice device;
  return device;
}

} // namespace megart
