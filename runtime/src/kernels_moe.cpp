// Mixture of experts on the CPU: routing, the moves between token order and expert order, the
// grouped GEMM (one GEMM per expert with rows, inside one call) and expert parallelism's
// all-to-all exchanges. The activations (tokens, rows, the router's logits, probabilities and
// weights) are float or 16-bit (A: bf16_t, fp16_t), read widened to fp32 and rounded once on
// store; the loads and the losses are float. Every sum runs in a fixed order, so results do not
// depend on the thread count.
#include "megart/comm.h"
#include "megart/error.h"
#include "megart/kernels.h"
#include "megart/program.h"
#include "kernels_detail.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <string>
#include <vector>

namespace megart::cpu {
namespace {

// Checks run serially before any parallel region (exceptions must not cross OpenMP).
// dropped_allowed: -1 marks a choice moe_drop dropped.
void check_experts(const char *kernel, const int32_t *experts, int64_t n, int64_t num_experts,
                   bool dropped_allowed = false) {
  for (int64_t i = 0; i < n; ++i)
    if (experts[i] < (dropped_allowed ? -1 : 0) || experts[i] >= num_experts)
      throw Error(std::string(kernel) + ": expert " + std::to_string(experts[i]) + " of choice " + std::to_string(i) +
                  " is outside [0, " + std::to_string(num_experts) + ")");
}

void check_rows(const char *kernel, const int32_t *rows, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (rows[i] < 0 || rows[i] >= n)
      throw Error(std::string(kernel) + ": row " + std::to_string(rows[i]) + " of choice " + std::to_string(i) +
                  " is outside [0, " + std::to_string(n) + ")");
}

// The rows the counts add up to; throws unless each is >= 0 and the sum is `rows` (at most `rows`
// where rows past the counted ones are padding: expert parallelism's received rows).
int64_t check_counts(const char *kernel, const int32_t *counts, int64_t num_segments, int64_t rows,
                     bool padded = false) {
  int64_t sum = 0;
  for (int64_t e = 0; e < num_segments; ++e) {
    if (counts[e] < 0)
      throw Error(std::string(kernel) + ": segment " + std::to_string(e) + " has " + std::to_string(counts[e]) +
                  " rows");
    sum += counts[e];
  }
  if (padded ? sum > rows : sum != rows)
    throw Error(std::string(kernel) + ": the counts sum to " + std::to_string(sum) + ", " +
                (padded ? "more than" : "not") + " the " + std::to_string(rows) + " rows");
  return sum;
}

// Expert parallelism's group, and the experts each of its ranks holds.
Communicator &expert_group(const StepContext &ctx, const char *kernel, int64_t num_experts) {
  if (!ctx.ep)
    throw Error(std::string(kernel) + ": the step has no expert-parallel communicator");
  if (num_experts % ctx.ep->size() != 0)
    throw Error(std::string(kernel) + ": " + std::to_string(num_experts) + " experts do not split over " +
                std::to_string(ctx.ep->size()) + " expert-parallel ranks");
  return *ctx.ep;
}

// Elements for each rank of the group: `hidden` x the rows of its `local` counts.
std::vector<int64_t> rank_elements(const int32_t *counts, int64_t ranks, int64_t local, int64_t hidden) {
  std::vector<int64_t> elements(static_cast<size_t>(ranks), 0);
  for (int64_t r = 0; r < ranks; ++r)
    for (int64_t e = 0; e < local; ++e)
      elements[r] += static_cast<int64_t>(counts[r * local + e]) * hidden;
  return elements;
}

// transformers' sigmoid in float32: 1 / (1 + exp(-g)).
float sigmoid(float g) { return 1.0f / (1.0f + std::exp(-g)); }

// A row of router logits' logsumexp, in double.
template <typename A> double log_sum_exp(const A *row, int64_t n) {
  const detail::RowSoftmax sm = detail::row_softmax(row, n);
  return sm.max + std::log(sm.sum);
}

// Whether expert a ranks before expert b: the more probable, the lower index among equals.
bool ranks_before(const float *p, int32_t a, int32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); }

template <bool Weighted, typename A>
void scatter(A *out, const A *in, const int32_t *rows, const A *weights, int64_t tokens, int64_t topk,
             int64_t hidden) {
  check_rows(Weighted ? "moe_scatter_weighted" : "moe_scatter", rows, tokens * topk);
#pragma omp parallel for schedule(static) if (tokens * topk * hidden > (1 << 16))
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t j = 0; j < topk; ++j) {
      A *dst = out + rows[t * topk + j] * hidden;
      const A *src = in + t * hidden;
      const float w = Weighted ? to_float(weights[t * topk + j]) : 1.0f;
      for (int64_t h = 0; h < hidden; ++h)
        dst[h] = Weighted ? from_float<A>(w * to_float(src[h])) : src[h];
    }
}

