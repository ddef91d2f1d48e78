// Mixture of experts in double precision: routing, the moves to and from expert order, the
// grouped GEMM and their gradients, each written from its op's description.
#include "megac/Eval/Kernels.h"
#include "Softmax.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace megac::eval {

Routing moeRoute(const Tensor &logits, int64_t topk, bool preSoftmax) {
  const int64_t T = logits.shape[0], E = logits.shape[1];
  Routing r{Tensor::zeros(logits.shape), Tensor::integers({T, topk}, std::vector<int64_t>(T * topk)),
            Tensor::zeros({T, topk})};
  std::vector<int64_t> order(E);
  std::vector<double> row;
  for (int64_t t = 0; t < T; ++t) {
    softmaxRow(&logits.data[t * E], E, row);
    double *p = &r.probs.data[t * E];
    std::copy(row.begin(), row.end(), p);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return p[a] > p[b]; });
    double chosen = 0.0;
    for (int64_t j = 0; j < topk; ++j)
      chosen += p[order[j]];
    for (int64_t j = 0; j < topk; ++j) {
      r.experts.ints[t * topk + j] = order[j];
      r.weights.data[t * topk + j] = preSoftmax ? p[order[j]] : p[order[j]] / chosen;
    }
  }
  return r;
}

Tensor moeRouteGrad(const Tensor &dprobs, const Tensor &dweights, const Tensor &probs, const Tensor &experts,
                    const Tensor &weights, bool preSoftmax) {
  const int64_t T = probs.shape[0], E = probs.shape[1], k = experts.shape[1];
  Tensor d = Tensor::zeros(probs.shape);
  std::vector<double> dp(E);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t e = 0; e < E; ++e)
      dp[e] = dprobs.data[t * E + e];
    // w_j = p_j / S (S the chosen probabilities' sum): dp_j += (dw_j - sum_i dw_i w_i) / S.
    double chosen = 0.0, weighted = 0.0;
    for (int64_t j = 0; j < k; ++j) {
      chosen += probs.data[t * E + experts.ints[t * k + j]];
      weighted += dweights.data[t * k + j] * weights.data[t * k + j];
    }
    for (int64_t j = 0; j < k; ++j) {
      const double dw = dweights.data[t * k + j];
      dp[experts.ints[t * k + j]] += preSoftmax ? dw : (dw - weighted) / chosen;
    }
    double dot = 0.0; // the softmax's: dl = p (dp - p . dp)
    for (int64_t e = 0; e < E; ++e)
      dot += probs.data[t * E + e] * dp[e];
    for (int64_t e = 0; e < E; ++e)
      d.data[t * E + e] = probs.data[t * E + e] * (dp[e] - dot);
  }
  return d;
}

Assignment moeAssign(const Tensor &experts, int64_t numExperts) {
  const int64_t T = experts.shape[0], k = experts.shape[1];
  // Dropped choices (-1) as an extra expert after the others, not counted.
  std::vector<int64_t> counts(numExperts + 1, 0), start(numExperts + 1, 0), rows(T * k);
  auto slot = [&](int64_t c) { return c < 0 ? numExperts : c; };
  for (int64_t c : experts.ints)
    ++counts[slot(c)];
  for (int64_t e = 1; e <= numExperts; ++e)
    start[e] = start[e - 1] + counts[e - 1];
  for (int64_t i = 0; i < T * k; ++i) // token-major: within an expert by token, then choice
    rows[i] = start[slot(experts.ints[i])]++;
  counts.pop_back();
  return {Tensor::integers({T, k}, std::move(rows)), Tensor::integers({numExperts}, std::move(counts))};
}

Dropping moeDrop(const Tensor &experts, const Tensor &weights, int64_t numExperts, int64_t capacity, bool byPosition) {
  const int64_t n = static_cast<int64_t>(experts.ints.size());
  std::vector<int64_t> kept = experts.ints;
  Tensor mask = Tensor::zeros(experts.shape);
  for (int64_t e = 0; e < numExperts; ++e) {
    std::vector<int64_t> mine; // this expert's choices, in token order
    for (int64_t i = 0; i < n; ++i)
      if (experts.ints[i] == e)
        mine.push_back(i);
    if (!byPosition) // by weight, largest first; ties keep token order
      std::stable_sort(mine.begin(), mine.end(), [&](int64_t a, int64_t b) { return weights.data[a] > weights.data[b]; });
    for (size_t j = 0; j < mine.size(); ++j)
      if (static_cast<int64_t>(j) >= capacity)
        kept[mine[j]] = -1;
  }
  for (int64_t i = 0; i < n; ++i)
    mask.data[i] = kept[i] >= 0 ? 1.0 : 0.0;
  return {Tensor::integers(experts.shape, std::move(kept)), std::move(mask)};
}

Tensor moeScatter(const Tensor &x, const Tensor &rows, const Tensor *weights) {
  const int64_t T = rows.shape[0], k = rows.shape[1], H = x.shape[1];
  Tensor out = Tensor::zeros({T * k, H});
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < k; ++j) {
      const double w = weights ? weights->data[t * k + j] : 1.0;
      for (int64_t h = 0; h < H; ++h)
        out.data[rows.ints[t * k + j] * H + h] = w * x.data[t * H + h];
    }
  return out;
}

Tensor moeGather(const Tensor &y, const Tensor &rows, const Tensor *weights) {
  const int64_t T = rows.shape[0], k = rows.shape[1], H = y.shape[1];
  Tensor out = Tensor::zeros({T, H});
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < k; ++j) {
      const double w = weights ? weights->data[t * k + j] : 1.0;
      for (int64_t h = 0; h < H; ++h)
        out.data[t * H + h] += w * y.data[rows.ints[t * k + j] * H + h];
    }
  return out;
}

