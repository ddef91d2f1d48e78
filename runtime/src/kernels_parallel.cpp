#include "megart/parallel_kernels.h"

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

void embedding_forward_shard(float *out, const float *table, const int32_t *ids, int64_t tokens,
                             int64_t vocab_local, int64_t dim, int64_t vocab_start) {
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < tokens; ++t) {
    float *row = out + t * dim;
    if (inShare(ids[t], vocab_start, vocab_local))
      std::memcpy(row, table + (ids[t] - vocab_start) * dim, sizeof(float) * dim);
    else
      std::memset(row, 0, sizeof(float) * dim);
  }
}

void embedding_backward_shard(float *dtable, const float *dout, const int32_t *ids, int64_t tokens,
                              int64_t vocab_local, int64_t dim, int64_t vocab_start) {
  std::memset(dtable, 0, sizeof(float) * vocab_local * dim);
  // Tokens in order, columns in parallel: the same sums in the same order on every run.
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < dim; ++c)
    for (int64_t t = 0; t < tokens; ++t)
      if (inShare(ids[t], vocab_start, vocab_local))
        dtable[(ids[t] - vocab_start) * dim + c] += dout[t * dim + c];
}

int64_t valid_columns(int64_t vocab_size, int64_t vocab_start, int64_t vocab_local) {
  return std::clamp<int64_t>(vocab_size - vocab_start, 0, vocab_local);
}

void logits_max(float *out, const float *logits, int64_t tokens, int64_t vocab, int64_t valid) {
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < tokens; ++t) {
    const float *row = logits + t * vocab;
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t v = 0; v < valid; ++v)
      m = std::fmax(m, row[v]);
    out[t] = m;
  }
}

void logits_sum_exp(float *out, const float *logits, const float *max, int64_t tokens, int64_t vocab,
                    int64_t valid) {
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < tokens; ++t) {
    const float *row = logits + t * vocab;
    double sum = 0;
    for (int64_t v = 0; v < valid; ++v)
      sum += std::exp(static_cast<double>(row[v]) - max[t]);
    out[t] = static_cast<float>(sum);
  }
}

void target_logit(float *out, const float *logits, const int32_t *labels, int64_t tokens, int64_t vocab,
                  int64_t vocab_start) {
  for (int64_t t = 0; t < tokens; ++t)
    out[t] = inShare(labels[t], vocab_start, vocab) ? logits[t * vocab + labels[t] - vocab_start] : 0.0f;
}

float cross_entropy_from_stats(const float *max, const float *sum_exp, const float *target, int64_t tokens) {
  double total = 0;
  for (int64_t t = 0; t < tokens; ++t)
    total += static_cast<double>(max[t]) + std::log(static_cast<double>(sum_exp[t])) - target[t];
  return static_cast<float>(total / static_cast<double>(tokens));
}

void cross_entropy_backward_from_stats(float *dlogits, float dloss, const float *logits, const int32_t *labels,
                                       const float *max, const float *sum_exp, int64_t tokens, int64_t vocab,
                                       int64_t vocab_start, int64_t valid) {
  const double scale = static_cast<double>(dloss) / static_cast<double>(tokens);
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < tokens; ++t) {
    const float *row = logits + t * vocab;
    float *drow = dlogits + t * vocab;
    const double inv = 1.0 / sum_exp[t];
    for (int64_t v = 0; v < valid; ++v)
      drow[v] = static_cast<float>(std::exp(static_cast<double>(row[v]) - max[t]) * inv * scale);
    for (int64_t v = valid; v < vocab; ++v)
      drow[v] = 0.0f;
    if (inShare(labels[t], vocab_start, vocab))
      drow[labels[t] - vocab_start] -= static_cast<float>(scale);
  }
}

void all_gather_axis(Communicator &comm, float *out, const float *in, int64_t outer, int64_t dim_local,
                     int64_t inner) {
  const int64_t n = outer * dim_local * inner, ranks = comm.size();
  if (outer == 1) { // rank-major already
    comm.all_gather(out, in, n);
    return;
  }
  std::vector<float> gathered(static_cast<size_t>(n * ranks));
  comm.all_gather(gathered.data(), in, n);
  for (int64_t r = 0; r < ranks; ++r) // rank r's block goes to columns [r * dim_local, ...)
    pad_into(out, gathered.data() + r * n, outer, dim_local, dim_local * ranks, inner, r * dim_local);
}

void reduce_scatter_axis(Communicator &comm, float *out, const float *in, int64_t outer, int64_t dim_local,
                         int64_t inner) {
  const int64_t n = outer * dim_local * inner, ranks = comm.size();
  if (outer == 1) {
    comm.reduce_scatter_sum(out, in, n);
    return;
  }
  std::vector<float> rankMajor(static_cast<size_t>(n * ranks));
  for (int64_t r = 0; r < ranks; ++r)
    slice(rankMajor.data() + r * n, in, outer, dim_local * ranks, dim_local, inner, r * dim_local);
  comm.reduce_scatter_sum(out, rankMajor.data(), n);
}

void all_slice_axis(Communicator &comm, float *out, const float *in, int64_t outer, int64_t dim_local,
                    int64_t inner) {
  slice(out, in, outer, dim_local * comm.size(), dim_local, inner, comm.rank() * dim_local);
}

} // namespace megart::cpu