// Each token's sum over its choices in fp32, rounded once.
template <bool Weighted, typename A>
void gather(A *out, const A *in, const int32_t *rows, const A *weights, int64_t tokens, int64_t topk,
            int64_t hidden) {
  check_rows(Weighted ? "moe_gather_weighted" : "moe_gather", rows, tokens * topk);
#pragma omp parallel for schedule(static) if (tokens * topk * hidden > (1 << 16))
  for (int64_t t = 0; t < tokens; ++t) {
    A *dst = out + t * hidden;
    for (int64_t h = 0; h < hidden; ++h) {
      float sum = 0.0f;
      for (int64_t j = 0; j < topk; ++j) {
        const float v = to_float(in[rows[t * topk + j] * hidden + h]);
        sum += Weighted ? to_float(weights[t * topk + j]) * v : v;
      }
      dst[h] = from_float<A>(sum);
    }
  }
}

// Expert parallelism's rows travel as whole fp32 words (two 16-bit elements each), as the
// pipeline's activations do: every rank's part must hold an even number of 16-bit elements.
template <typename A>
void exchange_rows(Communicator &ep, const char *kernel, const A *in, const int32_t *send, A *out,
                   const int32_t *recv, int64_t local, int64_t hidden) {
  const int64_t ranks = ep.size();
  std::vector<int64_t> sends = rank_elements(send, ranks, local, hidden), recvs = rank_elements(recv, ranks, local, hidden);
  if constexpr (sizeof(A) == sizeof(float)) {
    ep.all_to_all_v(in, sends.data(), out, recvs.data());
  } else {
    static_assert(2 * sizeof(A) == sizeof(float));
    if (hidden % 2 != 0)
      throw Error(std::string(kernel) + ": 16-bit rows of " + std::to_string(hidden) +
                  " elements do not pack into fp32 words; an even hidden size is needed");
    for (std::vector<int64_t> *v : {&sends, &recvs})
      for (int64_t &n : *v)
        n /= 2;
    ep.all_to_all_v(reinterpret_cast<const float *>(in), sends.data(), reinterpret_cast<float *>(out), recvs.data());
  }
}

} // namespace

// The softmax and the choice in fp32 (transformers' Mixtral: a float softmax, its top k, the
// weights cast to the activations' type); probabilities and weights stored rounded.
template <typename A>
void moe_route_forward(A *probs, int32_t *experts, A *weights, const A *logits, int64_t tokens, int64_t num_experts,
                       int64_t topk, bool pre_softmax) {
  if (topk < 1 || topk > num_experts)
    throw Error("moe_route_forward: topk " + std::to_string(topk) + " is outside [1, " + std::to_string(num_experts) +
                "]");
#pragma omp parallel if (tokens * num_experts > (1 << 14))
  {
  std::vector<float> row(static_cast<size_t>(num_experts));
  float *p = row.data();
#pragma omp for schedule(static)
  for (int64_t t = 0; t < tokens; ++t) {
    const A *l = logits + t * num_experts;
    float max = to_float(l[0]);
    for (int64_t e = 1; e < num_experts; ++e)
      max = std::max(max, to_float(l[e]));
    double sum = 0.0;
    for (int64_t e = 0; e < num_experts; ++e)
      sum += p[e] = std::exp(to_float(l[e]) - max);
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t e = 0; e < num_experts; ++e) {
      p[e] *= inv;
      probs[t * num_experts + e] = from_float<A>(p[e]);
    }
    // Selection of the top k by insertion: k is small (2 to 8).
    int32_t *chosen = experts + t * topk;
    int64_t n = 0;
    for (int32_t e = 0; e < num_experts; ++e) {
      if (n == topk && !ranks_before(p, e, chosen[n - 1]))
        continue;
      int64_t at = n < topk ? n++ : n - 1;
      while (at > 0 && ranks_before(p, e, chosen[at - 1])) {
        chosen[at] = chosen[at - 1];
        --at;
      }
      chosen[at] = e;
    }
    float total = 0.0f;
    for (int64_t j = 0; j < topk; ++j)
      total += p[chosen[j]];
    for (int64_t j = 0; j < topk; ++j)
      weights[t * topk + j] = from_float<A>(pre_softmax ? p[chosen[j]] : p[chosen[j]] / total);
  }
  }
}

