// Mixture of experts on the CPU: routing, the moves between token order and expert order, the
// grouped GEMM (one cblas_sgemm per expert with rows, inside one call) and expert parallelism's
// all-to-all exchanges. Float32; every
// sum runs in a fixed order, so results do not depend on the thread count.
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
double log_sum_exp(const float *row, int64_t n) {
  const detail::RowSoftmax sm = detail::row_softmax(row, n);
  return sm.max + std::log(sm.sum);
}

// Whether expert a ranks before expert b: the more probable, the lower index among equals.
bool ranks_before(const float *p, int32_t a, int32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); }

template <bool Weighted>
void scatter(float *out, const float *in, const int32_t *rows, const float *weights, int64_t tokens, int64_t topk,
             int64_t hidden) {
  check_rows(Weighted ? "moe_scatter_weighted" : "moe_scatter", rows, tokens * topk);
#pragma omp parallel for schedule(static) if (tokens * topk * hidden > (1 << 16))
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t j = 0; j < topk; ++j) {
      float *dst = out + rows[t * topk + j] * hidden;
      const float *src = in + t * hidden;
      const float w = Weighted ? weights[t * topk + j] : 1.0f;
      for (int64_t h = 0; h < hidden; ++h)
        dst[h] = Weighted ? w * src[h] : src[h];
    }
}

template <bool Weighted>
void gather(float *out, const float *in, const int32_t *rows, const float *weights, int64_t tokens, int64_t topk,
            int64_t hidden) {
  check_rows(Weighted ? "moe_gather_weighted" : "moe_gather", rows, tokens * topk);
#pragma omp parallel for schedule(static) if (tokens * topk * hidden > (1 << 16))
  for (int64_t t = 0; t < tokens; ++t) {
    float *dst = out + t * hidden;
    for (int64_t h = 0; h < hidden; ++h)
      dst[h] = 0.0f;
    for (int64_t j = 0; j < topk; ++j) {
      const float *src = in + rows[t * topk + j] * hidden;
      const float w = Weighted ? weights[t * topk + j] : 1.0f;
      for (int64_t h = 0; h < hidden; ++h)
        dst[h] += Weighted ? w * src[h] : src[h];
    }
  }
}

} // namespace

void moe_route_forward(float *probs, int32_t *experts, float *weights, const float *logits, int64_t tokens,
                       int64_t num_experts, int64_t topk, bool pre_softmax) {
  if (topk < 1 || topk > num_experts)
    throw Error("moe_route_forward: topk " + std::to_string(topk) + " is outside [1, " + std::to_string(num_experts) +
                "]");
#pragma omp parallel for schedule(static) if (tokens * num_experts > (1 << 14))
  for (int64_t t = 0; t < tokens; ++t) {
    const float *l = logits + t * num_experts;
    float *p = probs + t * num_experts;
    float max = l[0];
    for (int64_t e = 1; e < num_experts; ++e)
      max = std::max(max, l[e]);
    double sum = 0.0;
    for (int64_t e = 0; e < num_experts; ++e)
      sum += p[e] = std::exp(l[e] - max);
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t e = 0; e < num_experts; ++e)
      p[e] *= inv;
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
      weights[t * topk + j] = pre_softmax ? p[chosen[j]] : p[chosen[j]] / total;
  }
}

