// Softmax cross-entropy, mean over label positions, and its gradient w.r.t. the logits.
#include "megac/Eval/Kernels.h"
#include "Softmax.h"

#include <algorithm>
#include <cmath>

namespace megac::eval {

double softmaxRow(const double *row, int64_t n, std::vector<double> &probs) {
  double max = *std::max_element(row, row + n), sum = 0.0;
  probs.resize(n);
  for (int64_t c = 0; c < n; ++c)
    sum += (probs[c] = std::exp(row[c] - max));
  for (double &p : probs)
    p /= sum;
  return max + std::log(sum);
}

/// The positions whose labels count: all, or those not labelled `ignore`.
static int64_t countedLabels(const Tensor &labels, std::optional<int64_t> ignore) {
  int64_t n = 0;
  for (int64_t t = 0; t < labels.numel(); ++t)
    n += !ignore || labels.ints[t] != *ignore;
  return n;
}

Tensor crossEntropy(const Tensor &logits, const Tensor &labels, std::optional<int64_t> ignore) {
  int64_t vocab = logits.lastDim(), tokens = labels.numel(), counted = countedLabels(labels, ignore);
  std::vector<double> probs;
  double total = 0.0;
  for (int64_t t = 0; t < tokens; ++t) {
    if (ignore && labels.ints[t] == *ignore)
      continue;
    const double *row = logits.data.data() + t * vocab;
    total += softmaxRow(row, vocab, probs) - row[labels.ints[t]];
  }
  Tensor loss = Tensor::zeros({});
  loss.data[0] = counted ? total / counted : 0.0;
  return loss;
}

Tensor crossEntropyGrad(const Tensor &dloss, const Tensor &logits, const Tensor &labels,
                        std::optional<int64_t> ignore) {
  int64_t vocab = logits.lastDim(), tokens = labels.numel(), counted = countedLabels(labels, ignore);
  Tensor d = Tensor::zeros(logits.shape);
  double perToken = counted ? dloss.data[0] / counted : 0.0;
  std::vector<double> probs;
  for (int64_t t = 0; t < tokens; ++t) {
    if (ignore && labels.ints[t] == *ignore)
      continue;
    softmaxRow(logits.data.data() + t * vocab, vocab, probs);
    for (int64_t c = 0; c < vocab; ++c)
      d.data[t * vocab + c] = perToken * (probs[c] - (c == labels.ints[t] ? 1.0 : 0.0));
  }
  return d;
}

} // namespace megac::eval