template <typename A>
void moe_route_backward(A *dlogits, const A *dprobs, const A *dweights, const A *probs, const int32_t *experts,
                        const A *weights, int64_t tokens, int64_t num_experts, int64_t topk, bool pre_softmax) {
  check_experts("moe_route_backward", experts, tokens * topk, num_experts);
#pragma omp parallel if (tokens * num_experts > (1 << 14))
  {
  // A token's probabilities and dlogits in fp32, dlogits stored once at the end.
  std::vector<float> row(static_cast<size_t>(2 * num_experts));
  float *p = row.data(), *d = p + num_experts;
#pragma omp for schedule(static)
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t e = 0; e < num_experts; ++e) {
      p[e] = to_float(probs[t * num_experts + e]);
      d[e] = to_float(dprobs[t * num_experts + e]); // dp, then the softmax's backward in place
    }
    // Renormalised weights w_j = p_j / S: dp_j += (dw_j - sum_i dw_i w_i) / S.
    float chosen = 0.0f, weighted = 0.0f;
    for (int64_t j = 0; j < topk; ++j) {
      chosen += p[experts[t * topk + j]];
      weighted += to_float(dweights[t * topk + j]) * to_float(weights[t * topk + j]);
    }
    for (int64_t j = 0; j < topk; ++j) {
      const float dw = to_float(dweights[t * topk + j]);
      d[experts[t * topk + j]] += pre_softmax ? dw : (dw - weighted) / chosen;
    }
    float dot = 0.0f;
    for (int64_t e = 0; e < num_experts; ++e)
      dot += p[e] * d[e];
    for (int64_t e = 0; e < num_experts; ++e)
      dlogits[t * num_experts + e] = from_float<A>(p[e] * (d[e] - dot));
  }
  }
}

void moe_assign(int32_t *rows, int32_t *counts, const int32_t *experts, int64_t tokens, int64_t topk,
                int64_t num_experts) {
  const int64_t n = tokens * topk;
  check_experts("moe_assign", experts, n, num_experts, /*dropped_allowed=*/true);
  if (n > INT32_MAX)
    throw Error("moe_assign: " + std::to_string(n) + " choices do not fit int32 rows");
  // A dropped choice (-1, moe_drop's) goes after every expert's rows, where nothing reads it.
  std::vector<int32_t> next(num_experts + 1, 0);
  for (int64_t e = 0; e < num_experts; ++e)
    counts[e] = 0;
  for (int64_t i = 0; i < n; ++i)
    if (experts[i] >= 0)
      ++counts[experts[i]];
  for (int64_t e = 1; e <= num_experts; ++e)
    next[e] = next[e - 1] + counts[e - 1];
  for (int64_t i = 0; i < n; ++i) // in token order, so by token then choice within an expert
    rows[i] = next[experts[i] >= 0 ? experts[i] : num_experts]++;
}

