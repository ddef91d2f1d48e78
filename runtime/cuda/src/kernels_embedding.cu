// Token embedding lookup and its gradient, whole-vocabulary and vocabulary-parallel (a rank
// holds rows [vocab_start, vocab_start + vocab_local)). The whole-vocabulary kernels are the
// shard kernels with vocab_start = 0.
//
// The gradient is deterministic without float atomics: the tokens are stably sorted by id (CUB
// radix sort of (id, position) pairs), then one block per distinct id adds that id's dout rows
// in token order into a zeroed dtable row. That is the CPU's order (0 + dout[t1] + dout[t2] ...),
// so the results are bitwise equal to it.
#include "cuda_detail.cuh"

#include <cub/device/device_radix_sort.cuh>
#include <limits>

namespace megart::cuda {
namespace {

// One block per token row, threads over the columns; ids outside the share give a zero row.
__global__ void embedding_forward_kernel(float *out, const float *table, const int32_t *ids, int64_t tokens,
                                         int64_t vocab_local, int64_t dim, int64_t vocab_start) {
  for (int64_t t = blockIdx.x; t < tokens; t += gridDim.x) {
    const int32_t id = ids[t];
    const bool mine = detail::in_share(id, vocab_start, vocab_local);
    const float *src = mine ? table + (id - vocab_start) * dim : table;
    float *dst = out + t * dim;
    for (int64_t d = threadIdx.x; d < dim; d += blockDim.x)
      dst[d] = mine ? src[d] : 0.0f;
  }
}

// Sort keys: the local row, or vocab_local (sorts last, skipped) for ids outside the share.
__global__ void embedding_keys_kernel(int32_t *keys, int32_t *positions, const int32_t *ids, int64_t tokens,
                                      int64_t vocab_local, int64_t vocab_start) {
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < tokens;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int32_t id = ids[t];
    keys[t] = detail::in_share(id, vocab_start, vocab_local) ? static_cast<int32_t>(id - vocab_start)
                                                     : static_cast<int32_t>(vocab_local);
    positions[t] = static_cast<int32_t>(t);
  }
}

// Block i handles sorted position i if it starts a run of equal keys: it sums the run's dout
// rows (positions ascending, as the sort is stable) into dtable[key].
__global__ void embedding_runs_kernel(float *dtable, const float *dout, const int32_t *keys,
                                      const int32_t *positions, int64_t tokens, int64_t vocab_local, int64_t dim) {
  for (int64_t i = blockIdx.x; i < tokens; i += gridDim.x) {
    const int32_t key = keys[i];
    if (key == vocab_local || (i > 0 && keys[i - 1] == key))
      continue;
    for (int64_t d = threadIdx.x; d < dim; d += blockDim.x) {
      float acc = 0.0f;
      for (int64_t j = i; j < tokens && keys[j] == key; ++j)
        acc += dout[static_cast<int64_t>(positions[j]) * dim + d];
      dtable[static_cast<int64_t>(key) * dim + d] = acc;
    }
  }
}

void check_args(const char *kernel, int64_t tokens, int64_t vocab_local, int64_t dim, int64_t vocab_start) {
  detail::require(tokens >= 0 && vocab_local >= 0 && dim >= 0 && vocab_start >= 0,
                  std::string(kernel) + ": negative argument (tokens " + std::to_string(tokens) + ", vocab " +
                      std::to_string(vocab_local) + ", dim " + std::to_string(dim) + ", vocab_start " +
                      std::to_string(vocab_start) + ")");
}

void forward(const char *kernel, float *out, const float *table, const int32_t *ids, int64_t tokens,
             int64_t vocab_local, int64_t dim, int64_t vocab_start) {
  check_args(kernel, tokens, vocab_local, dim, vocab_start);
  if (tokens == 0 || dim == 0)
    return;
  embedding_forward_kernel<<<detail::row_blocks(tokens), detail::kThreads, 0, compute_stream()>>>(
      out, table, ids, tokens, vocab_local, dim, vocab_start);
  detail::check_launch(kernel);
}

void backward(const char *kernel, float *dtable, const float *dout, const int32_t *ids, int64_t tokens,
              int64_t vocab_local, int64_t dim, int64_t vocab_start) {
  check_args(kernel, tokens, vocab_local, dim, vocab_start);
  // Keys and positions are int32 (and CUB counts items in int).
  detail::require(tokens < std::numeric_limits<int32_t>::max() && vocab_local < std::numeric_limits<int32_t>::max(),
                  std::string(kernel) + ": " + std::to_string(tokens) + " tokens or a vocabulary of " +
                      std::to_string(vocab_local) + " is beyond the CUDA kernel's int32 range");
  zero_buffer(dtable, sizeof(float) * vocab_local * dim);
  if (tokens == 0 || dim == 0 || vocab_local == 0)
    return;
  cudaStream_t stream = compute_stream();
  const int n = static_cast<int>(tokens);
  int end_bit = 1; // bits of the largest key (the sentinel vocab_local): a shorter sort
  while ((int64_t{1} << end_bit) <= vocab_local)
    ++end_bit;

  size_t sort_bytes = 0;
  check(cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, static_cast<const int32_t *>(nullptr),
                                        static_cast<int32_t *>(nullptr), static_cast<const int32_t *>(nullptr),
                                        static_cast<int32_t *>(nullptr), n, 0, end_bit, stream),
        "embedding_backward (sort size)");
  const size_t array = detail::aligned_bytes(sizeof(int32_t) * tokens);
  char *base = static_cast<char *>(detail::workspace(4 * array + sort_bytes));
  auto *keys_in = reinterpret_cast<int32_t *>(base);
  auto *pos_in = reinterpret_cast<int32_t *>(base + array);
  auto *keys = reinterpret_cast<int32_t *>(base + 2 * array);
  auto *pos = reinterpret_cast<int32_t *>(base + 3 * array);
  void *sort_scratch = base + 4 * array;

  embedding_keys_kernel<<<detail::elementwise_blocks(tokens), detail::kThreads, 0, stream>>>(
      keys_in, pos_in, ids, tokens, vocab_local, vocab_start);
  detail::check_launch(kernel);
  check(cub::DeviceRadixSort::SortPairs(sort_scratch, sort_bytes, keys_in, keys, pos_in, pos, n, 0, end_bit, stream),
        "embedding_backward (sort)");
  embedding_runs_kernel<<<detail::row_blocks(tokens), detail::kThreads, 0, stream>>>(dtable, dout, keys, pos, tokens,
                                                                                     vocab_local, dim);
  detail::check_launch(kernel);
}

} // namespace

void embedding_forward(float *out, const float *table, const int32_t *ids, int64_t tokens, int64_t vocab,
                       int64_t dim) {
  forward("embedding_forward", out, table, ids, tokens, vocab, dim, 0);
}

void embedding_backward(float *dtable, const float *dout, const int32_t *ids, int64_t tokens, int64_t vocab,
                        int64_t dim) {
  backward("embedding_backward", dtable, dout, ids, tokens, vocab, dim, 0);
}

void embedding_forward_shard(float *out, const float *table, const int32_t *ids, int64_t tokens,
                             int64_t vocab_local, int64_t dim, int64_t vocab_start) {
  forward("embedding_forward_shard", out, table, ids, tokens, vocab_local, dim, vocab_start);
}

void embedding_backward_shard(float *dtable, const float *dout, const int32_t *ids, int64_t tokens,
                              int64_t vocab_local, int64_t dim, int64_t vocab_start) {
  backward("embedding_backward_shard", dtable, dout, ids, tokens, vocab_local, dim, vocab_start);
}

} // namespace megart::cuda
