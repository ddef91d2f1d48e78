// Collectives along one dimension of a tensor viewed as [outer, dim, inner], split along dim
// (the GPU twins of kernels_parallel.cpp's). The communicator moves rank-major blocks
// [rank][outer, dim_local, inner]; the tensor holds them interleaved along dim, so a block copy
// reorders between the two, except when outer == 1 (already rank-major).
#include "cuda_detail.cuh"

namespace megart::cuda {

namespace {

// dst[a * dst_a + b * dst_b + j] = src[a * src_a + b * src_b + j] for every row (a, b) of the
// a_count x b_count rows and j < len. One block per row; T = float4 moves four floats at once.
template <typename T>
__global__ void copy_rows_kernel(T *dst, const T *src, int64_t rows, int64_t b_count, int64_t len,
                                 int64_t dst_a, int64_t dst_b, int64_t src_a, int64_t src_b) {
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t a = row / b_count, b = row % b_count;
    T *d = dst + a * dst_a + b * dst_b;
    const T *s = src + a * src_a + b * src_b;
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x)
      d[j] = s[j];
  }
}

struct RowCopy {
  int64_t a_count, b_count, len;      // rows (a, b), each of len floats
  int64_t dst_a, dst_b, src_a, src_b; // row starts, in floats
};

bool aligned16(const void *p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

void copy_rows(float *dst, const float *src, const RowCopy &c) {
  const int64_t rows = c.a_count * c.b_count;
  if (rows == 0 || c.len == 0)
    return;
  const unsigned blocks = detail::row_blocks(rows);
  // Every row start is 16-byte aligned when the bases are and all offsets are multiples of 4.
  if (aligned16(dst) && aligned16(src) && c.len % 4 == 0 && c.dst_a % 4 == 0 && c.dst_b % 4 == 0 &&
      c.src_a % 4 == 0 && c.src_b % 4 == 0) {
    copy_rows_kernel<float4><<<blocks, detail::kThreads, 0, compute_stream()>>>(
        reinterpret_cast<float4 *>(dst), reinterpret_cast<const float4 *>(src), rows, c.b_count, c.len / 4,
        c.dst_a / 4, c.dst_b / 4, c.src_a / 4, c.src_b / 4);
  } else {
    copy_rows_kernel<float><<<blocks, detail::kThreads, 0, compute_stream()>>>(
        dst, src, rows, c.b_count, c.len, c.dst_a, c.dst_b, c.src_a, c.src_b);
  }
  detail::check_launch("copy_rows_kernel (parallel axis)");
}

} // namespace

void all_gather_axis(Communicator &comm, float *out, const float *in, int64_t outer, int64_t dim_local,
                     int64_t inner) {
  const int64_t ranks = comm.size(), len = dim_local * inner, n = outer * len;
  if (n == 0) // nothing to move (workspace(0) is null, which the communicator rejects)
    return;
  if (ranks == 1) { // whatever kind of communicator: no rank to hear from
    copy_buffer(out, in, sizeof(float) * n);
    return;
  }
  if (outer == 1) { // rank-major already
    comm.all_gather(out, in, n);
    return;
  }
  float *gathered = static_cast<float *>(detail::workspace(sizeof(float) * n * ranks));
  comm.all_gather(gathered, in, n);
  // gathered[r][o][j] -> out[o][r * len + j]
  copy_rows(out, gathered, {ranks, outer, len, len, ranks * len, outer * len, len});
}

void reduce_scatter_axis(Communicator &comm, float *out, const float *in, int64_t outer, int64_t dim_local,
                         int64_t inner) {
  const int64_t ranks = comm.size(), len = dim_local * inner, n = outer * len;
  if (n == 0) // nothing to move (workspace(0) is null, which the communicator rejects)
    return;
  if (ranks == 1) {
    copy_buffer(out, in, sizeof(float) * n);
    return;
  }
  if (outer == 1) {
    comm.reduce_scatter_sum(out, in, n);
    return;
  }
  float *rank_major = static_cast<float *>(detail::workspace(sizeof(float) * n * ranks));
  // in[o][r * len + j] -> rank_major[r][o][j]
  copy_rows(rank_major, in, {ranks, outer, len, outer * len, len, len, ranks * len});
  comm.reduce_scatter_sum(out, rank_major, n);
}

void all_slice_axis(Communicator &comm, float *out, const float *in, int64_t outer, int64_t dim_local,
                    int64_t inner) {
  const int64_t ranks = comm.size(), len = dim_local * inner;
  if (outer * len == 0) // nothing to move
    return;
  if (ranks == 1) {
    copy_buffer(out, in, sizeof(float) * outer * len);
    return;
  }
  // in[o][rank * len + j] -> out[o][j]
  copy_rows(out, in + comm.rank() * len, {1, outer, len, 0, len, 0, ranks * len});
}

} // namespace megart::cuda
