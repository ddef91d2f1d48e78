#include "megart/cuda/device.h"

#include "megart/cuda/comm_nccl.h"
#include "megart/cuda/kernels.h"
#include "megart/error.h"
#include "megart/launch_env.h"
#include "megart/poll.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <string>
#include <memory>
#include <mutex>
#include <vector>

namespace megart::cuda {

void check(cudaError_t status, const char *what) {
  if (status != cudaSuccess)
    throw Error(std::string("CUDA error in ") + what + ": " + cudaGetErrorString(status));
}

namespace {

// How long wait_for_stream waits (CudaDevice::set_timeout).
double stream_timeout_seconds = kDefaultCommTimeoutSeconds;

} // namespace

void wait_for_stream(cudaStream_t stream, const char *what) {
  const Poll poll(stream_timeout_seconds);
  for (;;) {
    const cudaError_t status = cudaStreamQuery(stream);
    if (status == cudaSuccess)
      return;
    if (status != cudaErrorNotReady)
      check(status, what);
    if (poll.expired()) {
      const std::string activity = comm_activity().describe();
      throw Error(std::string(what) + ": the GPU's queued work did not finish within " +
                  seconds_text(stream_timeout_seconds) + " s (--distributed-timeout-minutes)" +
                  (activity.empty() ? "" : " during " + activity) + "; a peer rank may have stopped");
    }
    poll.pause();
  }
}

namespace {

// The GPU of this process: the launcher's local rank picks it, as Megatron does. NCCL needs one
// GPU per rank, so a node running more ranks than it has GPUs is an error, not a wrap-around.
int local_device_index(int gpus) {
  const LaunchEnv env = detect_launch_env();
  const int rank = env.local_rank > 0 ? env.local_rank : 0, local_size = env.local_size;
  // A launcher that gives each rank its own GPU (srun --gpus-per-task=1) leaves it one to see.
  if (gpus == 1 && std::getenv("CUDA_VISIBLE_DEVICES"))
    return 0;
  // Without the local size, this rank's index bounds it from below.
  const int ranks = local_size > rank ? local_size : rank + 1;
  if (ranks > gpus)
    throw Error(std::to_string(ranks) + " ranks on this node but " + std::to_string(gpus) +
                " GPUs: NCCL needs one GPU per rank; start at most " + std::to_string(gpus) + " ranks per node");
  return rank;
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
    index_ = local_device_index(count);
    check(cudaSetDevice(index_), "cudaSetDevice");
    check(cudaGetDeviceProperties(&props_, index_), "cudaGetDeviceProperties");
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    // Keep what cudaMallocAsync (the kernels' workspace) frees in the pool instead of returning
    // it to the OS at every synchronisation.
    cudaMemPool_t pool = nullptr;
    check(cudaDeviceGetDefaultMemPool(&pool, index_), "cudaDeviceGetDefaultMemPool");
    uint64_t threshold = UINT64_MAX;
    check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold),
          "cudaMemPoolSetAttribute(cudaMemPoolAttrReleaseThreshold)");
  }

  cudaStream_t stream() const { return stream_; }

  std::string describe() const override {
    return "cuda:" + std::to_string(index_) + " " + props_.name + " (sm_" + std::to_string(props_.major) +
           std::to_string(props_.minor) + ", " + std::to_string(props_.totalGlobalMem >> 30) + " GiB)";
  }

  void *allocate(std::size_t bytes) override {
    void *p = nullptr;
    const std::size_t rounded = bytes ? (bytes + 255) / 256 * 256 : 256;
    if (cudaMalloc(&p, rounded) != cudaSuccess) {
      cudaGetLastError(); // clear the sticky-free allocation error
      // The stream-ordered pool keeps what it freed (the release threshold above), which
      // cudaMalloc cannot use: give it back once its frees have happened, then try again.
      wait_for_stream(stream_, "allocate");
      cudaMemPool_t pool = nullptr;
      check(cudaDeviceGetDefaultMemPool(&pool, index_), "cudaDeviceGetDefaultMemPool");
      check(cudaMemPoolTrimTo(pool, 0), "cudaMemPoolTrimTo");
      p = nullptr;
      if (cudaMalloc(&p, rounded) != cudaSuccess) {
        cudaGetLastError();
        std::size_t free_bytes = 0, total = 0;
        cudaMemGetInfo(&free_bytes, &total);
        throw Error("out of GPU memory on " + describe() + " allocating " + std::to_string(bytes) + " bytes (" +
                    std::to_string(free_bytes >> 20) + " MiB free); use a smaller --micro-batch-size or more "
                    "tensor / pipeline parallelism");
      }
    }
    check(cudaMemsetAsync(p, 0, rounded, stream_), "cudaMemsetAsync");
    return p;
  }
  void release(void *p) noexcept override {
    // During unwinding after a timeout cudaFree would wait for stuck NCCL kernels (it
    // synchronises the device, with no time limit); the process is about to exit.
    if (std::uncaught_exceptions() > 0)
      return;
    cudaFree(p);
  }
  void zero(void *p, std::size_t bytes) override {
    check(cudaMemsetAsync(p, 0, bytes, stream_), "cudaMemsetAsync");
  }
  void copy_from_host(void *dst, const void *src, std::size_t bytes) override {
    // From pageable memory the copy first waits for the stream's earlier work, without a time
    // limit: that wait is done here first, with one.
    wait_for_stream(stream_, "copy_from_host");
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_), "cudaMemcpy host to device");
    // The host buffer may be reused as soon as this returns.
    wait_for_stream(stream_, "copy_from_host");
  }
  void copy_to_host(void *dst, const void *src, std::size_t bytes) override {
    // Into pageable memory the copy returns only once done, after the stream's earlier work:
    // that wait is done here first, with a time limit.
    wait_for_stream(stream_, "copy_to_host");
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_), "cudaMemcpy device to host");
    wait_for_stream(stream_, "copy_to_host");
  }
  void synchronize() override { wait_for_stream(stream_, "synchronize"); }
  void set_timeout(double seconds) override {
    if (!(std::isfinite(seconds) && seconds > 0))
      throw Error("GPU wait timeout of " + std::to_string(seconds) +
                  " s; it must be > 0 (--distributed-timeout-minutes)");
    stream_timeout_seconds = seconds;
  }

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
  void to_bf16(uint16_t *out, const float *in, int64_t n) override { floats_to_bf16(out, in, n); }
  void from_bf16(float *out, const uint16_t *in, int64_t n) override { bf16_to_floats(out, in, n); }
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

  // Dense peak from the SM count and clock. fp32: 2 flops per FP32 lane per cycle (64 lanes per
  // SM on sm_60, sm_70 and sm_80; 128 on sm_86, sm_89, sm_90 and newer). bf16 / fp16 with fp32
  // accumulation: the tensor cores' dense FLOP per clock per SM, 2048 on sm_80 and 4096 on sm_90
  // (A100 312, H100 SXM 989 TFLOP/s at their rated clocks). Other architectures: 0 (unknown;
  // --peak-tflops gives it), not a guess.
  double peak_tflops() const override {
    int clock_khz = 0;
    cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, index_);
    const double sm_clock = props_.multiProcessorCount * static_cast<double>(clock_khz) * 1e3;
    const int sm = props_.major * 10 + props_.minor;
    if (precision_ == Precision::Fp32) {
      const double lanes = sm == 60 || sm == 70 || sm == 80              ? 64
                           : sm == 86 || sm == 89 || props_.major >= 9 ? 128
                                                                         : 0;
      return 2.0 * lanes * sm_clock / 1e12;
    }
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
  if (status == cudaSuccess && count > 0)
    return true;
  cudaGetLastError();
  // A loaded NVIDIA driver that CUDA cannot use (older than this CUDA runtime, a broken install)
  // is an error, not the absence of a GPU: a machine lent for its GPU must not read as skipped.
  std::ifstream driver("/proc/driver/nvidia/version");
  std::string version;
  if (status != cudaSuccess && status != cudaErrorNoDevice && driver && std::getline(driver, version))
    throw Error(std::string("CUDA cannot use this machine's GPU: cudaGetDeviceCount failed with ") +
                cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ") while an NVIDIA driver is loaded (" +
                version + "); a driver older than the CUDA runtime megac was built with (" +
                std::to_string(CUDART_VERSION / 1000) + "." + std::to_string(CUDART_VERSION % 1000 / 10) +
                ") reads so: update the driver, or build with the CUDA toolkit the driver supports");
  if (why)
    *why = status != cudaSuccess ? std::string(cudaGetErrorString(status)) + " (no NVIDIA driver loaded)"
                                 : "no CUDA devices";
  return false;
}

} // namespace megart::cuda
