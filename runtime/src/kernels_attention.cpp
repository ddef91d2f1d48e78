// Scaled dot-product attention with grouped query heads and an optional causal mask (with an
// optional sliding window: query i sees keys i - window .. i).
// Works one query row at a time with a per-thread row of scores (never seq x seq per head);
// softmax is two-pass (max, then exp and sum in double). The backward recomputes the
// probabilities (and the dropout mask, megart/dropout.h) instead of saving them.
// Templates over the tensors' storage type (kernels.h): loads widen; out, dq, dk and dv are
// summed in fp32 (in the output itself when it is fp32) and rounded once when complete.
#include "kernels_detail.h"
#include "megart/error.h"
#include "megart/kernels.h"

#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>
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

template <typename A> inline float dot(const A* a, const A* b, int64_t n) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int64_t d = 0; d < n; ++d)
    s += to_float(a[d]) * to_float(b[d]);
  return s;
}

// The keys [first, keys) query row i sees: all, the causal 0..i, or a window's i - window..i.
struct KeyRange {
  int64_t first, keys;
};
KeyRange key_range(int64_t i, int64_t seq, bool causal, int64_t window) {
  if (!causal)
    return {0, seq};
  return {window > 0 && i > window ? i - window : 0, i + 1};
}

// p[first, keys) = softmax(scale * q . k_j) for query row qrow against kv head g of batch b.
// Returns nothing; p holds normalized probabilities.
template <typename A>
void softmax_row(float* p, const A* qrow, const A* k, const Shape& sh, int64_t b, int64_t g,
                 KeyRange r, float scale) {
  const int64_t first = r.first, keys = r.keys;
  float mx = -INFINITY;
  for (int64_t j = first; j < keys; ++j) {
    const float s = scale * dot(qrow, k + sh.kv_at(b, j, g), sh.head_dim);
    p[j] = s;
    mx = s > mx ? s : mx;
  }
  double sum = 0.0;
  for (int64_t j = first; j < keys; ++j) {
    const float e = std::exp(p[j] - mx);
    p[j] = e;
    sum += e;
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t j = first; j < keys; ++j)
    p[j] *= inv;
}

// o[0, head_dim) = sum_j p[j] v_j over keys j in r of kv head g of batch b, in key order.
template <typename A>
void weighted_values(float* __restrict o, const float* p, const A* v, const Shape& sh, int64_t b,
                     int64_t g, KeyRange r) {
  for (int64_t d = 0; d < sh.head_dim; ++d)
    o[d] = 0.0f;
  for (int64_t j = r.first; j < r.keys; ++j) {
    const float pj = p[j];
    const A* vj = v + sh.kv_at(b, j, g);
    for (int64_t d = 0; d < sh.head_dim; ++d)
      o[d] += pj * to_float(vj[d]);
  }
}

// dq += ds k_j, dk_j += ds q_i, dv_j += p_j dout_i. Outputs never alias inputs (kernels.h);
// saying so with restrict lets the loop vectorize without runtime overlap checks.
template <typename A>
inline void accumulate_key_grads(float* __restrict dq, float* __restrict dk, float* __restrict dv,
                                 const A* __restrict k, const A* __restrict q,
                                 const A* __restrict dout, float ds, float p, int64_t n) {
  for (int64_t d = 0; d < n; ++d) {
    dq[d] += ds * to_float(k[d]);
    dk[d] += ds * to_float(q[d]);
    dv[d] += p * to_float(dout[d]);
  }
}

// Attention dropout of query row (b, h, i): m[j] = attention_dropout_factor for keys j in r.
// Returns false (m untouched) when the rate is 0.
bool dropout_row(float* m, const AttentionDropout& d, int64_t b, int64_t h, int64_t i, int64_t seq,
                 KeyRange r) {
  if (d.rate == 0.0f)
    return false;
  for (int64_t j = r.first; j < r.keys; ++j)
    m[j] = attention_dropout_factor(d, b, h, i, j, seq);
  return true;
}

void check_dropout(const char* kernel, const AttentionDropout& d, int64_t q_heads) {
  if (const std::string error = attention_dropout_error(d, q_heads); !error.empty())
    throw Error(std::string(kernel) + ": " + error);
}

void check_window(const char* kernel, bool causal, int64_t window) {
  if (window < 0 || (window > 0 && !causal))
    throw Error(std::string(kernel) + ": window " + std::to_string(window) +
                (window < 0 ? " is negative" : " needs causal attention") +
                " (0: none; w > 0: each query sees itself and at most w keys before it)");
}

// fp32 scratch for 16-bit outputs (none when they are fp32 and sum in place).
template <typename A> size_t scratch_size(int64_t n) {
  return std::is_same_v<A, float> ? 0 : static_cast<size_t>(n);
}

} // namespace

