// Vocabulary-parallel kernels and axis collectives. Templates over the activation storage type
// (parallel_kernels.h): loads widen, stores round once; the statistics are fp32.
#include "megart/parallel_kernels.h"

#include "kernels_detail.h"
#include "megart/layout_kernels.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <cstring>
#include <vector>

namespace megart::cpu {

namespace {
bool inShare(int32_t id, int64_t start, int64_t local) { return id >= start && id < start + local; }
} // namespace

template <typename A>
void embedding_forward_shard(A *out, const float *table, const int32_t *ids, int64_t tokens, int64_t vocab_local,
                             int64_t dim, int64_t vocab_start) {
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < tokens; ++t) {
    A *row = out + t * dim;
    if (inShare(ids[t], vocab_start, vocab_local))
      detail::convert(row, table + (ids[t] - vocab_start) * dim, dim);
    else
      std::memset(row, 0, sizeof(A) * dim); // all-zero bits: +0 in every type
  }
}

template <typename A>
void embedding_backward_shard(float *dtable, const A *dout, const int32_t *ids, int64_t tokens,
                              int64_t vocab_local, int64_t dim, int64_t vocab_start) {
  std::memset(dtable, 0, sizeof(float) * vocab_local * dim);
  // Tokens in order, columns in parallel: the same sums in the same order on every run.
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < dim; ++c)
    for (int64_t t = 0; t < tokens; ++t)
      if (inShare(ids[t], vocab_start, vocab_local))
        dtable[(ids[t] - vocab_start) * dim + c] += to_float(dout[t * dim + c]);
}

int64_t valid_columns(int64_t vocab_size, int64_t vocab_start, int64_t vocab_local) {
  return std::clamp<int64_t>(vocab_size - vocab_start, 0, vocab_local);
}

template <typename A> void logits_max(float *out, const A *logits, int64_t tokens, int64_t vocab, int64_t valid) {
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < tokens; ++t) {
    const A *row = logits + t * vocab;
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t v = 0; v < valid; ++v)
      m = std::fmax(m, to_float(row[v]));
    out[t] = m;
  }
}

template <typename A>
void logits_sum_exp(float *out, const A *logits, const float *max, int64_t tokens, int64_t vocab, int64_t valid) {
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < tokens; ++t) {
    const A *row = logits + t * vocab;
    double sum = 0;
    for (int64_t v = 0; v < valid; ++v)
      sum += std::exp(static_cast<double>(to_float(row[v])) - max[t]);
    out[t] = static_cast<float>(sum);
  }
}

template <typename A>
void target_logit(float *out, const A *logits, const int32_t *labels, int64_t tokens, int64_t vocab,
                  int64_t vocab_start) {
  for (int64_t t = 0; t < tokens; ++t)
    out[t] = inShare(labels[t], vocab_start, vocab) ? to_float(logits[t * vocab + labels[t] - vocab_start]) : 0.0f;
}

float cross_entropy_from_stats(const float *max, const float *sum_exp, const float *target, int64_t tokens,
                               const int32_t *labels, int32_t ignore_index) {
  double total = 0;
  int64_t n = 0;
  for (int64_t t = 0; t < tokens; ++t) {
    if (labels && labels[t] == ignore_index)
      continue;
    total += static_cast<double>(max[t]) + std::log(static_cast<double>(sum_exp[t])) - target[t];
    ++n;
  }
  return n ? static_cast<float>(total / static_cast<double>(n)) : 0.0f;
}

template <typename A>
void cross_entropy_backward_from_stats(A *dlogits, float dloss, const A *logits, const int32_t *labels,
                                       const float *max, const float *sum_exp, int64_t tokens, int64_t vocab,
                                       int64_t vocab_start, int64_t valid, int32_t ignore_index) {
  int64_t n = 0;
  for (int64_t t = 0; t < tokens; ++t)
    n += labels[t] != ignore_index;
  const double scale = n ? static_cast<double>(dloss) / static_cast<double>(n) : 0.0;
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < tokens; ++t) {
    const A *row = logits + t * vocab;
    A *drow = dlogits + t * vocab;
    if (labels[t] == ignore_index) {
      for (int64_t v = 0; v < vocab; ++v)
        drow[v] = from_float<A>(0.0f);
      continue;
    }
    const double inv = 1.0 / sum_exp[t];
    auto grad = [&](int64_t v) {
      return static_cast<float>(std::exp(static_cast<double>(to_float(row[v])) - max[t]) * inv * scale);
    };
    for (int64_t v = 0; v < valid; ++v)
      drow[v] = from_float<A>(grad(v));
    for (int64_t v = valid; v < vocab; ++v)
      drow[v] = from_float<A>(0.0f);
    // The label column recomputed from the fp32 value, so that a 16-bit store still rounds once.
    if (inShare(labels[t], vocab_start, vocab)) {
      const int64_t l = labels[t] - vocab_start;
      drow[l] = from_float<A>((l < valid ? grad(l) : 0.0f) - static_cast<float>(scale));
    }
  }
}