template <typename A>
void moe_drop(int32_t *kept, A *mask, const int32_t *experts, const A *weights, int64_t tokens, int64_t topk,
              int64_t num_experts, int64_t capacity, bool by_position) {
  const int64_t n = tokens * topk;
  check_experts("moe_drop", experts, n, num_experts);
  if (capacity < 0)
    throw Error("moe_drop: capacity " + std::to_string(capacity) + " is negative");
  std::vector<std::vector<int64_t>> chosen(static_cast<size_t>(num_experts));
  for (int64_t i = 0; i < n; ++i) { // each expert's choices in token order
    chosen[experts[i]].push_back(i);
    kept[i] = experts[i];
    mask[i] = from_float<A>(1.0f);
  }
  for (std::vector<int64_t> &c : chosen) {
    if (static_cast<int64_t>(c.size()) <= capacity)
      continue;
    if (!by_position) // the most probable first; among equal weights the earlier token
      std::stable_sort(c.begin(), c.end(),
                       [&](int64_t a, int64_t b) { return to_float(weights[a]) > to_float(weights[b]); });
    for (size_t j = static_cast<size_t>(capacity); j < c.size(); ++j)
      kept[c[j]] = -1, mask[c[j]] = from_float<A>(0.0f);
  }
}

template <typename A>
void moe_scatter(A *out, const A *in, const int32_t *rows, int64_t tokens, int64_t topk, int64_t hidden) {
  scatter<false>(out, in, rows, static_cast<const A *>(nullptr), tokens, topk, hidden);
}
template <typename A>
void moe_scatter_weighted(A *out, const A *in, const int32_t *rows, const A *weights, int64_t tokens, int64_t topk,
                          int64_t hidden) {
  scatter<true>(out, in, rows, weights, tokens, topk, hidden);
}
template <typename A>
void moe_gather(A *out, const A *in, const int32_t *rows, int64_t tokens, int64_t topk, int64_t hidden) {
  gather<false>(out, in, rows, static_cast<const A *>(nullptr), tokens, topk, hidden);
}
template <typename A>
void moe_gather_weighted(A *out, const A *in, const int32_t *rows, const A *weights, int64_t tokens, int64_t topk,
                         int64_t hidden) {
  gather<true>(out, in, rows, weights, tokens, topk, hidden);
}

template <typename A>
void moe_row_dot(A *out, const A *tokens_in, const A *expert_rows, const int32_t *rows, int64_t tokens, int64_t topk,
                 int64_t hidden) {
  check_rows("moe_row_dot", rows, tokens * topk);
#pragma omp parallel for schedule(static) if (tokens * topk * hidden > (1 << 16))
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t j = 0; j < topk; ++j) {
      const A *a = tokens_in + t * hidden, *b = expert_rows + rows[t * topk + j] * hidden;
      float sum = 0.0f;
      for (int64_t h = 0; h < hidden; ++h)
        sum += to_float(a[h]) * to_float(b[h]);
      out[t * topk + j] = from_float<A>(sum);
    }
}

template <typename A>
void grouped_gemm(A *c, const A *a, const float *w, const int32_t *counts, int64_t num_segments, int64_t num_experts,
                  int64_t rows, int64_t k, int64_t n, bool transpose_w) {
  const int64_t counted = check_counts("grouped_gemm", counts, num_segments, rows, true);
  int64_t row = 0;
  for (int64_t s = 0; s < num_segments; row += counts[s++])
    if (counts[s] > 0)
      gemm(c + row * n, a + row * k, w + (s % num_experts) * k * n, counts[s], n, k, false, transpose_w);
  std::fill(c + counted * n, c + rows * n, from_float<A>(0.0f));
}

template <typename A>
void grouped_gemm_weight_grad(float *dw, const A *a, const A *dc, const int32_t *counts, int64_t num_segments,
                              int64_t num_experts, int64_t rows, int64_t k, int64_t n, bool transpose) {
  check_counts("grouped_gemm_weight_grad", counts, num_segments, rows, true);
  std::fill(dw, dw + num_experts * k * n, 0.0f);
  int64_t row = 0;
  for (int64_t s = 0; s < num_segments; row += counts[s++]) {
    if (counts[s] == 0)
      continue;
    float *out = dw + (s % num_experts) * k * n;
    if (transpose) // [n, k] += dC_s^T A_s
      gemm(out, dc + row * n, a + row * k, n, k, counts[s], true, false, 1.0f, 1.0f);
    else // [k, n] += A_s^T dC_s
      gemm(out, a + row * k, dc + row * n, k, n, counts[s], true, false, 1.0f, 1.0f);
  }
}

