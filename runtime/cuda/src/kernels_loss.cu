// Fused cross-entropy over a (possibly vocab-padded) logits matrix: one block per token row
// forms the row's max and sum of exp in one pass (online rescaling), so probabilities are never
// written to memory. The mean over tokens is a fixed-shape single-block sum: deterministic.
#include "cuda_detail.cuh"

namespace megart::cuda {
namespace {

using detail::MaxSum;

// Max and sum of exp(x - max) over the first `valid` entries of a row, reaching every thread.
__device__ MaxSum row_max_sum(const float *row, int64_t valid) {
  MaxSum st{-INFINITY, 0.0};
  for (int64_t j = threadIdx.x; j < valid; j += blockDim.x)
    detail::max_sum_add(st, row[j]);
  return detail::block_max_sum(st);
}

// loss[t] = log(sum) + max - logit[label], in double as the CPU; 0 for an ignored label.
__global__ void cross_entropy_rows_kernel(double *loss, const float *logits, const int32_t *labels, int64_t tokens,
                                          int64_t vocab, int64_t valid, int32_t ignore_index) {
  for (int64_t t = blockIdx.x; t < tokens; t += gridDim.x) {
    if (labels[t] == ignore_index) { // the same for every thread of the block
      if (threadIdx.x == 0)
        loss[t] = 0.0;
      continue;
    }
    const float *row = logits + t * vocab;
    const MaxSum st = row_max_sum(row, valid);
    if (threadIdx.x == 0)
      loss[t] = log(st.sum) + st.max - static_cast<double>(row[labels[t]]);
  }
}

// *out = the sum of n doubles over the labels that count (all n when `labels` is null; 0 when none
// does); launched as a single block.
__global__ void mean_kernel(float *out, const double *values, int64_t n, const int32_t *labels, int32_t ignore_index) {
  const double s = detail::block_sum_of(values, n);
  const double counted = labels ? detail::block_counted_labels(labels, n, ignore_index) : static_cast<double>(n);
  if (threadIdx.x == 0)
    *out = counted > 0.0 ? static_cast<float>(s / counted) : 0.0f;
}

// dlogits = g (softmax - onehot(label)) with g = dloss / counted tokens (the host's `g`, or
// *counted_g when labels are ignored); padded columns and ignored rows get 0. The row's logits are
// read again after the statistics (from L2 for typical rows).
__global__ void cross_entropy_backward_kernel(float *dlogits, const float *logits, const int32_t *labels,
                                              int64_t tokens, int64_t vocab, int64_t valid, double g,
                                              const double *counted_g, int32_t ignore_index) {
  if (counted_g)
    g = *counted_g;
  for (int64_t t = blockIdx.x; t < tokens; t += gridDim.x) {
    const float *row = logits + t * vocab;
    float *drow = dlogits + t * vocab;
    if (labels[t] == ignore_index) {
      for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x)
        drow[j] = 0.0f;
      continue;
    }
    const MaxSum st = row_max_sum(row, valid);
    const double scale = g / st.sum;
    const float scale_f = static_cast<float>(scale);
    const int32_t label = labels[t];
    for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) {
      if (j >= valid)
        drow[j] = 0.0f;
      else if (j == label) // p - 1 in double: it cancels badly in float when p is close to 1
        drow[j] = static_cast<float>(exp(static_cast<double>(row[j]) - st.max) * scale - g);
      else
        drow[j] = expf(row[j] - st.max) * scale_f;
    }
  }
}

void check_args(const char *kernel, int64_t tokens, int64_t vocab, int64_t valid_vocab) {
  if (valid_vocab < 1 || valid_vocab > vocab)
    throw Error(std::string(kernel) + ": valid_vocab (" + std::to_string(valid_vocab) + ") must be in [1, vocab = " +
                std::to_string(vocab) + "]");
  if (tokens <= 0)
    throw Error(std::string(kernel) + ": tokens (" + std::to_string(tokens) +
                ") must be positive; the mean loss over no tokens is undefined");
}

} // namespace

void cross_entropy_forward(float *out, const float *logits, const int32_t *labels, int64_t tokens, int64_t vocab,
                           int64_t valid_vocab, int32_t ignore_index) {
  check_args("cross_entropy_forward", tokens, vocab, valid_vocab);
  cudaStream_t stream = compute_stream();
  auto *loss = static_cast<double *>(detail::workspace(sizeof(double) * tokens));
  cross_entropy_rows_kernel<<<detail::row_blocks(tokens), detail::kThreads, 0, stream>>>(loss, logits, labels, tokens,
                                                                                         vocab, valid_vocab, ignore_index);
  detail::check_launch("cross_entropy_forward");
  mean_kernel<<<1, detail::kThreads, 0, stream>>>(out, loss, tokens, ignore_index == kNoIgnoredLabel ? nullptr : labels,
                                                  ignore_index);
  detail::check_launch("cross_entropy_forward (mean)");
}

void cross_entropy_backward(float *dlogits, float dloss, const float *logits, const int32_t *labels, int64_t tokens,
                            int64_t vocab, int64_t valid_vocab, int32_t ignore_index) {
  check_args("cross_entropy_backward", tokens, vocab, valid_vocab);
  cudaStream_t stream = compute_stream();
  // With ignored labels, dloss / the labels that count, on the device (the labels are there).
  double *counted_g = nullptr;
  if (ignore_index != kNoIgnoredLabel) {
    counted_g = static_cast<double *>(detail::workspace(sizeof(double)));
    detail::counted_loss_scale_kernel<<<1, detail::kThreads, 0, stream>>>(counted_g, dloss, labels, tokens,
                                                                          ignore_index);
    detail::check_launch("cross_entropy_backward (scale)");
  }
  cross_entropy_backward_kernel<<<detail::row_blocks(tokens), detail::kThreads, 0, stream>>>(
      dlogits, logits, labels, tokens, vocab, valid_vocab, static_cast<double>(dloss) / static_cast<double>(tokens),
      counted_g, ignore_index);
  detail::check_launch("cross_entropy_backward");
}

} // namespace megart::cuda