template <typename T>
void all_gather_axis(Communicator &comm, T *out, const T *in, int64_t outer, int64_t dim_local, int64_t inner) {
  const int64_t n = outer * dim_local * inner, ranks = comm.size();
  if (outer == 1) { // rank-major already
    comm.all_gather(out, in, n);
    return;
  }
  std::vector<T> gathered(static_cast<size_t>(n * ranks));
  comm.all_gather(gathered.data(), in, n);
  for (int64_t r = 0; r < ranks; ++r) // rank r's block goes to columns [r * dim_local, ...)
    pad_into(out, gathered.data() + r * n, outer, dim_local, dim_local * ranks, inner, r * dim_local);
}

template <typename T>
void reduce_scatter_axis(Communicator &comm, T *out, const T *in, int64_t outer, int64_t dim_local,
                         int64_t inner) {
  const int64_t n = outer * dim_local * inner, ranks = comm.size();
  if (outer == 1) {
    comm.reduce_scatter_sum(out, in, n);
    return;
  }
  std::vector<T> rankMajor(static_cast<size_t>(n * ranks));
  for (int64_t r = 0; r < ranks; ++r)
    slice(rankMajor.data() + r * n, in, outer, dim_local * ranks, dim_local, inner, r * dim_local);
  comm.reduce_scatter_sum(out, rankMajor.data(), n);
}

template <typename T>
void all_slice_axis(Communicator &comm, T *out, const T *in, int64_t outer, int64_t dim_local, int64_t inner) {
  slice(out, in, outer, dim_local * comm.size(), dim_local, inner, comm.rank() * dim_local);
}

void embedding_forward_shard(float *out, const float *table, const int32_t *ids, int64_t tokens,
                             int64_t vocab_local, int64_t dim, int64_t vocab_start) {
  embedding_forward_shard<float>(out, table, ids, tokens, vocab_local, dim, vocab_start);
}
void embedding_backward_shard(float *dtable, const float *dout, const int32_t *ids, int64_t tokens,
                              int64_t vocab_local, int64_t dim, int64_t vocab_start) {
  embedding_backward_shard<float>(dtable, dout, ids, tokens, vocab_local, dim, vocab_start);
}
void logits_max(float *out, const float *logits, int64_t tokens, int64_t vocab, int64_t valid) {
  logits_max<float>(out, logits, tokens, vocab, valid);
}
void logits_sum_exp(float *out, const float *logits, const float *max, int64_t tokens, int64_t vocab,
                    int64_t valid) {
  logits_sum_exp<float>(out, logits, max, tokens, vocab, valid);
}
void target_logit(float *out, const float *logits, const int32_t *labels, int64_t tokens, int64_t vocab,
                  int64_t vocab_start) {
  target_logit<float>(out, logits, labels, tokens, vocab, vocab_start);
}
void cross_entropy_backward_from_stats(float *dlogits, float dloss, const float *logits, const int32_t *labels,
                                       const float *max, const float *sum_exp, int64_t tokens, int64_t vocab,
                                       int64_t vocab_start, int64_t valid, int32_t ignore_index) {
  cross_entropy_backward_from_stats<float>(dlogits, dloss, logits, labels, max, sum_exp, tokens, vocab,
                                           vocab_start, valid, ignore_index);
}
void all_gather_axis(Communicator &comm, float *out, const float *in, int64_t outer, int64_t dim_local,
                     int64_t inner) {
  all_gather_axis<float>(comm, out, in, outer, dim_local, inner);
}
void reduce_scatter_axis(Communicator &comm, float *out, const float *in, int64_t outer, int64_t dim_local,
                         int64_t inner) {
  reduce_scatter_axis<float>(comm, out, in, outer, dim_local, inner);
}
void all_slice_axis(Communicator &comm, float *out, const float *in, int64_t outer, int64_t dim_local,
                    int64_t inner) {
  all_slice_axis<float>(comm, out, in, outer, dim_local, inner);
}

#define MEGART_PARALLEL(A)                                                                         \
  template void embedding_forward_shard<A>(A *, const float *, const int32_t *, int64_t, int64_t, int64_t, \
                                           int64_t);                                               \
  template void embedding_backward_shard<A>(float *, const A *, const int32_t *, int64_t, int64_t, int64_t, \
                                            int64_t);                                              \
  template void logits_max<A>(float *, const A *, int64_t, int64_t, int64_t);                      \
  template void logits_sum_exp<A>(float *, const A *, const float *, int64_t, int64_t, int64_t);   \
  template void target_logit<A>(float *, const A *, const int32_t *, int64_t, int64_t, int64_t);   \
  template void cross_entropy_backward_from_stats<A>(A *, float, const A *, const int32_t *, const float *, \
                                                     const float *, int64_t, int64_t, int64_t, int64_t, int32_t); \
  template void all_gather_axis<A>(Communicator &, A *, const A *, int64_t, int64_t, int64_t);     \
  template void reduce_scatter_axis<A>(Communicator &, A *, const A *, int64_t, int64_t, int64_t); \
  template void all_slice_axis<A>(Communicator &, A *, const A *, int64_t, int64_t, int64_t);
MEGART_PARALLEL(bf16_t)
MEGART_PARALLEL(fp16_t)

} // namespace megart::cpu
