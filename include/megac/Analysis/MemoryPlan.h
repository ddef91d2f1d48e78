// Static memory planning: buffers with known sizes and lifetimes get offsets in one arena,
// reusing memory between buffers that are never alive at the same time.
#pragma once

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <cstddef>
#include <cstdint>

namespace megac {

struct BufferLifetime {
  int64_t firstUse; // index of the op that writes it
  int64_t lastUse;  // index of the last op that reads it (inclusive)
  int64_t bytes;
};

constexpr int64_t kArenaAlignment = 64;
/// `n` bytes rounded up to a multiple of kArenaAlignment.
constexpr int64_t alignUp(int64_t n) { return (n + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment; }

/// Functions with more buffers than this are planned by a linear scan (O(n log n)) instead of
/// greedy by size (O(n^2), tighter).
constexpr size_t kGreedyArenaBufferLimit = 4096;

/// Assigns each buffer an offset (a multiple of kArenaAlignment) so that buffers whose
/// lifetimes overlap never overlap in memory. Returns the arena size needed.
int64_t planArena(llvm::ArrayRef<BufferLifetime> buffers, llvm::SmallVectorImpl<int64_t> &offsets);

} // namespace megac
