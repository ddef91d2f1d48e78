#include "megac/Analysis/MemoryPlan.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <queue>
#include <set>

using namespace megac;

namespace {

/// Greedy by size: largest buffers first, each at the lowest offset that does not collide
/// with an already placed buffer alive at the same time. Packs tightly (within a fraction of a
/// percent of the peak of live bytes on our programs) but compares every pair of buffers.
int64_t planGreedyBySize(llvm::ArrayRef<BufferLifetime> buffers, llvm::SmallVectorImpl<int64_t> &offsets) {
  std::vector<size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return buffers[a].bytes > buffers[b].bytes; });
  std::vector<size_t> placed;
  std::vector<std::pair<int64_t, int64_t>> taken;
  int64_t total = 0;
  for (size_t i : order) {
    const BufferLifetime &buf = buffers[i];
    // Ranges taken by placed buffers that are alive together with this one, by offset.
    taken.clear();
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

/// Linear scan: buffers in the order they are written; each takes the smallest free block
/// that holds it (the lowest such), or the top of the arena; a buffer's block is freed after
/// its last use and merged with free neighbours. O(n log n), a few percent looser than greedy
/// by size on long programs.
int64_t planLinearScan(llvm::ArrayRef<BufferLifetime> buffers, llvm::SmallVectorImpl<int64_t> &offsets) {
  std::vector<size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (buffers[a].firstUse != buffers[b].firstUse)
      return buffers[a].firstUse < buffers[b].firstUse;
    return buffers[a].bytes > buffers[b].bytes;
  });
  std::map<int64_t, int64_t> freeByOffset;              // offset -> size
  std::set<std::pair<int64_t, int64_t>> freeBySize;     // (size, offset)
  using Live = std::pair<int64_t, size_t>;              // (lastUse, buffer)
  std::priority_queue<Live, std::vector<Live>, std::greater<Live>> live;
  int64_t top = 0, total = 0;
  auto release = [&](int64_t offset, int64_t size) {
    auto next = freeByOffset.lower_bound(offset);
    if (next != freeByOffset.end() && next->first == offset + size) {
      size += next->second;
      freeBySize.erase({next->second, next->first});
      next = freeByOffset.erase(next);
    }
    if (next != freeByOffset.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == offset) {
        offset = prev->first, size += prev->second;
        freeBySize.erase({prev->second, prev->first});
        freeByOffset.erase(prev);
      }
    }
    if (offset + size == top) { // the arena's end comes down instead
      top = offset;
      return;
    }
    freeByOffset[offset] = size;
    freeBySize.insert({size, offset});
  };
  for (size_t i : order) {
    const BufferLifetime &buf = buffers[i];
    while (!live.empty() && live.top().first < buf.firstUse) {
      size_t j = live.top().second;
      live.pop();
      release(offsets[j], alignUp(buffers[j].bytes));
    }
    const int64_t size = alignUp(buf.bytes);
    if (size == 0) { // takes no memory (greedy by size puts it at 0 too)
      offsets[i] = 0;
      continue;
    }
    auto fit = freeBySize.lower_bound({size, 0});
    if (fit == freeBySize.end()) {
      offsets[i] = top;
      top += size;
    } else {
      auto [blockSize, blockOffset] = *fit;
      freeBySize.erase(fit);
      freeByOffset.erase(blockOffset);
      offsets[i] = blockOffset;
      if (blockSize > size) {
        freeByOffset[blockOffset + size] = blockSize - size;
        freeBySize.insert({blockSize - size, blockOffset + size});
      }
    }
    total = std::max(total, top);
    live.push({buf.lastUse, i});
  }
  return total;
}

} // namespace

int64_t megac::planArena(llvm::ArrayRef<BufferLifetime> buffers, llvm::SmallVectorImpl<int64_t> &offsets) {
  offsets.assign(buffers.size(), 0);
  // Greedy by size costs O(n^2): fine for a layer's function or a model of a few hundred layers
  // in one function, minutes for thousands (whose entry function holds tens of buffers per
  // layer). Beyond this many buffers compile time stays linear in layers instead.
  if (buffers.size() <= kGreedyArenaBufferLimit)
    return planGreedyBySize(buffers, offsets);
  return planLinearScan(buffers, offsets);
}