Tensor moeRowDot(const Tensor &a, const Tensor &b, const Tensor &rows) {
  const int64_t T = rows.shape[0], k = rows.shape[1], H = a.shape[1];
  Tensor out = Tensor::zeros({T, k});
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < k; ++j)
      for (int64_t h = 0; h < H; ++h)
        out.data[t * k + j] += a.data[t * H + h] * b.data[rows.ints[t * k + j] * H + h];
  return out;
}

Tensor groupedMatmul(const Tensor &lhs, const Tensor &rhs, const Tensor &counts, bool transposeRhs) {
  const int64_t R = lhs.shape[0], K = lhs.shape[1], E = rhs.shape[0];
  const int64_t N = transposeRhs ? rhs.shape[1] : rhs.shape[2];
  Tensor out = Tensor::zeros({R, N});
  int64_t row = 0;
  for (int64_t s = 0; s < counts.shape[0]; ++s) // segment s: expert s mod E's rows
    for (int64_t end = row + counts.ints[s], e = s % E; row < end; ++row)
      for (int64_t n = 0; n < N; ++n) {
        double sum = 0.0;
        for (int64_t c = 0; c < K; ++c)
          sum += lhs.data[row * K + c] * rhs.data[e * K * N + (transposeRhs ? n * K + c : c * N + n)];
        out.data[row * N + n] = sum;
      }
  return out;
}

Tensor groupedMatmulWeightGrad(const Tensor &lhs, const Tensor &grad, const Tensor &counts, int64_t E, bool transpose) {
  const int64_t K = lhs.shape[1], N = grad.shape[1];
  Tensor out = Tensor::zeros(transpose ? Shape{E, N, K} : Shape{E, K, N});
  int64_t row = 0;
  for (int64_t s = 0; s < counts.shape[0]; ++s)
    for (int64_t end = row + counts.ints[s], e = s % E; row < end; ++row)
      for (int64_t c = 0; c < K; ++c)
        for (int64_t n = 0; n < N; ++n)
          out.data[e * K * N + (transpose ? n * K + c : c * N + n)] += lhs.data[row * K + c] * grad.data[row * N + n];
  return out;
}

Tensor routerLoad(const Tensor &probs, const Tensor &counts) {
  const int64_t T = probs.shape[0], E = probs.shape[1];
  Tensor out = Tensor::zeros({2, E});
  for (int64_t e = 0; e < E; ++e)
    out.data[e] = static_cast<double>(counts.ints[e]);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t e = 0; e < E; ++e)
      out.data[E + e] += probs.data[t * E + e];
  return out;
}

Tensor routerLoadGrad(const Tensor &grad, int64_t tokens) {
  const int64_t E = grad.shape[1];
  Tensor out = Tensor::zeros({tokens, E});
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t e = 0; e < E; ++e)
      out.data[t * E + e] = grad.data[E + e];
  return out;
}

Tensor loadBalancingLoss(const Tensor &load, double scale) {
  const int64_t E = load.shape[1];
  double sum = 0.0;
  for (int64_t e = 0; e < E; ++e)
    sum += load.data[e] * load.data[E + e];
  Tensor out = Tensor::zeros({});
  out.data[0] = scale * sum;
  return out;
}

Tensor loadBalancingLossGrad(const Tensor &grad, const Tensor &load, double scale) {
  const int64_t E = load.shape[1];
  Tensor out = Tensor::zeros(load.shape);
  for (int64_t e = 0; e < E; ++e)
    out.data[E + e] = scale * grad.data[0] * load.data[e];
  return out;
}

Tensor routerZLoss(const Tensor &logits) {
  const int64_t T = logits.shape[0], E = logits.shape[1];
  Tensor out = Tensor::zeros({});
  std::vector<double> probs;
  for (int64_t t = 0; t < T; ++t) {
    const double lse = softmaxRow(&logits.data[t * E], E, probs);
    out.data[0] += lse * lse;
  }
  out.data[0] /= double(T);
  return out;
}

Tensor routerZLossGrad(const Tensor &grad, const Tensor &logits) {
  const int64_t T = logits.shape[0], E = logits.shape[1];
  Tensor out = Tensor::zeros(logits.shape);
  std::vector<double> probs;
  for (int64_t t = 0; t < T; ++t) {
    const double lse = softmaxRow(&logits.data[t * E], E, probs);
    for (int64_t e = 0; e < E; ++e)
      out.data[t * E + e] = grad.data[0] * 2.0 * lse * probs[e] / double(T);
  }
  return out;
}

Tensor gateRows(const Tensor &x, const Tensor &gate) {
  const int64_t T = x.shape[0], H = x.shape[1];
  Tensor out = Tensor::zeros(x.shape);
  for (int64_t t = 0; t < T; ++t) {
    const double s = 1.0 / (1.0 + std::exp(-gate.data[t]));
    for (int64_t h = 0; h < H; ++h)
      out.data[t * H + h] = x.data[t * H + h] * s;
  }
  return out;
}

GateRowsGrads gateRowsGrad(const Tensor &dy, const Tensor &x, const Tensor &gate) {
  const int64_t T = x.shape[0], H = x.shape[1];
  GateRowsGrads g{Tensor::zeros(x.shape), Tensor::zeros(gate.shape)};
  for (int64_t t = 0; t < T; ++t) {
    const double s = 1.0 / (1.0 + std::exp(-gate.data[t]));
    double dot = 0.0;
    for (int64_t h = 0; h < H; ++h) {
      g.input.data[t * H + h] = dy.data[t * H + h] * s;
      dot += dy.data[t * H + h] * x.data[t * H + h];
    }
    g.gate.data[t] = dot * s * (1.0 - s);
  }
  return g;
}

} // namespace megac::eval