template <typename A>
void attention_forward(A* out, const A* q, const A* k, const A* v, int64_t batch, int64_t seq,
                       int64_t q_heads, int64_t kv_heads, int64_t head_dim, float scale,
                       bool causal, int64_t window, const AttentionDropout& dropout) {
  check_heads("attention_forward", q_heads, kv_heads);
  check_dropout("attention_forward", dropout, q_heads);
  check_window("attention_forward", causal, window);
  const Shape sh{batch, seq, q_heads, kv_heads, head_dim};
  const int64_t rows = batch * q_heads * seq;
#pragma omp parallel if (rows * seq * head_dim > (1 << 16))
  {
    std::vector<float> p(static_cast<size_t>(seq)), acc(scratch_size<A>(head_dim)),
        mask(dropout.rate == 0.0f ? 0 : static_cast<size_t>(seq));
    // Causal rows differ in cost; dynamic chunks balance them. Rows are independent, so the
    // schedule does not change the result.
#pragma omp for schedule(dynamic, 16)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t i = r % seq, h = (r / seq) % q_heads, b = r / (seq * q_heads);
      const int64_t g = h / sh.group();
      const KeyRange keys = key_range(i, seq, causal, window);
      softmax_row(p.data(), q + sh.q_at(b, i, h), k, sh, b, g, keys, scale);
      if (dropout_row(mask.data(), dropout, b, h, i, seq, keys))
        for (int64_t j = keys.first; j < keys.keys; ++j)
          p[j] *= mask[j];
      float* o = detail::accumulator(out + sh.q_at(b, i, h), acc.data());
      weighted_values(o, p.data(), v, sh, b, g, keys);
      detail::store_row(out + sh.q_at(b, i, h), o, head_dim);
    }
  }
}

template <typename A>
void attention_backward(A* dq, A* dk, A* dv, const A* dout, const A* q, const A* k, const A* v,
                        int64_t batch, int64_t seq, int64_t q_heads, int64_t kv_heads,
                        int64_t head_dim, float scale, bool causal, int64_t window,
                        const AttentionDropout& dropout) {
  // Per query row i with probabilities p_j, the dropout's m_j (mask / (1 - rate); 1 without)
  // and dP_j = m_j dout_i . v_j:
  //   dS_j = p_j (dP_j - sum_l p_l dP_l),  dq_i = scale sum_j dS_j k_j,
  //   dk_j += scale dS_j q_i,  dv_j += m_j p_j dout_i.
  check_heads("attention_backward", q_heads, kv_heads);
  check_dropout("attention_backward", dropout, q_heads);
  check_window("attention_backward", causal, window);
  const Shape sh{batch, seq, q_heads, kv_heads, head_dim};
  const int64_t tasks = batch * kv_heads;
#pragma omp parallel if (tasks > 1 && batch * q_heads * seq * seq * head_dim > (1 << 16))
  {
    std::vector<float> p(static_cast<size_t>(seq)), dp(static_cast<size_t>(seq)),
        mask(dropout.rate == 0.0f ? 0 : static_cast<size_t>(seq));
    // This task's dk / dv ([seq, head_dim] each) and one dq row, in fp32 for 16-bit outputs.
    std::vector<float> dk_acc(scratch_size<A>(seq * head_dim)), dv_acc(dk_acc.size()),
        dq_acc(scratch_size<A>(head_dim));
    // One (batch, kv head) per iteration: the iteration owns dk/dv of that kv head and dq of
    // its query heads, and runs serially, so the sums never depend on the thread count.
#pragma omp for schedule(static)
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t b = t / kv_heads, g = t % kv_heads;
      auto dk_row = [&](int64_t j) {
        return detail::accumulator(dk + sh.kv_at(b, j, g), dk_acc.data() + j * head_dim);
      };
      auto dv_row = [&](int64_t j) {
        return detail::accumulator(dv + sh.kv_at(b, j, g), dv_acc.data() + j * head_dim);
      };
      for (int64_t j = 0; j < seq; ++j)
        for (int64_t d = 0; d < head_dim; ++d) {
          dk_row(j)[d] = 0.0f;
          dv_row(j)[d] = 0.0f;
        }
      for (int64_t h = g * sh.group(); h < (g + 1) * sh.group(); ++h)
        for (int64_t i = 0; i < seq; ++i) {
          const KeyRange keys = key_range(i, seq, causal, window);
          const A* qi = q + sh.q_at(b, i, h);
          const A* doi = dout + sh.q_at(b, i, h);
          softmax_row(p.data(), qi, k, sh, b, g, keys, scale);
          const bool dropped = dropout_row(mask.data(), dropout, b, h, i, seq, keys);
          double pdp = 0.0;
          for (int64_t j = keys.first; j < keys.keys; ++j) {
            dp[j] = dot(doi, v + sh.kv_at(b, j, g), head_dim);
            if (dropped)
              dp[j] *= mask[j];
            pdp += static_cast<double>(p[j]) * dp[j];
          }
          const float row_dot = static_cast<float>(pdp);
          float* dqi = detail::accumulator(dq + sh.q_at(b, i, h), dq_acc.data());
          for (int64_t d = 0; d < head_dim; ++d)
            dqi[d] = 0.0f;
          for (int64_t j = keys.first; j < keys.keys; ++j) {
            const float ds = scale * (p[j] * (dp[j] - row_dot));
            accumulate_key_grads(dqi, dk_row(j), dv_row(j), k + sh.kv_at(b, j, g), qi, doi, ds,
                                 dropped ? p[j] * mask[j] : p[j], head_dim);
          }
          detail::store_row(dq + sh.q_at(b, i, h), dqi, head_dim);
        }
      for (int64_t j = 0; j < seq; ++j) {
        detail::store_row(dk + sh.kv_at(b, j, g), dk_row(j), head_dim);
        detail::store_row(dv + sh.kv_at(b, j, g), dv_row(j), head_dim);
      }
    }
  }
}

