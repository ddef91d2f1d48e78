#include "megac/Target/MemoryPlan.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <numeric>

using namespace megac;


/// Greedy by size: largest buffers first, each at the lowest offset that does not collide
/// with an already placed buffer alive at the same time.
int64_t megac::planArena(llvm::ArrayRef<BufferLifetime> buffers, llvm::SmallVectorImpl<int64_t> &offsets) {
  offsets.assign(buffers.size(), 0);
  std::vector<size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return buffers[a].bytes > buffers[b].bytes; });
  std::vector<size_t> placed;
  int64_t total = 0;
  for (size_t i : order) {
    const BufferLifetime &buf = buffers[i];
    // Ranges taken by placed buffers that are alive together with this one, by offset.
    std::vector<std::pair<int64_t, int64_t>> taken;
    for (size_t j : placed)
      if (buffers[j].firstUse <= buf.lastUse && buf.firstUse <= buffers[j].lastUse)
        taken.push_back({offsets[j], offsets[j] + alignUp(buffers[j].bytes)});
    llvm::sort(taken);
    int64_t offset = 0;
    for (auto [begin, end] : taken) {
      if (offset + alignUp(buf.bytes) <= begin)
        break;
      offset = std::max(offset, end);
    }
    offsets[i] = offset;
    total = std::max(total, offset + alignUp(buf.bytes));
    placed.push_back(i);
  }
  return total;
}
