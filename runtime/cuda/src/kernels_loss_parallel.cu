// The vocabulary-parallel cross-entropy pieces: per-token max, sum of exp and target logit over
// this rank's share of the vocabulary (the caller all-reduces them), the loss from those
// statistics and the gradient. One block per token row for the row reductions.
#include "cuda_detail.cuh"

#include <algorithm>

namespace megart::cuda {
namespace {

// Max over the first `valid` columns; -inf when valid is 0. fmaxf skips NaN as std::fmax does.
__global__ void logits_max_kernel(float *out, const float *logits, int64_t tokens, int64_t vocab, int64_t valid) {
  for (int64_t t = blockIdx.x; t < tokens; t += gridDim.x) {
    const float *row = logits + t * vocab;
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < valid; j += blockDim.x)
      m = fmaxf(m, row[j]);
    m = detail::block_max(m);
    if (threadIdx.x == 0)
      out[t] = m;
  }
}

// Sum of exp(logit - max[t]) over the first `valid` columns, accumulated in double.
__global__ void logits_sum_exp_kernel(float *out, const float *logits, const float *max, int64_t tokens,
                                      int64_t vocab, int64_t valid) {
  for (int64_t t = blockIdx.x; t < tokens; t += gridDim.x) {
    const float *row = logits + t * vocab;
    const float m = max[t];
    double s = 0.0;
    for (int64_t j = threadIdx.x; j < valid; j += blockDim.x)
      s += static_cast<double>(expf(row[j] - m));
    s = detail::block_sum(s);
    if (threadIdx.x == 0)
      out[t] = static_cast<float>(s);
  }
}

// logits[t, label - vocab_start] when the label is in this share (of the local width `vocab`,
// as the CPU), else 0.
__global__ void target_logit_kernel(float *out, const float *logits, const int32_t *labels, int64_t tokens,
                                    int64_t vocab, int64_t vocab_start) {
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < tokens;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int32_t label = labels[t];
    out[t] = detail::in_share(label, vocab_start, vocab) ? logits[t * vocab + (label - vocab_start)] : 0.0f;
  }
}

// *out = mean over tokens of max + log(sum_exp) - target, summed in double; with labels, over the
// tokens not labelled ignore_index (0 when none is); a single block.
__global__ void cross_entropy_from_stats_kernel(float *out, const float *max, const float *sum_exp,
                                                const float *target, int64_t tokens, const int32_t *labels,
                                                int32_t ignore_index) {
  double s = 0.0;
  for (int64_t t = threadIdx.x; t < tokens; t += blockDim.x)
    if (!labels || labels[t] != ignore_index)
      s += static_cast<double>(max[t]) + log(static_cast<double>(sum_exp[t])) - target[t];
  s = detail::block_sum(s);
  if (!labels) {
    if (threadIdx.x == 0)
      *out = static_cast<float>(s / static_cast<double>(tokens));
    return;
  }
  const double counted = detail::block_counted_labels(labels, tokens, ignore_index);
  if (threadIdx.x == 0)
    *out = counted > 0.0 ? static_cast<float>(s / counted) : 0.0f;
}


// dlogits = scale (exp(logit - max) / sum_exp - [label == column]) on the first `valid`
// columns, 0 on the padding, scale = dloss / tokens. As on the CPU the label's -scale is
// subtracted in float from the (possibly zero) column value.
__global__ void cross_entropy_backward_from_stats_kernel(float *dlogits, const float *logits, const int32_t *labels,
                                                         const float *max, const float *sum_exp, int64_t tokens,
                                                         int64_t vocab, int64_t vocab_start, int64_t valid,
                                                         double scale, const double *counted_scale,
                                                         int32_t ignore_index) {
  if (counted_scale) // labels ignored: dloss / the labels that count
    scale = *counted_scale;
  for (int64_t t = blockIdx.x; t < tokens; t += gridDim.x) {
    const float *row = logits + t * vocab;
    float *drow = dlogits + t * vocab;
    if (labels[t] == ignore_index) { // the same for every thread of the block
      for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x)
        drow[j] = 0.0f;
      continue;
    }
    const float m = max[t];
    const float factor = static_cast<float>(1.0 / static_cast<double>(sum_exp[t]) * scale);
    const int32_t label = labels[t];
    const int64_t label_column = detail::in_share(label, vocab_start, vocab) ? label - vocab_start : -1;
    for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) {
      float value = j < valid ? expf(row[j] - m) * factor : 0.0f;
      if (j == label_column)
        value -= static_cast<float>(scale);
      drow[j] = value;
    }
  }
}

} // namespace

void logits_max(float *out, const float *logits, int64_t tokens, int64_t vocab, int64_t valid) {
  if (tokens <= 0)
    return;
  logits_max_kernel<<<detail::row_blocks(tokens), detail::kThreads, 0, compute_stream()>>>(out, logits, tokens, vocab,
                                                                                           valid);
  detail::check_launch("logits_max");
}

void logits_sum_exp(float *out, const float *logits, const float *max, int64_t tokens, int64_t vocab,
                    int64_t valid) {
  if (tokens <= 0)
    return;
  logits_sum_exp_kernel<<<detail::row_blocks(tokens), detail::kThreads, 0, compute_stream()>>>(out, logits, max,
                                                                                               tokens, vocab, valid);
  detail::check_launch("logits_sum_exp");
}

void target_logit(float *out, const float *logits, const int32_t *labels, int64_t tokens, int64_t vocab,
                  int64_t vocab_start) {
  if (tokens <= 0)
    return;
  target_logit_kernel<<<detail::elementwise_blocks(tokens), detail::kThreads, 0, compute_stream()>>>(
      out, logits, labels, tokens, vocab, vocab_start);
  detail::check_launch("target_logit");
}

void cross_entropy_from_stats(float *out, const float *max, const float *sum_exp, const float *target,
                              int64_t tokens, const int32_t *labels, int32_t ignore_index) {
  // tokens == 0 still writes the CPU's 0 / 0 (NaN), so the caller's scalar is never stale.
  cross_entropy_from_stats_kernel<<<1, detail::kThreads, 0, compute_stream()>>>(
      out, max, sum_exp, target, std::max<int64_t>(tokens, 0), labels, ignore_index);
  detail::check_launch("cross_entropy_from_stats");
}

void cross_entropy_backward_from_stats(float *dlogits, float dloss, const float *logits, const int32_t *labels,
                                       const float *max, const float *sum_exp, int64_t tokens, int64_t vocab,
                                       int64_t vocab_start, int64_t valid, int32_t ignore_index) {
  if (tokens <= 0 || vocab <= 0)
    return;
  cudaStream_t stream = compute_stream();
  // With ignored labels, dloss / the labels that count, on the device (the labels are there).
  double *counted_scale = nullptr;
  if (ignore_index != kNoIgnoredLabel) {
    counted_scale = static_cast<double *>(detail::workspace(sizeof(double)));
    detail::counted_loss_scale_kernel<<<1, detail::kThreads, 0, stream>>>(counted_scale, dloss, labels, tokens,
                                                                          ignore_index);
    detail::check_launch("cross_entropy_backward_from_stats (scale)");
  }
  cross_entropy_backward_from_stats_kernel<<<detail::row_blocks(tokens), detail::kThreads, 0, stream>>>(
      dlogits, logits, labels, max, sum_exp, tokens, vocab, vocab_start, valid,
      static_cast<double>(dloss) / static_cast<double>(tokens), counted_scale, ignore_index);
  detail::check_launch("cross_entropy_backward_from_stats");
}

} // namespace megart::cuda