void attention_forward(float* out, const float* q, const float* k, const float* v, int64_t batch,
                       int64_t seq, int64_t q_heads, int64_t kv_heads, int64_t head_dim,
                       float scale, bool causal, int64_t window, const AttentionDropout& dropout) {
  attention_forward<float>(out, q, k, v, batch, seq, q_heads, kv_heads, head_dim, scale, causal,
                           window, dropout);
}

void attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* q,
                        const float* k, const float* v, int64_t batch, int64_t seq,
                        int64_t q_heads, int64_t kv_heads, int64_t head_dim, float scale,
                        bool causal, int64_t window, const AttentionDropout& dropout) {
  attention_backward<float>(dq, dk, dv, dout, q, k, v, batch, seq, q_heads, kv_heads, head_dim,
                            scale, causal, window, dropout);
}

void attention_decode(float* out, const float* q, const float* k, const float* v, const KvCache& cache,
                      int64_t layer, int64_t batch, int64_t q_heads, int64_t kv_heads, int64_t head_dim,
                      float scale, int64_t window) {
  check_heads("attention_decode", q_heads, kv_heads);
  check_window("attention_decode", /*causal=*/true, window);
  if (layer < 0 || layer >= cache.layers || cache.position < 0 || cache.position >= cache.capacity)
    throw Error("attention_decode: layer " + std::to_string(layer) + " position " +
                std::to_string(cache.position) + " outside the KV cache (" + std::to_string(cache.layers) +
                " layers, " + std::to_string(cache.capacity) + " positions)");
  const int64_t row = kv_heads * head_dim; // one position of one sample
  float* keys = cache.keys[layer];
  float* values = cache.values[layer];
  for (int64_t b = 0; b < batch; ++b) {
    std::memcpy(keys + (b * cache.capacity + cache.position) * row, k + b * row, sizeof(float) * row);
    std::memcpy(values + (b * cache.capacity + cache.position) * row, v + b * row, sizeof(float) * row);
  }
  // The cache is [batch, capacity, kv_heads, head_dim]: the layout attention_forward reads k and
  // v in, with seq = capacity, so softmax_row and weighted_values are the forward's own.
  const Shape sh{batch, cache.capacity, q_heads, kv_heads, head_dim};
  const KeyRange keys_seen = key_range(cache.position, cache.capacity, /*causal=*/true, window);
  std::vector<float> p(static_cast<size_t>(keys_seen.keys));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < q_heads; ++h) {
      const int64_t g = h / sh.group();
      const float* qrow = q + (b * q_heads + h) * head_dim;
      softmax_row(p.data(), qrow, keys, sh, b, g, keys_seen, scale);
      weighted_values(out + (b * q_heads + h) * head_dim, p.data(), values, sh, b, g, keys_seen);
    }
}

#define MEGART_ATTENTION(A)                                                                        \
  template void attention_forward<A>(A*, const A*, const A*, const A*, int64_t, int64_t, int64_t,  \
                                     int64_t, int64_t, float, bool, int64_t,                       \
                                     const AttentionDropout&);                                     \
  template void attention_backward<A>(A*, A*, A*, const A*, const A*, const A*, const A*, int64_t, \
                                      int64_t, int64_t, int64_t, int64_t, float, bool, int64_t,    \
                                      const AttentionDropout&);
MEGART_ATTENTION(bf16_t)
MEGART_ATTENTION(fp16_t)

} // namespace megart::cpu
