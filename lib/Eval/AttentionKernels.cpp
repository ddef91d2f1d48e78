// Rotary embeddings and grouped-query attention. attentionGrad recomputes the probabilities
// and applies the softmax backward: dS = P * (dP - rowsum(P * dP)), dP = dO . V^T.
#include "megac/Eval/Kernels.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace megac::eval {

Tensor rope(const Tensor &x, double theta, bool inverse, double positionDivisor) {
  int64_t batch = x.shape[0], seq = x.shape[1], heads = x.shape[2], d = x.shape[3], half = d / 2;
  Tensor y = Tensor::zeros(x.shape);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t p = 0; p < seq; ++p)
      for (int64_t h = 0; h < heads; ++h) {
        const double *in = x.data.data() + ((b * seq + p) * heads + h) * d;
        double *out = y.data.data() + ((b * seq + p) * heads + h) * d;
        for (int64_t i = 0; i < half; ++i) {
          double angle = p / positionDivisor * std::pow(theta, -2.0 * i / d) * (inverse ? -1.0 : 1.0);
          double c = std::cos(angle), s = std::sin(angle);
          // rotate_half: out = x * cos + (-x2, x1) * sin
          out[i] = in[i] * c - in[i + half] * s;
          out[i + half] = in[i + half] * c + in[i] * s;
        }
      }
  return y;
}

namespace {
/// Shapes of one attention call and index helpers into its [b, s, heads, d] tensors.
struct AttentionDims {
  int64_t batch, seq, heads, groups, d;
  AttentionDims(const Tensor &q, const Tensor &k)
      : batch(q.shape[0]), seq(q.shape[1]), heads(q.shape[2]), groups(k.shape[2]), d(q.shape[3]) {}
  int64_t qAt(int64_t b, int64_t s, int64_t h) const { return ((b * seq + s) * heads + h) * d; }
  int64_t kvAt(int64_t b, int64_t s, int64_t g) const { return ((b * seq + s) * groups + g) * d; }
  int64_t group(int64_t h) const { return h / (heads / groups); }
};

/// Softmax probabilities of query row (b, i, h) over keys 0..n-1 (n = i+1 when causal); with a
/// window, keys before i - window have probability 0.
std::vector<double> probabilities(const AttentionDims &a, const Tensor &q, const Tensor &k, int64_t b,
                                  int64_t i, int64_t h, bool causal, int64_t window, double scale) {
  int64_t n = causal ? i + 1 : a.seq;
  const int64_t first = window > 0 ? std::max<int64_t>(0, i - window) : 0;
  std::vector<double> p(n, -std::numeric_limits<double>::infinity());
  const double *qi = q.data.data() + a.qAt(b, i, h);
  for (int64_t j = first; j < n; ++j) {
    const double *kj = k.data.data() + a.kvAt(b, j, a.group(h));
    double dot = 0.0;
    for (int64_t c = 0; c < a.d; ++c)
      dot += qi[c] * kj[c];
    p[j] = scale * dot;
  }
  double max = *std::max_element(p.begin(), p.end()), sum = 0.0;
  for (double &v : p)
    sum += (v = std::exp(v - max));
  for (double &v : p)
    v /= sum;
  return p;
}
} // namespace

Tensor attention(const Tensor &q, const Tensor &k, const Tensor &v, bool causal, int64_t window, double scale) {
  AttentionDims a(q, k);
  Tensor out = Tensor::zeros(q.shape);
  for (int64_t b = 0; b < a.batch; ++b)
    for (int64_t h = 0; h < a.heads; ++h)
      for (int64_t i = 0; i < a.seq; ++i) {
        std::vector<double> p = probabilities(a, q, k, b, i, h, causal, window, scale);
        double *oi = out.data.data() + a.qAt(b, i, h);
        for (int64_t j = 0; j < static_cast<int64_t>(p.size()); ++j) {
          const double *vj = v.data.data() + a.kvAt(b, j, a.group(h));
          for (int64_t c = 0; c < a.d; ++c)
            oi[c] += p[j] * vj[c];
        }
      }
  return out;
}

AttentionGrads attentionGrad(const Tensor &dout, const Tensor &q, const Tensor &k, const Tensor &v,
                             bool causal, int64_t window, double scale) {
  AttentionDims a(q, k);
  AttentionGrads g{Tensor::zeros(q.shape), Tensor::zeros(k.shape), Tensor::zeros(v.shape)};
  for (int64_t b = 0; b < a.batch; ++b)
    for (int64_t h = 0; h < a.heads; ++h)
      for (int64_t i = 0; i < a.seq; ++i) {
        std::vector<double> p = probabilities(a, q, k, b, i, h, causal, window, scale);
        int64_t n = static_cast<int64_t>(p.size());
        const double *doi = dout.data.data() + a.qAt(b, i, h);
        const double *qi = q.data.data() + a.qAt(b, i, h);
        std::vector<double> dp(n);
        double rowsum = 0.0;
        for (int64_t j = 0; j < n; ++j) {
          const double *vj = v.data.data() + a.kvAt(b, j, a.group(h));
          for (int64_t c = 0; c < a.d; ++c)
            dp[j] += doi[c] * vj[c];
          rowsum += p[j] * dp[j];
        }
        double *dqi = g.query.data.data() + a.qAt(b, i, h);
        for (int64_t j = 0; j < n; ++j) {
          int64_t kv = a.kvAt(b, j, a.group(h));
          double ds = p[j] * (dp[j] - rowsum);
          for (int64_t c = 0; c < a.d; ++c) {
            dqi[c] += scale * ds * k.data[kv + c];
            g.key.data[kv + c] += scale * ds * qi[c];
            g.value.data[kv + c] += p[j] * doi[c];
          }
        }
      }
  return g;
}

} // namespace megac::eval
