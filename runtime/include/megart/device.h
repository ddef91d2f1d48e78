// Where a compiled program's tensors live, and the runtime's own numeric work on them: the
// optimizer, the gradient norm, zeroing and copies. The parameter store, the training loop and
// the pipeline executor go through it, so one loop drives both backends: cpu_device() (host
// memory) here, megart::cuda::device() (GPU memory) in libmegart-cuda.
#pragma once

#include "megart/comm.h"
#include "megart/memory_accounting.h"
#include "megart/optimizer.h"
#include "megart/precision.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace megart {

// One tensor of a multi-tensor AdamW step: n elements of each array, all on the device.
struct AdamWTensor {
  float *param;
  const float *grad;
  float *exp_avg;
  float *exp_avg_sq;
  int64_t n;
  bool weight_decay; // false: the step uses the without-decay factors
};

using TensorList = std::vector<std::pair<const float *, int64_t>>;
using MutableTensorList = std::vector<std::pair<float *, int64_t>>;

class Device {
public:
  virtual ~Device() = default;
  // "cpu", "cuda:0 NVIDIA H100 80GB HBM3": the start-up summary's device line.
  virtual std::string describe() const = 0;

  // `bytes` of zeroed device memory (bytes may be 0), aligned to at least 64 bytes; throws
  // megart::Error naming the size when the device is out of memory. The runtime allocates only
  // through DeviceBuffer, which counts the memory (memory_accounting.h); these two are the
  // backend's side of it.
  virtual void *allocate(std::size_t bytes) = 0;
  virtual void release(void *p) noexcept = 0;
  virtual void zero(void *p, std::size_t bytes) = 0;
  virtual void copy_from_host(void *dst, const void *host_src, std::size_t bytes) = 0;
  virtual void copy_to_host(void *host_dst, const void *src, std::size_t bytes) = 0;
  // Blocks until the work queued on the device is done (for timing).
  virtual void synchronize() = 0;

  // Sum of the squares of every element of `tensors` together, accumulated in double. The
  // result does not depend on thread counts or launch configuration.
  virtual double sum_of_squares(const TensorList &tensors) = 0;
  // Multiplies every element by coeff.
  virtual void scale(const MutableTensorList &tensors, float coeff) = 0;
  // n floats to bf16 bits (megart/bf16.h's float_to_bf16) and back, for gradients reduced in
  // bf16 (--grad-reduce-in-bf16).
  virtual void to_bf16(uint16_t *out, const float *in, int64_t n) = 0;
  virtual void from_bf16(float *out, const uint16_t *in, int64_t n) = 0;
  // One AdamW update of every tensor (optimizer.h's adamw_update, elementwise identical).
  virtual void adamw(const std::vector<AdamWTensor> &tensors, const AdamWScalars &with_decay,
                     const AdamWScalars &without_decay) = 0;

  // The communicator for this device's buffers along one axis, made from the host (MPI or
  // self) communicator of the same ranks, which it may keep for host buffers. Collective over
  // host's ranks. The CPU device returns `host` itself.
  virtual std::unique_ptr<Communicator> communicator(std::unique_ptr<Communicator> host) {
    return host;
  }

  // The precision of the compiled program's GEMMs from now on. Throws megart::Error, before
  // anything is allocated, when this backend cannot compute in `p`.
  virtual void set_compute_precision(Precision p) = 0;
  // How this device computes in `p` (bf16 / fp16), for the start-up summary's precision line:
  // what the line says after "precision: ".
  virtual std::string describe_precision(Precision p) const {
    return std::string(precision_name(p)) + " GEMM inputs, fp32 accumulation";
  }

  // Dense peak TFLOP/s of one device for the program's compute precision (for MFU); 0 when
  // unknown.
  virtual double peak_tflops() const { return 0; }

  // How long a wait for queued device work (which may hold collectives waiting on other ranks)
  // may take before it throws megart::Error naming comm_activity(). The CPU device never waits.
  virtual void set_timeout(double seconds) { (void)seconds; }
};

// The host: 64-byte-aligned heap memory, OpenMP loops.
Device &cpu_device();

// An owned, zeroed allocation on a device (move-only), counted in memory_tracker() under
// `category` (its requested size, in bytes) for as long as it lives.
class DeviceBuffer {
public:
  DeviceBuffer() = default;
  DeviceBuffer(Device &device, std::size_t bytes, MemoryCategory category)
      : device_(&device), data_(device.allocate(bytes)), bytes_(bytes), category_(category) {
    memory_tracker().allocated(category_, bytes_);
  }
  DeviceBuffer(DeviceBuffer &&other) noexcept { swap(other); }
  DeviceBuffer &operator=(DeviceBuffer &&other) noexcept {
    DeviceBuffer(std::move(other)).swap(*this);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  ~DeviceBuffer() {
    if (!data_)
      return;
    device_->release(data_);
    memory_tracker().released(category_, bytes_);
  }

  void *data() const { return data_; }
  template <typename T> T *as() const { return static_cast<T *>(data_); }
  std::size_t bytes() const { return bytes_; }
  MemoryCategory category() const { return category_; }

private:
  void swap(DeviceBuffer &o) noexcept {
    std::swap(device_, o.device_);
    std::swap(data_, o.data_);
    std::swap(bytes_, o.bytes_);
    std::swap(category_, o.category_);
  }
  Device *device_ = nullptr;
  void *data_ = nullptr;
  std::size_t bytes_ = 0;
  MemoryCategory category_ = MemoryCategory::Workspace; // counts nothing while data_ is null
};

} // namespace megart
