#include "megart/memory_accounting.h"

#include <algorithm>

namespace megart {

std::array<MemoryCategory, kNumMemoryCategories> memory_categories() {
  return {MemoryCategory::Parameters,    MemoryCategory::Gradients,
          MemoryCategory::OptimizerState, MemoryCategory::MasterWeights,
          MemoryCategory::Activations,   MemoryCategory::Workspace,
          MemoryCategory::Communication, MemoryCategory::Data,
          MemoryCategory::OffloadedOptimizer, MemoryCategory::FrozenParameters};
}

const char *memory_category_key(MemoryCategory c) {
  switch (c) {
  case MemoryCategory::Parameters: return "parameters";
  case MemoryCategory::Gradients: return "gradients";
  case MemoryCategory::OptimizerState: return "optimizer_state";
  case MemoryCategory::MasterWeights: return "master_weights";
  case MemoryCategory::Activations: return "activations";
  case MemoryCategory::Workspace: return "workspace";
  case MemoryCategory::Communication: return "communication";
  case MemoryCategory::Data: return "data";
  case MemoryCategory::OffloadedOptimizer: return "offloaded_optimizer";
  case MemoryCategory::FrozenParameters: return "frozen_parameters";
  }
  return "unknown";
}

const char *memory_category_label(MemoryCategory c) {
  switch (c) {
  case MemoryCategory::OptimizerState: return "optimizer state";
  case MemoryCategory::MasterWeights: return "master weights";
  case MemoryCategory::OffloadedOptimizer: return "offloaded optimizer (host)";
  case MemoryCategory::FrozenParameters: return "frozen parameters";
  default: return memory_category_key(c);
  }
}

void MemoryTracker::allocated(MemoryCategory c, std::size_t bytes) {
  const auto i = static_cast<size_t>(c);
  const auto n = static_cast<int64_t>(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  usage_.current[i] += n;
  usage_.peak[i] = std::max(usage_.peak[i], usage_.current[i]);
  usage_.current_total += n;
  usage_.peak_total = std::max(usage_.peak_total, usage_.current_total);
}

void MemoryTracker::released(MemoryCategory c, std::size_t bytes) noexcept {
  const auto n = static_cast<int64_t>(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  usage_.current[static_cast<size_t>(c)] -= n;
  usage_.current_total -= n;
}

MemoryUsage MemoryTracker::usage() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return usage_;
}

void MemoryTracker::reset_peaks() {
  std::lock_guard<std::mutex> lock(mutex_);
  usage_.peak = usage_.current;
  usage_.peak_total = usage_.current_total;
}

MemoryTracker &memory_tracker() {
  static MemoryTracker tracker;
  return tracker;
}

} // namespace megart
