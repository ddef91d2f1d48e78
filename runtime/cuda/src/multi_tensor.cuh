// Multi-tensor launches: the tensors of a list are cut into fixed tiles and one launch covers
// the tiles of up to N tensors, whose pointers travel in the kernel argument (no host-to-device
// copy, no synchronisation). Each block finds its tensor by binary search over the tile starts.
#pragma once

#include "cuda_detail.cuh"

namespace megart::cuda::detail {

template <typename Slot, int N> struct TensorBatch {
  Slot slot[N];
  int64_t first_tile[N + 1]; // tensor k owns tiles [first_tile[k], first_tile[k + 1])
  int count;
};

// The tensor owning `tile`: the largest k with first_tile[k] <= tile (tensors are never empty).
template <typename Slot, int N> __device__ inline int batch_tensor(const TensorBatch<Slot, N> &b, int64_t tile) {
  int lo = 0, hi = b.count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (b.first_tile[mid] <= tile)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

// Calls launch(batch, tiles) for each batch of up to N non-empty tensors, in list order;
// slot(i) makes tensor i's slot and size(i) its element count.
template <typename Slot, int N, typename MakeSlot, typename Size, typename Launch>
void for_each_batch(int64_t n_tensors, int64_t tile_elements, MakeSlot slot, Size size, Launch launch) {
  TensorBatch<Slot, N> batch{};
  int64_t tiles = 0;
  auto flush = [&] {
    if (batch.count == 0)
      return;
    batch.first_tile[batch.count] = tiles;
    launch(batch, tiles);
    batch.count = 0;
    tiles = 0;
  };
  for (int64_t i = 0; i < n_tensors; ++i) {
    const int64_t n = size(i);
    require(n >= 0, "multi-tensor kernel: tensor " + std::to_string(i) + " has " + std::to_string(n) + " elements");
    if (n == 0)
      continue;
    const int64_t t = (n + tile_elements - 1) / tile_elements;
    // A launch's grid must stay below 2^31 blocks.
    if (batch.count == N || tiles + t >= (int64_t{1} << 31) - 1)
      flush();
    require(t < (int64_t{1} << 31) - 1, "multi-tensor kernel: tensor " + std::to_string(i) + " is too large");
    batch.slot[batch.count] = slot(i);
    batch.first_tile[batch.count] = tiles;
    ++batch.count;
    tiles += t;
  }
  flush();
}

} // namespace megart::cuda::detail