void moe_exchange_counts(const StepContext &ctx, int32_t *received, const int32_t *counts, int64_t num_experts) {
  Communicator &ep = expert_group(ctx, "moe_exchange_counts", num_experts);
  ep.all_to_all(counts, received, num_experts / ep.size());
}

template <typename A>
void moe_dispatch(const StepContext &ctx, A *out, const A *in, const int32_t *counts, const int32_t *received,
                  int64_t num_experts, int64_t local_rows, int64_t exchanged_rows, int64_t hidden) {
  Communicator &ep = expert_group(ctx, "moe_dispatch", num_experts);
  check_counts("moe_dispatch", counts, num_experts, local_rows, true);
  const int64_t arrive = check_counts("moe_dispatch", received, num_experts, exchanged_rows, true);
  exchange_rows(ep, "moe_dispatch", in, counts, out, received, num_experts / ep.size(), hidden);
  std::fill(out + arrive * hidden, out + exchanged_rows * hidden, from_float<A>(0.0f));
}

template <typename A>
void moe_combine(const StepContext &ctx, A *out, const A *in, const int32_t *counts, const int32_t *received,
                 int64_t num_experts, int64_t local_rows, int64_t exchanged_rows, int64_t hidden) {
  Communicator &ep = expert_group(ctx, "moe_combine", num_experts);
  const int64_t back = check_counts("moe_combine", counts, num_experts, local_rows, true);
  check_counts("moe_combine", received, num_experts, exchanged_rows, true);
  exchange_rows(ep, "moe_combine", in, received, out, counts, num_experts / ep.size(), hidden);
  std::fill(out + back * hidden, out + local_rows * hidden, from_float<A>(0.0f)); // dropped choices' rows
}

template <typename A> void gate_rows_forward(A *y, const A *x, const A *gate, int64_t tokens, int64_t hidden) {
#pragma omp parallel for schedule(static) if (tokens * hidden > (1 << 16))
  for (int64_t t = 0; t < tokens; ++t) {
    const float s = sigmoid(to_float(gate[t]));
    for (int64_t h = 0; h < hidden; ++h)
      y[t * hidden + h] = from_float<A>(to_float(x[t * hidden + h]) * s);
  }
}

template <typename A>
void gate_rows_backward(A *dx, A *dgate, const A *dy, const A *x, const A *gate, int64_t tokens, int64_t hidden) {
#pragma omp parallel for schedule(static) if (tokens * hidden > (1 << 16))
  for (int64_t t = 0; t < tokens; ++t) {
    const float s = sigmoid(to_float(gate[t]));
    float dot = 0.0f;
    for (int64_t h = 0; h < hidden; ++h) {
      const float d = to_float(dy[t * hidden + h]);
      dx[t * hidden + h] = from_float<A>(d * s);
      dot += d * to_float(x[t * hidden + h]);
    }
    dgate[t] = from_float<A>(dot * s * (1.0f - s));
  }
}

template <typename A> void router_z_loss(float *out, const A *logits, int64_t tokens, int64_t num_experts) {
  double sum = 0.0;
  for (int64_t t = 0; t < tokens; ++t) {
    const double lse = log_sum_exp(logits + t * num_experts, num_experts);
    sum += lse * lse;
  }
  out[0] = static_cast<float>(sum / double(tokens));
}

template <typename A>
void router_z_loss_backward(A *dlogits, float dloss, const A *logits, int64_t tokens, int64_t num_experts) {
#pragma omp parallel for schedule(static) if (tokens * num_experts > (1 << 14))
  for (int64_t t = 0; t < tokens; ++t) {
    const A *row = logits + t * num_experts;
    const double lse = log_sum_exp(row, num_experts);
    for (int64_t e = 0; e < num_experts; ++e)
      dlogits[t * num_experts + e] = from_float<A>(
          static_cast<float>(double(dloss) * 2.0 * lse * std::exp(double(to_float(row[e])) - lse) / double(tokens)));
  }
}