void moe_route_backward(float *dlogits, const float *dprobs, const float *dweights, const float *probs,
                        const int32_t *experts, const float *weights, int64_t tokens, int64_t num_experts,
                        int64_t topk, bool pre_softmax) {
  check_experts("moe_route_backward", experts, tokens * topk, num_experts);
#pragma omp parallel for schedule(static) if (tokens * num_experts > (1 << 14))
  for (int64_t t = 0; t < tokens; ++t) {
    const float *p = probs + t * num_experts;
    float *d = dlogits + t * num_experts;
    for (int64_t e = 0; e < num_experts; ++e)
      d[e] = dprobs[t * num_experts + e]; // dp, then the softmax's backward in place
    // Renormalised weights w_j = p_j / S: dp_j += (dw_j - sum_i dw_i w_i) / S.
    float chosen = 0.0f, weighted = 0.0f;
    for (int64_t j = 0; j < topk; ++j) {
      chosen += p[experts[t * topk + j]];
      weighted += dweights[t * topk + j] * weights[t * topk + j];
    }
    for (int64_t j = 0; j < topk; ++j) {
      const float dw = dweights[t * topk + j];
      d[experts[t * topk + j]] += pre_softmax ? dw : (dw - weighted) / chosen;
    }
    float dot = 0.0f;
    for (int64_t e = 0; e < num_experts; ++e)
      dot += p[e] * d[e];
    for (int64_t e = 0; e < num_experts; ++e)
      d[e] = p[e] * (d[e] - dot);
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

void moe_drop(int32_t *kept, float *mask, const int32_t *experts, const float *weights, int64_t tokens, int64_t topk,
              int64_t num_experts, int64_t capacity, bool by_position) {
  const int64_t n = tokens * topk;
  check_experts("moe_drop", experts, n, num_experts);
  if (capacity < 0)
    throw Error("moe_drop: capacity " + std::to_string(capacity) + " is negative");
  std::vector<std::vector<int64_t>> chosen(static_cast<size_t>(num_experts));
  for (int64_t i = 0; i < n; ++i) { // each expert's choices in token order
    chosen[experts[i]].push_back(i);
    kept[i] = experts[i];
    mask[i] = 1.0f;
  }
  for (std::vector<int64_t> &c : chosen) {
    if (static_cast<int64_t>(c.size()) <= capacity)
      continue;
    if (!by_position) // the most probable first; among equal weights the earlier token
      std::stable_sort(c.begin(), c.end(), [&](int64_t a, int64_t b) { return weights[a] > weights[b]; });
    for (size_t j = static_cast<size_t>(capacity); j < c.size(); ++j)
      kept[c[j]] = -1, mask[c[j]] = 0.0f;
  }
}

void moe_scatter(float *out, const float *in, const int32_t *rows, int64_t tokens, int64_t topk, int64_t hidden) {
  scatter<false>(out, in, rows, nullptr, tokens, topk, hidden);
}
void moe_scatter_weighted(float *out, const float *in, const int32_t *rows, const float *weights, int64_t tokens,
                          int64_t topk, int64_t hidden) {
  scatter<true>(out, in, rows, weights, tokens, topk, hidden);
}
void moe_gather(float *out, const float *in, const int32_t *rows, int64_t tokens, int64_t topk, int64_t hidden) {
  gather<false>(out, in, rows, nullptr, tokens, topk, hidden);
}
void moe_gather_weighted(float *out, const float *in, const int32_t *rows, const float *weights, int64_t tokens,
                         int64_t topk, int64_t hidden) {
  gather<true>(out, in, rows, weights, tokens, topk, hidden);
}

void moe_row_dot(float *out, const float *tokens_in, const float *expert_rows, const int32_t *rows, int64_t tokens,
                 int64_t topk, int64_t hidden) {
  check_rows("moe_row_dot", rows, tokens * topk);
#pragma omp parallel for schedule(static) if (tokens * topk * hidden > (1 << 16))
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t j = 0; j < topk; ++j) {
      const float *a = tokens_in + t * hidden, *b = expert_rows + rows[t * topk + j] * hidden;
      float sum = 0.0f;
      for (int64_t h = 0; h < hidden; ++h)
        sum += a[h] * b[h];
      out[t * topk + j] = sum;
    }
}

void grouped_gemm(float *c, const float *a, const float *w, const int32_t *counts, int64_t num_segments,
                  int64_t num_experts, int64_t rows, int64_t k, int64_t n, bool transpose_w) {
  const int64_t counted = check_counts("grouped_gemm", counts, num_segments, rows, true);
  int64_t row = 0;
  for (int64_t s = 0; s < num_segments; row += counts[s++])
    if (counts[s] > 0)
      gemm(c + row * n, a + row * k, w + (s % num_experts) * k * n, counts[s], n, k, false, transpose_w);
  std::fill(c + counted * n, c + rows * n, 0.0f);
}

void grouped_gemm_weight_grad(float *dw, const float *a, const float *dc, const int32_t *counts, int64_t num_segments,
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

void moe_dispatch(const StepContext &ctx, float *out, const float *in, const int32_t *counts, const int32_t *received,
                  int64_t num_experts, int64_t local_rows, int64_t exchanged_rows, int64_t hidden) {
  Communicator &ep = expert_group(ctx, "moe_dispatch", num_experts);
  check_counts("moe_dispatch", counts, num_experts, local_rows, true);
  const int64_t arrive = check_counts("moe_dispatch", received, num_experts, exchanged_rows, true);
  const int64_t ranks = ep.size(), local = num_experts / ranks;
  ep.all_to_all_v(in, rank_elements(counts, ranks, local, hidden).data(), out,
                  rank_elements(received, ranks, local, hidden).data());
  std::fill(out + arrive * hidden, out + exchanged_rows * hidden, 0.0f);
}

void moe_combine(const StepContext &ctx, float *out, const float *in, const int32_t *counts, const int32_t *received,
                 int64_t num_experts, int64_t local_rows, int64_t exchanged_rows, int64_t hidden) {
  Communicator &ep = expert_group(ctx, "moe_combine", num_experts);
  const int64_t back = check_counts("moe_combine", counts, num_experts, local_rows, true);
  check_counts("moe_combine", received, num_experts, exchanged_rows, true);
  const int64_t ranks = ep.size(), local = num_experts / ranks;
  ep.all_to_all_v(in, rank_elements(received, ranks, local, hidden).data(), out,
                  rank_elements(counts, ranks, local, hidden).data());
  std::fill(out + back * hidden, out + local_rows * hidden, 0.0f); // dropped choices' rows
}

void gate_rows_forward(float *y, const float *x, const float *gate, int64_t tokens, int64_t hidden) {
#pragma omp parallel for schedule(static) if (tokens * hidden > (1 << 16))
  for (int64_t t = 0; t < tokens; ++t) {
    const float s = sigmoid(gate[t]);
    for (int64_t h = 0; h < hidden; ++h)
      y[t * hidden + h] = x[t * hidden + h] * s;
  }
}

void gate_rows_backward(float *dx, float *dgate, const float *dy, const float *x, const float *gate, int64_t tokens,
                        int64_t hidden) {
#pragma omp parallel for schedule(static) if (tokens * hidden > (1 << 16))
  for (int64_t t = 0; t < tokens; ++t) {
    const float s = sigmoid(gate[t]);
    float dot = 0.0f;
    for (int64_t h = 0; h < hidden; ++h) {
      dx[t * hidden + h] = dy[t * hidden + h] * s;
      dot += dy[t * hidden + h] * x[t * hidden + h];
    }
    dgate[t] = dot * s * (1.0f - s);
  }
}

void router_z_loss(float *out, const float *logits, int64_t tokens, int64_t num_experts) {
  double sum = 0.0;
  for (int64_t t = 0; t < tokens; ++t) {
    const double lse = log_sum_exp(logits + t * num_experts, num_experts);
    sum += lse * lse;
  }
  out[0] = static_cast<float>(sum / double(tokens));
}

void router_z_loss_backward(float *dlogits, float dloss, const float *logits, int64_t tokens, int64_t num_experts) {
#pragma omp parallel for schedule(static) if (tokens * num_experts > (1 << 14))
  for (int64_t t = 0; t < tokens; ++t) {
    const float *row = logits + t * num_experts;
    const double lse = log_sum_exp(row, num_experts);
    for (int64_t e = 0; e < num_experts; ++e)
      dlogits[t * num_experts + e] =
          static_cast<float>(double(dloss) * 2.0 * lse * std::exp(double(row[e]) - lse) / double(tokens));
  }
}

void router_load(float *load, const float *probs, const int32_t *counts, int64_t tokens, int64_t num_experts) {
  for (int64_t e = 0; e < num_experts; ++e) {
    load[e] = static_cast<float>(counts[e]);
    load[num_experts + e] = 0.0f;
  }
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t e = 0; e < num_experts; ++e)
      load[num_experts + e] += probs[t * num_experts + e];
}

void router_load_backward(float *dprobs, const float *dload, int64_t tokens, int64_t num_experts) {
  for (int64_t t = 0; t < tokens; ++t)
    std::copy(dload + num_experts, dload + 2 * num_experts, dprobs + t * num_experts);
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

} // namespace megart::cpu
