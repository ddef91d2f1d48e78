#include "megart/cuda/device.h"

#include "megart/cuda/comm_nccl.h"
#include "megart/cuda/kernels.h"
#include "megart/error.h"

#include <cstdlib>
#include <memory>
#include <mutex>
#include <vector>

namespace megart::cuda {

void check(cudaError_t status, const char *what) {
  if (status != cudaSuccess)
    throw Error(std::string("CUDA error in ") + what + ": " + cudaGetErrorString(status));
}

namespace {

// The GPU of this process: the launcher's local rank picks it, as Megatron does.
int local_device_index() {
  for (const char *var : {"OMPI_COMM_WORLD_LOCAL_RANK", "LOCAL_RANK", "SLURM_LOCALID"})
    if (const char *v = std::getenv(var))
      return std::atoi(v);
  return 0;
}

class CudaDevice final : public Device {
public:
  CudaDevice() {
    std::string why;
    if (!available(&why))
      throw Error("this program was compiled for CUDA (megac compile --target cuda), but no CUDA device is "
                  "usable here: " + why + "; run it on a GPU machine, or recompile with --target cpu");
    int count = 0;
    check(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
    index_ = count > 0 ? local_device_index() % count : 0;
    check(cudaSetDevice(index_), "cudaSetDevice");
    check(cudaGetDeviceProperties(&props_, index_), "cudaGetDeviceProperties");
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  }

  cudaStream_t stream() const { return stream_; }

  std::string describe() const override {
    return "cuda:" + std::to_string(index_) + " " + props_.name + " (sm_" + std::to_string(props_.major) +
           std::to_string(props_.minor) + ", " + std::to_string(props_.totalGlobalMem >> 30) + " GiB)";
  }
  bool host_memory() const override { return false; }

  void *allocate(std::size_t bytes) override {
    void *p = nullptr;
    const std::size_t rounded = bytes ? (bytes + 255) / 256 * 256 : 256;
    if (cudaMalloc(&p, rounded) != cudaSuccess) {
      cudaGetLastError(); // clear the sticky-free allocation error
      std::size_t free_bytes = 0, total = 0;
      cudaMemGetInfo(&free_bytes, &total);
      throw Error("out of GPU memory on " + describe() + " allocating " + std::to_string(bytes) + " bytes (" +
                  std::to_string(free_bytes >> 20) + " MiB free); use a smaller --micro-batch-size or more "
                  "tensor / pipeline parallelism");
    }
    check(cudaMemsetAsync(p, 0, rounded, stream_), "cudaMemsetAsync");
    return p;
  }
  void release(void *p) noexcept override { cudaFree(p); }
  void zero(void *p, std::size_t bytes) override {
    check(cudaMemsetAsync(p, 0, bytes, stream_), "cudaMemsetAsync");
  }
  void copy_from_host(void *dst, const void *src, std::size_t bytes) override {
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_), "cudaMemcpy host to device");
    // The host buffer may be reused as soon as this returns.
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }
  void copy_to_host(void *dst, const void *src, std::size_t bytes) override {
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_), "cudaMemcpy device to host");
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }
  void synchronize() override { check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }

  double sum_of_squares(const TensorList &tensors) override {
    std::vector<const float *> ptrs;
    std::vector<int64_t> sizes;
    for (const auto &[p, n] : tensors) {
      ptrs.push_back(p);
      sizes.push_back(n);
    }
    return cuda::sum_of_squares(ptrs.data(), sizes.data(), static_cast<int64_t>(ptrs.size()));
  }
  void scale(const MutableTensorList &tensors, float coeff) override {
    std::vector<float *> ptrs;
    std::vector<int64_t> sizes;
    for (const auto &[p, n] : tensors) {
      ptrs.push_back(p);
      sizes.push_back(n);
    }
    scale_tensors(ptrs.data(), sizes.data(), static_cast<int64_t>(ptrs.size()), coeff);
  }
  void adamw(const std::vector<AdamWTensor> &tensors, const AdamWScalars &with_decay,
             const AdamWScalars &without_decay) override {
    adamw_tensors(tensors.data(), static_cast<int64_t>(tensors.size()), with_decay, without_decay);
  }

  std::unique_ptr<Communicator> communicator(std::unique_ptr<Communicator> host) override {
    return nccl_communicator(std::move(host));
  }

  // Only the GEMMs change precision (the autocast model); the kernels' own math stays fp32.
  void set_compute_precision(Precision p) override {
    precision_ = p;
    set_gemm_precision(p);
  }

  // Dense peak from the SM count and clock. fp32: 2 flops per FP32 core per cycle (64 cores per
  // SM on sm_80, 128 on sm_90). bf16 / fp16 with fp32 accumulation: the tensor cores' dense
  // FLOP per clock per SM, 2048 on sm_80 and 4096 on sm_90 (A100 312, H100 SXM 989 TFLOP/s at
  // their rated clocks). Other architectures: 0 (unknown; --peak-tflops gives it), not a guess.
  double peak_tflops() const override {
    int clock_khz = 0;
    cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, index_);
    const double sm_clock = props_.multiProcessorCount * static_cast<double>(clock_khz) * 1e3;
    if (precision_ == Precision::Fp32) {
      const double cores = props_.major >= 9 ? 128 : 64;
      return 2.0 * cores * sm_clock / 1e12;
    }
    const int sm = props_.major * 10 + props_.minor;
    const double flops_per_clock = sm == 90 ? 4096 : sm == 80 ? 2048 : 0;
    return flops_per_clock * sm_clock / 1e12;
  }

private:
  Precision precision_ = Precision::Fp32;
  int index_ = 0;
  cudaDeviceProp props_{};
  cudaStream_t stream_ = nullptr;
};

CudaDevice &the_device() {
  static CudaDevice device;
  return device;
}

} // namespace

Device &device() { return the_device(); }

cudaStream_t compute_stream() { return the_device().stream(); }

bool available(std::string *why) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    if (why)
      *why = status != cudaSuccess ? cudaGetErrorString(status) : "no CUDA devices";
    cudaGetLastError();
    return false;
  }
  return true;
}

} // namespace megart::cuda
