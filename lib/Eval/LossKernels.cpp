// Softmax cross-entropy, mean over label positions, and its gradient w.r.t. the logits.
#include "megac/Eval/Kernels.h"

#include <algorithm>
#include <cmath>

namespace megac::eval {

namespace {
/// Softmax of one row of logits; also returns log(sum(exp)) for the loss.
double softmaxRow(const double *logits, int64_t vocab, std::vector<double> &probs) {
  double max = *std::max_element(logits, logits + vocab), sum = 0.0;
  probs.resize(vocab);
  for (int64_t c = 0; c < vocab; ++c)
    sum += (probs[c] = std::exp(logits[c] - max));
  for (double &p : probs)
    p /= sum;
  return max + std::log(sum);
}
} // namespace

Tensor crossEntropy(const Tensor &logits, const Tensor &labels) {
  int64_t vocab = logits.lastDim(), tokens = labels.numel();
  std::vector<double> probs;
  double total = 0.0;
  for (int64_t t = 0; t < tokens; ++t) {
    const double *row = logits.data.data() + t * vocab;
    total += softmaxRow(row, vocab, probs) - row[labels.ints[t]];
  }
  Tensor loss = Tensor::zeros({});
  loss.data[0] = total / tokens;
  return loss;
}

Tensor crossEntropyGrad(const Tensor &dloss, const Tensor &logits, const Tensor &labels) {
  int64_t vocab = logits.lastDim(), tokens = labels.numel();
  Tensor d = Tensor::zeros(logits.shape);
  double perToken = dloss.data[0] / tokens;
  std::vector<double> probs;
  for (int64_t t = 0; t < tokens; ++t) {
    softmaxRow(logits.data.data() + t * vocab, vocab, probs);
    for (int64_t c = 0; c < vocab; ++c)
      d.data[t * vocab + c] = perToken * (probs[c] - (c == labels.ints[t] ? 1.0 : 0.0));
  }
  return d;
}

} // namespace megac::eval
