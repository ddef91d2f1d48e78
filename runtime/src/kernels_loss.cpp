// Cross-entropy over a (possibly vocab-padded) logits matrix. Templates over the logits' storage
// type (kernels.h): loads widen, dlogits stores round once; the loss is fp32.
#include "megart/error.h"
#include "megart/kernels.h"
#include "kernels_detail.h"

#include <cmath>
#include <string>
#include <vector>

namespace megart::cpu {
namespace {

// All checks run serially before any parallel region (exceptions must not cross OpenMP).
void check_args(const char* kernel, const int32_t* labels, int64_t tokens, int64_t vocab,
                int64_t valid_vocab, int32_t ignore_index) {
  if (valid_vocab < 1 || valid_vocab > vocab)
    throw Error(std::string(kernel) + ": valid_vocab (" + std::to_string(valid_vocab) +
                ") must be in [1, vocab = " + std::to_string(vocab) + "]");
  if (tokens <= 0)
    throw Error(std::string(kernel) + ": tokens (" + std::to_string(tokens) +
                ") must be positive; the mean loss over no tokens is undefined");
  for (int64_t t = 0; t < tokens; ++t)
    if ((labels[t] < 0 || labels[t] >= valid_vocab) && labels[t] != ignore_index)
      throw Error(std::string(kernel) + ": label " + std::to_string(labels[t]) +
                  " at position " + std::to_string(t) + " is outside [0, " +
                  std::to_string(valid_vocab) + ")");
}

// The tokens whose labels count: not ignore_index.
int64_t counted(const int32_t* labels, int64_t tokens, int32_t ignore_index) {
  int64_t n = 0;
  for (int64_t t = 0; t < tokens; ++t)
    n += labels[t] != ignore_index;
  return n;
}

} // namespace

template <typename A>
float cross_entropy_forward(const A* logits, const int32_t* labels, int64_t tokens, int64_t vocab,
                            int64_t valid_vocab, int32_t ignore_index) {
  check_args("cross_entropy_forward", labels, tokens, vocab, valid_vocab, ignore_index);
  const int64_t n = counted(labels, tokens, ignore_index);
  if (n == 0)
    return 0.0f;
  // Per-token losses first, then a serial sum: the result is independent of thread count.
  std::vector<double> loss(static_cast<size_t>(tokens), 0.0);
#pragma omp parallel for schedule(static) if (tokens * valid_vocab > (1 << 14))
  for (int64_t t = 0; t < tokens; ++t) {
    if (labels[t] == ignore_index)
      continue;
    const A* row = logits + t * vocab;
    const detail::RowSoftmax sm = detail::row_softmax(row, valid_vocab);
    loss[t] = std::log(sm.sum) + sm.max - static_cast<double>(to_float(row[labels[t]]));
  }
  double total = 0.0;
  for (double l : loss)
    total += l;
  return static_cast<float>(total / static_cast<double>(n));
}

template <typename A>
void cross_entropy_backward(A* dlogits, float dloss, const A* logits, const int32_t* labels,
                            int64_t tokens, int64_t vocab, int64_t valid_vocab, int32_t ignore_index) {
  check_args("cross_entropy_backward", labels, tokens, vocab, valid_vocab, ignore_index);
  const int64_t n = counted(labels, tokens, ignore_index);
  const double g = n ? static_cast<double>(dloss) / static_cast<double>(n) : 0.0;
#pragma omp parallel for schedule(static) if (tokens * vocab > (1 << 14))
  for (int64_t t = 0; t < tokens; ++t) {
    const A* row = logits + t * vocab;
    A* drow = dlogits + t * vocab;
    if (labels[t] == ignore_index) {
      for (int64_t j = 0; j < vocab; ++j)
        drow[j] = from_float<A>(0.0f);
      continue;
    }
    const detail::RowSoftmax sm = detail::row_softmax(row, valid_vocab);
    const double scale = g / sm.sum;
    for (int64_t j = 0; j < valid_vocab; ++j)
      drow[j] = from_float<A>(
          static_cast<float>(std::exp(static_cast<double>(to_float(row[j])) - sm.max) * scale));
    // The label column in double: p - 1 cancels badly in float when p is close to 1. (It
    // replaces the store above, so it is still one rounding.)
    const int32_t l = labels[t];
    drow[l] = from_float<A>(static_cast<float>(
        std::exp(static_cast<double>(to_float(row[l])) - sm.max) * scale - g));
    for (int64_t j = valid_vocab; j < vocab; ++j)
      drow[j] = from_float<A>(0.0f);
  }
}

float cross_entropy_forward(const float* logits, const int32_t* labels, int64_t tokens,
                            int64_t vocab, int64_t valid_vocab, int32_t ignore_index) {
  return cross_entropy_forward<float>(logits, labels, tokens, vocab, valid_vocab, ignore_index);
}

void cross_entropy_backward(float* dlogits, float dloss, const float* logits,
                            const int32_t* labels, int64_t tokens, int64_t vocab,
                            int64_t valid_vocab, int32_t ignore_index) {
  cross_entropy_backward<float>(dlogits, dloss, logits, labels, tokens, vocab, valid_vocab, ignore_index);
}

#define MEGART_LOSS(A)                                                                             \
  template float cross_entropy_forward<A>(const A*, const int32_t*, int64_t, int64_t, int64_t,     \
                                          int32_t);                                                \
  template void cross_entropy_backward<A>(A*, float, const A*, const int32_t*, int64_t, int64_t,   \
                                          int64_t, int32_t);
MEGART_LOSS(bf16_t)
MEGART_LOSS(fp16_t)

} // namespace megart::cpu
