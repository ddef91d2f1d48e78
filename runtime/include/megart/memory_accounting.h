// Exact accounting of the device memory the runtime allocates. Every DeviceBuffer names what it
// holds (a MemoryCategory); the process's MemoryTracker keeps the bytes held now and their
// high-water mark, per category and in total. The compiler's memory plan is to predict the same
// numbers (DESIGN.md, "Memory and state"), so a buffer counts as the byte size it asked for:
// the allocator's rounding (to 64 bytes on the CPU, 256 on CUDA) is not counted.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>

namespace megart {

enum class MemoryCategory : int32_t {
  Parameters,     // the weights (ParamStore)
  Gradients,      // the flat gradient buffer, padding between gradients included (ParamStore)
  OptimizerState, // AdamW's exp_avg and exp_avg_sq
  MasterWeights,  // fp32 copies of lower-precision weights: none yet (the weights are fp32)
  Activations,    // pipeline stashes of in-flight microbatches
  Workspace,      // the compiled programs' arenas
  Communication,  // bf16 gradient copies, pipeline send/receive buffers, other staging buffers
  Data,           // the device copies of token ids and labels
  // Host memory of ZeRO-Offload (--optimizer-cpu-offload): the offloaded part of this rank's
  // shard's master weights, AdamW moments and gradient copies.
  OffloadedOptimizer,
  // Weights read but never trained (LoRA's base model: ParamStore's frozen store).
  FrozenParameters,
};
constexpr int kNumMemoryCategories = 10;

// Every category, in the order reports list them.
std::array<MemoryCategory, kNumMemoryCategories> memory_categories();
// "optimizer_state": the metrics file's key.
const char *memory_category_key(MemoryCategory c);
// "optimizer state": the log line's words.
const char *memory_category_label(MemoryCategory c);

// Bytes held, now and at the high-water mark, per category and in total. peak_total is the
// highest the sum ever was, which can be less than the sum of the categories' peaks.
struct MemoryUsage {
  std::array<int64_t, kNumMemoryCategories> current{}, peak{};
  int64_t current_total = 0, peak_total = 0;

  int64_t current_of(MemoryCategory c) const { return current[static_cast<size_t>(c)]; }
  int64_t peak_of(MemoryCategory c) const { return peak[static_cast<size_t>(c)]; }
};

class MemoryTracker {
public:
  void allocated(MemoryCategory c, std::size_t bytes);
  void released(MemoryCategory c, std::size_t bytes) noexcept;
  MemoryUsage usage() const;
  // The high-water marks start again from what is held now: a training run reports its own
  // peaks, also when it is not the first in the process (the unit tests run many).
  void reset_peaks();

private:
  mutable std::mutex mutex_;
  MemoryUsage usage_;
};

// The process's tracker, which every DeviceBuffer reports to.
MemoryTracker &memory_tracker();

} // namespace megart