template <typename A>
void router_load(float *load, const A *probs, const int32_t *counts, int64_t tokens, int64_t num_experts) {
  for (int64_t e = 0; e < num_experts; ++e) {
    load[e] = static_cast<float>(counts[e]);
    load[num_experts + e] = 0.0f;
  }
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t e = 0; e < num_experts; ++e)
      load[num_experts + e] += to_float(probs[t * num_experts + e]);
}

template <typename A> void router_load_backward(A *dprobs, const float *dload, int64_t tokens, int64_t num_experts) {
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t e = 0; e < num_experts; ++e)
      dprobs[t * num_experts + e] = from_float<A>(dload[num_experts + e]);
}

void load_balancing_loss(float *out, const float *load, int64_t num_experts, double scale) {
  double sum = 0.0;
  for (int64_t e = 0; e < num_experts; ++e)
    sum += double(load[e]) * load[num_experts + e];
  out[0] = static_cast<float>(scale * sum);
}

void load_balancing_loss_backward(float *dload, float dloss, const float *load, int64_t num_experts, double scale) {
  for (int64_t e = 0; e < num_experts; ++e) {
    dload[e] = 0.0f;
    dload[num_experts + e] = static_cast<float>(scale * dloss * load[e]);
  }
}

// The activations' types: float (the declarations without templates forward here) and 16-bit.
#define MEGART_MOE_KERNELS(A)                                                                                         \
  template void moe_route_forward<A>(A *, int32_t *, A *, const A *, int64_t, int64_t, int64_t, bool);               \
  template void moe_route_backward<A>(A *, const A *, const A *, const A *, const int32_t *, const A *, int64_t,     \
                                      int64_t, int64_t, bool);                                                       \
  template void moe_drop<A>(int32_t *, A *, const int32_t *, const A *, int64_t, int64_t, int64_t, int64_t, bool);   \
  template void moe_scatter<A>(A *, const A *, const int32_t *, int64_t, int64_t, int64_t);                          \
  template void moe_scatter_weighted<A>(A *, const A *, const int32_t *, const A *, int64_t, int64_t, int64_t);      \
  template void moe_gather<A>(A *, const A *, const int32_t *, int64_t, int64_t, int64_t);                           \
  template void moe_gather_weighted<A>(A *, const A *, const int32_t *, const A *, int64_t, int64_t, int64_t);       \
  template void moe_row_dot<A>(A *, const A *, const A *, const int32_t *, int64_t, int64_t, int64_t);               \
  template void grouped_gemm<A>(A *, const A *, const float *, const int32_t *, int64_t, int64_t, int64_t, int64_t,  \
                                int64_t, bool);                                                                      \
  template void grouped_gemm_weight_grad<A>(float *, const A *, const A *, const int32_t *, int64_t, int64_t,        \
                                            int64_t, int64_t, int64_t, bool);                                        \
  template void moe_dispatch<A>(const StepContext &, A *, const A *, const int32_t *, const int32_t *, int64_t,      \
                                int64_t, int64_t, int64_t);                                                          \
  template void moe_combine<A>(const StepContext &, A *, const A *, const int32_t *, const int32_t *, int64_t,       \
                               int64_t, int64_t, int64_t);                                                           \
  template void gate_rows_forward<A>(A *, const A *, const A *, int64_t, int64_t);                                   \
  template void gate_rows_backward<A>(A *, A *, const A *, const A *, const A *, int64_t, int64_t);                  \
  template void router_z_loss<A>(float *, const A *, int64_t, int64_t);                                              \
  template void router_z_loss_backward<A>(A *, float, const A *, int64_t, int64_t);                                 \
  template void router_load<A>(float *, const A *, const int32_t *, int64_t, int64_t);                               \
  template void router_load_backward<A>(A *, const float *, int64_t, int64_t);
MEGART_MOE_KERNELS(float)
MEGART_MOE_KERNELS(bf16_t)
MEGART_MOE_KERNELS(fp16_t)

} // namespace megart::cpu
