// Scaled dot-product attention with grouped query heads and an optional causal mask.
// Works one query row at a time with a per-thread row of scores (never seq x seq per head);
// softmax is two-pass (max, then exp and sum in double). The backward recomputes the
// probabilities instead of saving them.
#include "megart/error.h"
#include "megart/kernels.h"

#include <cmath>
#include <string>
#include <vector>

namespace megart::cpu {
namespace {

struct Shape {
  int64_t batch, seq, q_heads, kv_heads, head_dim;
  int64_t group() const { return q_heads / kv_heads; }
  // Offsets of row (b, s, head) in the q/out and k/v layouts.
  int64_t q_at(int64_t b, int64_t s, int64_t h) const {
    return ((b * seq + s) * q_heads + h) * head_dim;
  }
  int64_t kv_at(int64_t b, int64_t s, int64_t g) const {
    return ((b * seq + s) * kv_heads + g) * head_dim;
  }
};

void check_heads(const char* kernel, int64_t q_heads, int64_t kv_heads) {
  if (kv_heads <= 0 || q_heads % kv_heads != 0)
    throw Error(std::string(kernel) + ": q_heads (" + std::to_string(q_heads) +
                ") is not a multiple of kv_heads (" + std::to_string(kv_heads) + ")");
}

inline float dot(const float* a, const float* b, int64_t n) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int64_t d = 0; d < n; ++d)
    s += a[d] * b[d];
  return s;
}

// p[0, keys) = softmax(scale * q . k_j) for query row qrow against kv head g of batch b.
// Returns nothing; p holds normalized probabilities.
void softmax_row(float* p, const float* qrow, const float* k, const Shape& sh, int64_t b,
                 int64_t g, int64_t keys, float scale) {
  float mx = -INFINITY;
  for (int64_t j = 0; j < keys; ++j) {
    const float s = scale * dot(qrow, k + sh.kv_at(b, j, g), sh.head_dim);
    p[j] = s;
    mx = s > mx ? s : mx;
  }
  double sum = 0.0;
  for (int64_t j = 0; j < keys; ++j) {
    const float e = std::exp(p[j] - mx);
    p[j] = e;
    sum += e;
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t j = 0; j < keys; ++j)
    p[j] *= inv;
}

// dq += ds k_j, dk_j += ds q_i, dv_j += p_j dout_i. Outputs never alias inputs (kernels.h);
// saying so with restrict lets the loop vectorize without runtime overlap checks.
inline void accumulate_key_grads(float* __restrict dq, float* __restrict dk, float* __restrict dv,
                                 const float* __restrict k, const float* __restrict q,
                                 const float* __restrict dout, float ds, float p, int64_t n) {
  for (int64_t d = 0; d < n; ++d) {
    dq[d] += ds * k[d];
    dk[d] += ds * q[d];
    dv[d] += p * dout[d];
  }
}

} // namespace

void attention_forward(float* out, const float* q, const float* k, const float* v, int64_t batch,
                       int64_t seq, int64_t q_heads, int64_t kv_heads, int64_t head_dim,
                       float scale, bool causal) {
  check_heads("attention_forward", q_heads, kv_heads);
  const Shape sh{batch, seq, q_heads, kv_heads, head_dim};
  const int64_t rows = batch * q_heads * seq;
#pragma omp parallel if (rows * seq * head_dim > (1 << 16))
  {
    std::vector<float> p(static_cast<size_t>(seq));
    // Causal rows differ in cost; dynamic chunks balance them. Rows are independent, so the
    // schedule does not change the result.
#pragma omp for schedule(dynamic, 16)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t i = r % seq, h = (r / seq) % q_heads, b = r / (seq * q_heads);
      const int64_t g = h / sh.group();
      const int64_t keys = causal ? i + 1 : seq;
      softmax_row(p.data(), q + sh.q_at(b, i, h), k, sh, b, g, keys, scale);
      float* __restrict o = out + sh.q_at(b, i, h);
      for (int64_t d = 0; d < head_dim; ++d)
        o[d] = 0.0f;
      for (int64_t j = 0; j < keys; ++j) {
        const float pj = p[j];
        const float* vj = v + sh.kv_at(b, j, g);
        for (int64_t d = 0; d < head_dim; ++d)
          o[d] += pj * vj[d];
      }
    }
  }
}

void attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* q,
                        const float* k, const float* v, int64_t batch, int64_t seq,
                        int64_t q_heads, int64_t kv_heads, int64_t head_dim, float scale,
                        bool causal) {
  // Per query row i with probabilities p_j and dP_j = dout_i . v_j:
  //   dS_j = p_j (dP_j - sum_l p_l dP_l),  dq_i = scale sum_j dS_j k_j,
  //   dk_j += scale dS_j q_i,  dv_j += p_j dout_i.
  check_heads("attention_backward", q_heads, kv_heads);
  const Shape sh{batch, seq, q_heads, kv_heads, head_dim};
  const int64_t tasks = batch * kv_heads;
#pragma omp parallel if (tasks > 1 && batch * q_heads * seq * seq * head_dim > (1 << 16))
  {
    std::vector<float> p(static_cast<size_t>(seq)), dp(static_cast<size_t>(seq));
    // One (batch, kv head) per iteration: the iteration owns dk/dv of that kv head and dq of
    // its query heads, and runs serially, so the sums never depend on the thread count.
#pragma omp for schedule(static)
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t b = t / kv_heads, g = t % kv_heads;
      for (int64_t j = 0; j < seq; ++j)
        for (int64_t d = 0; d < head_dim; ++d) {
          dk[sh.kv_at(b, j, g) + d] = 0.0f;
          dv[sh.kv_at(b, j, g) + d] = 0.0f;
        }
      for (int64_t h = g * sh.group(); h < (g + 1) * sh.group(); ++h)
        for (int64_t i = 0; i < seq; ++i) {
          const int64_t keys = causal ? i + 1 : seq;
          const float* qi = q + sh.q_at(b, i, h);
          const float* doi = dout + sh.q_at(b, i, h);
          softmax_row(p.data(), qi, k, sh, b, g, keys, scale);
          double pdp = 0.0;
          for (int64_t j = 0; j < keys; ++j) {
            dp[j] = dot(doi, v + sh.kv_at(b, j, g), head_dim);
            pdp += static_cast<double>(p[j]) * dp[j];
          }
          const float row_dot = static_cast<float>(pdp);
          float* dqi = dq + sh.q_at(b, i, h);
          for (int64_t d = 0; d < head_dim; ++d)
            dqi[d] = 0.0f;
          for (int64_t j = 0; j < keys; ++j) {
            const float ds = scale * (p[j] * (dp[j] - row_dot));
            const int64_t at = sh.kv_at(b, j, g);
            accumulate_key_grads(dqi, dk + at, dv + at, k + at, qi, doi, ds, p[j], head_dim);
          }
        }
    }
  }
}

} // namespace megart::cpu
