// Sum of squares of a list of tensors in double (the gradient norm). Fixed partition: every
// tensor is cut into chunks of kChunk elements (the CPU's chunking), each chunk is reduced by
// one block of fixed shape into its own slot, and one block then adds the slots in a fixed
// shape. The result depends only on the tensors, not on timing.
#include "multi_tensor.cuh"

namespace megart::cuda {
namespace {

constexpr int64_t kChunk = 1 << 16;

struct NormSlot {
  const float *data;
  int64_t n;
};
using NormBatch = detail::TensorBatch<NormSlot, 128>;

// partials[c] = sum of squares of chunk c of the batch (chunks numbered in tensor order).
__global__ void chunk_squares_kernel(double *partials, const __grid_constant__ NormBatch batch) {
  const int k = detail::batch_tensor(batch, blockIdx.x);
  const NormSlot &t = batch.slot[k];
  const int64_t start = (blockIdx.x - batch.first_tile[k]) * kChunk;
  const int64_t end = min(t.n, start + kChunk);
  double s = 0.0;
  for (int64_t i = start + threadIdx.x; i < end; i += blockDim.x)
    s += static_cast<double>(t.data[i]) * t.data[i];
  s = detail::block_sum(s);
  if (threadIdx.x == 0)
    partials[blockIdx.x] = s;
}

// *out = sum of the n partials; a single block.
__global__ void sum_partials_kernel(double *out, const double *partials, int64_t n) {
  const double s = detail::block_sum_of(partials, n);
  if (threadIdx.x == 0)
    *out = s;
}

} // namespace

double sum_of_squares(const float *const *tensors, const int64_t *sizes, int64_t n_tensors) {
  int64_t chunks = 0;
  for (int64_t i = 0; i < n_tensors; ++i) {
    detail::require(sizes[i] >= 0, "sum_of_squares: tensor " + std::to_string(i) + " has " + std::to_string(sizes[i]) +
                                       " elements");
    chunks += (sizes[i] + kChunk - 1) / kChunk;
  }
  if (chunks == 0)
    return 0.0;
  cudaStream_t stream = compute_stream();
  // Slot 0 takes the total, slots 1.. the chunk partials.
  auto *scratch = static_cast<double *>(detail::workspace(sizeof(double) * (chunks + 1)));
  int64_t done = 0;
  detail::for_each_batch<NormSlot, 128>(
      n_tensors, kChunk, [&](int64_t i) { return NormSlot{tensors[i], sizes[i]}; }, [&](int64_t i) { return sizes[i]; },
      [&](const NormBatch &batch, int64_t tiles) {
        chunk_squares_kernel<<<static_cast<unsigned>(tiles), detail::kThreads, 0, stream>>>(scratch + 1 + done, batch);
        detail::check_launch("sum_of_squares");
        done += tiles;
      });
  sum_partials_kernel<<<1, detail::kThreads, 0, stream>>>(scratch, scratch + 1, chunks);
  detail::check_launch("sum_of_squares (total)");
  double total = 0.0;
  device().copy_to_host(&total, scratch, sizeof(double)); // waits for the stream, with the time limit
  return total;
}

} // namespace megart::cuda
