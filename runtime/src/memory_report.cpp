#include "megart/memory_report.h"

#include <cstdio>

namespace megart {

std::string format_bytes(int64_t bytes) {
  static const char *const units[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024)
    return std::to_string(bytes) + " B";
  double x = static_cast<double>(bytes) / 1024;
  int unit = 0;
  for (; x >= 1024 && unit < 3; ++unit)
    x /= 1024;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f %s", x, units[unit]);
  return buf;
}

std::string describe_memory(const MemoryUsage &usage, const std::string &ranks) {
  std::string s = "memory (" + ranks + "):";
  for (MemoryCategory c : memory_categories())
    // ZeRO-Offload's host memory and LoRA's frozen base only where there are some
    if ((c != MemoryCategory::OffloadedOptimizer && c != MemoryCategory::FrozenParameters) || usage.peak_of(c) > 0)
      s += std::string(" ") + memory_category_label(c) + " " + format_bytes(usage.peak_of(c)) + ",";
  return s + " peak total " + format_bytes(usage.peak_total);
}

std::vector<MemoryUsage> gather_memory_usage(const MemoryUsage &mine, Communicator &pp) {
  // A sum in which every rank fills only its own slot is a gather; doubles hold byte counts
  // below 2^53 exactly.
  constexpr size_t kValues = 2 * kNumMemoryCategories + 2;
  std::vector<double> all(kValues * static_cast<size_t>(pp.size()), 0.0);
  double *slot = all.data() + kValues * static_cast<size_t>(pp.rank());
  for (size_t i = 0; i < kNumMemoryCategories; ++i) {
    slot[i] = static_cast<double>(mine.current[i]);
    slot[kNumMemoryCategories + i] = static_cast<double>(mine.peak[i]);
  }
  slot[2 * kNumMemoryCategories] = static_cast<double>(mine.current_total);
  slot[2 * kNumMemoryCategories + 1] = static_cast<double>(mine.peak_total);
  pp.all_reduce_sum(all.data(), static_cast<int64_t>(all.size()));
  std::vector<MemoryUsage> usages(static_cast<size_t>(pp.size()));
  for (size_t r = 0; r < usages.size(); ++r) {
    const double *v = all.data() + kValues * r;
    MemoryUsage &u = usages[r];
    for (size_t i = 0; i < kNumMemoryCategories; ++i) {
      u.current[i] = static_cast<int64_t>(v[i]);
      u.peak[i] = static_cast<int64_t>(v[kNumMemoryCategories + i]);
    }
    u.current_total = static_cast<int64_t>(v[2 * kNumMemoryCategories]);
    u.peak_total = static_cast<int64_t>(v[2 * kNumMemoryCategories + 1]);
  }
  return usages;
}

} // namespace megart
