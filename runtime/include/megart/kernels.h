// CPU compute kernels of the training runtime. The compiler emits calls to these, so the
// signatures are a contract with lib/Target.
//
// Conventions for every kernel:
//  - float32 tensors, row-major, contiguous; sizes are int64_t; token ids / labels are int32_t.
//  - outputs are overwritten, never accumulated into (gemm's beta is the one exception).
//  - invalid arguments (ids or labels out of range, bad rates) throw megart::Error before any
//    output is written.
//  - elementwise kernels (gelu, swiglu, add, mul, scale, dropout) and rope allow an output to
//    alias an input exactly (in place); all other kernels need outputs disjoint from inputs.
//  - results do not depend on the OpenMP thread count (reductions use fixed blocking).
//  - 16-bit activations (--bf16 / --fp16): the templates after each float kernel take the
//    activation pointers as A* with A = bf16_t or fp16_t (megart/half.h; the only types they
//    are instantiated for). They widen every element they read to fp32, compute exactly as the
//    float kernel does and round once when they store: the result is bitwise
//    from_float<A>(float kernel on the widened inputs). Parameters (weights, biases), their
//    gradients, losses and softmax statistics stay float.
#pragma once

#include "megart/dropout.h"
#include "megart/half.h"
#include "megart/kv_cache.h"
#include "megart/precision.h"

#include <climits>
#include <cstdint>

namespace megart {
// A loss's ignore_index when nothing is ignored (no label is this).
inline constexpr int32_t kNoIgnoredLabel = INT32_MIN;
} // namespace megart

namespace megart {
struct StepContext;
}

namespace megart::cpu {

// ---- GEMM (kernels_gemm.cpp) --------------------------------------------------------------

// The input precision of every gemm / gemm_batched / gemm_bias / gemm_bias_gelu from now on
// (the CPU Device's compute precision; Fp32 at start; process-wide). Fp32: cblas_sgemm on the
// operands as given. Bf16 / Fp16 EMULATE the CUDA backend's low-precision GEMM: copies of A and
// B are rounded with round_to_precision into thread-local scratch and cblas_sgemm multiplies
// those in fp32, so the products are exact and only the fp32 accumulation order differs from a
// tensor core's. For checking numerics without a GPU; slower than fp32 (the extra copies). The
// CUDA GEMM computes a shape cuBLASLt has no bf16 / fp16 algorithm for in fp32; the emulation
// always rounds, so it is never the more accurate of the two.
void set_gemm_precision(Precision p);
Precision gemm_precision();

// out[i] = in[i] rounded to the nearest value of `p`, ties to even, kept as a float (in place
// when out == in). Bf16: 8 significant bits, fp32's exponent range (values beyond the largest
// bf16 round to +-inf). Fp16: 11 significant bits; above 65504 after rounding +-inf; below
// 2^-14 subnormal with spacing 2^-24 (magnitudes up to 2^-25 round to +-0). Inf stays inf, NaN
// stays NaN.
// Fp32: a copy. (What __float2bfloat16_rn / __float2half_rn give, widened back to float.)
void round_to_precision(float *out, const float *in, int64_t n, Precision p);

// C[m,n] = alpha * op(A) op(B) + beta * C, op = transpose when the flag is set. A is [m,k]
// ([k,m] when transposed), B is [k,n] ([n,k] when transposed). Wraps cblas_sgemm. With
// beta == 0, C is not read (NaN garbage in C does not propagate).
void gemm(float* c, const float* a, const float* b, int64_t m, int64_t n, int64_t k,
          bool transpose_a, bool transpose_b, float alpha = 1.0f, float beta = 0.0f);

// for i in [0, batch): gemm(c + i*stride_c, a + i*stride_a, b + i*stride_b, ...).
// A stride of 0 broadcasts that operand. Products run in batch order, so stride_c = 0 with
// beta = 1 accumulates all of them into one C (deterministically); with beta = 0 the last wins.
void gemm_batched(float* c, const float* a, const float* b, int64_t batch, int64_t m, int64_t n,
                  int64_t k, bool transpose_a, bool transpose_b, int64_t stride_a, int64_t stride_b,
                  int64_t stride_c, float alpha = 1.0f, float beta = 0.0f);

// A linear layer as one call (megac-fuse-epilogues): out[m, n] = A[m, k] op(B) + bias[n], op =
// transpose when transpose_b (B is [n, k] then, else [k, n]). Bitwise the same as gemm then add.
void gemm_bias(float *out, const float *a, const float *b, const float *bias, int64_t m, int64_t n, int64_t k,
               bool transpose_b);
// pre = gemm_bias(...), out = gelu(pre) (tanh approximation when `tanh`, else erf); pre is
// kept for the backward. Bitwise the same as gemm, add, gelu_*_forward.
void gemm_bias_gelu(float *pre, float *out, const float *a, const float *b, const float *bias, int64_t m,
                    int64_t n, int64_t k, bool transpose_b, bool tanh);

// The same with any operand 16-bit: every C / Ta / Tb (O / Ta / Tw) is float or one 16-bit type
// T (bf16_t or fp16_t), in every combination. A 16-bit operand is widened to fp32 (not rounded
// again); a float operand is rounded per gemm_precision() as above. A 16-bit C is computed in
// fp32 (reading C widened when beta != 0) and rounded once on store; gemm_batched with
// stride_c = 0 accumulates every product in fp32 and rounds once at the end. gemm_bias /
// gemm_bias_gelu keep the unfused order (gemm rounded into out / pre, + bias rounded, gelu of
// the rounded pre), so fused == unfused bitwise in every precision.
template <typename C, typename Ta, typename Tb>
void gemm(C *c, const Ta *a, const Tb *b, int64_t m, int64_t n, int64_t k, bool transpose_a, bool transpose_b,
          float alpha = 1.0f, float beta = 0.0f);
template <typename C, typename Ta, typename Tb>
void gemm_batched(C *c, const Ta *a, const Tb *b, int64_t batch, int64_t m, int64_t n, int64_t k,
                  bool transpose_a, bool transpose_b, int64_t stride_a, int64_t stride_b, int64_t stride_c,
                  float alpha = 1.0f, float beta = 0.0f);
template <typename O, typename Ta, typename Tw>
void gemm_bias(O *out, const Ta *a, const Tw *w, const float *bias, int64_t m, int64_t n, int64_t k,
               bool transpose_b);
template <typename O, typename Ta, typename Tw>
void gemm_bias_gelu(O *pre, O *out, const Ta *a, const Tw *w, const float *bias, int64_t m, int64_t n, int64_t k,
                    bool transpose_b, bool tanh);

// ---- Embedding (kernels_embedding.cpp) ----------------------------------------------------

// out[t, :] = table[ids[t], :]; table is [vocab, dim], out [tokens, dim].
// Throws megart::Error naming the token position if an id is outside [0, vocab).
void embedding_forward(float* out, const float* table, const int32_t* ids, int64_t tokens,
                       int64_t vocab, int64_t dim);

// dtable[vocab, dim] = 0, then dtable[ids[t], :] += dout[t, :] in token order (deterministic:
// threads split the dim columns, each walks all tokens). Same id check as the forward.
void embedding_backward(float* dtable, const float* dout, const int32_t* ids, int64_t tokens,
                        int64_t vocab, int64_t dim);

// 16-bit: out / dout are A*; the table and its gradient stay float.
template <typename A>
void embedding_forward(A *out, const float *table, const int32_t *ids, int64_t tokens, int64_t vocab,
                       int64_t dim);
template <typename A>
void embedding_backward(float *dtable, const A *dout, const int32_t *ids, int64_t tokens, int64_t vocab,
                        int64_t dim);

// ---- Normalization (kernels_norm.cpp) -----------------------------------------------------

// x, y: [rows, dim]; w, b: [dim]. y = (x - mean) / sqrt(var + eps) * w + b, biased variance
// (torch.nn.LayerNorm). Row statistics are computed in double.
void layer_norm_forward(float* y, const float* x, const float* w, const float* b, int64_t rows,
                        int64_t dim, float eps);

// Recomputes the row statistics from x. Writes dx [rows, dim] and dw, db [dim] (sums over rows).
void layer_norm_backward(float* dx, float* dw, float* db, const float* dy, const float* x,
                         const float* w, int64_t rows, int64_t dim, float eps);

// y = x / sqrt(mean(x^2) + eps) * w (HF LlamaRMSNorm); x, y: [rows, dim], w: [dim]. With a
// weight_offset c the scale is (w + c), computed in float (HF GemmaRMSNorm's 1 + w).
void rms_norm_forward(float* y, const float* x, const float* w, int64_t rows, int64_t dim,
                      float eps, float weight_offset = 0.0f);

// Recomputes the statistics from x. Writes dx [rows, dim] and dw [dim] (sum over rows).
void rms_norm_backward(float* dx, float* dw, const float* dy, const float* x, const float* w,
                       int64_t rows, int64_t dim, float eps, float weight_offset = 0.0f);

// 16-bit: x, y, dy, dx are A*; w, b, dw, db stay float.
template <typename A>
void layer_norm_forward(A *y, const A *x, const float *w, const float *b, int64_t rows, int64_t dim, float eps);
template <typename A>
void layer_norm_backward(A *dx, float *dw, float *db, const A *dy, const A *x, const float *w, int64_t rows,
                         int64_t dim, float eps);
template <typename A>
void rms_norm_forward(A *y, const A *x, const float *w, int64_t rows, int64_t dim, float eps,
                      float weight_offset = 0.0f);
template <typename A>
void rms_norm_backward(A *dx, float *dw, const A *dy, const A *x, const float *w, int64_t rows, int64_t dim,
                       float eps, float weight_offset = 0.0f);

// ---- Activations (kernels_activation.cpp) -------------------------------------------------

// y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))  (HF gelu_new, torch approximate='tanh').
void gelu_tanh_forward(float* y, const float* x, int64_t n);
// dx = dy * d/dx gelu_tanh(x).
void gelu_tanh_backward(float* dx, const float* dy, const float* x, int64_t n);

// y = 0.5 x (1 + erf(x / sqrt(2)))  (exact gelu).
void gelu_erf_forward(float* y, const float* x, int64_t n);
// dx = dy * (0.5 (1 + erf(x/sqrt 2)) + x exp(-x^2/2) / sqrt(2 pi)).
void gelu_erf_backward(float* dx, const float* dy, const float* x, int64_t n);

// y = silu(gate) * up, silu(g) = g * sigmoid(g). All arrays have n elements.
void swiglu_forward(float* y, const float* gate, const float* up, int64_t n);
// dgate = dy * up * silu'(gate), dup = dy * silu(gate).
void swiglu_backward(float* dgate, float* dup, const float* dy, const float* gate, const float* up,
                     int64_t n);

// 16-bit: every pointer is A*.
template <typename A> void gelu_tanh_forward(A *y, const A *x, int64_t n);
template <typename A> void gelu_tanh_backward(A *dx, const A *dy, const A *x, int64_t n);
template <typename A> void gelu_erf_forward(A *y, const A *x, int64_t n);
template <typename A> void gelu_erf_backward(A *dx, const A *dy, const A *x, int64_t n);
template <typename A> void swiglu_forward(A *y, const A *gate, const A *up, int64_t n);
template <typename A>
void swiglu_backward(A *dgate, A *dup, const A *dy, const A *gate, const A *up, int64_t n);

// ---- Rotary embedding (kernels_rope.cpp) --------------------------------------------------

// x, y: [batch, seq, heads, head_dim], head_dim even; rotate_half convention (HF Llama).
// For position p = s + position_offset and i < half = head_dim/2:
//   inv_freq_i = 1 / theta^(2i/head_dim), angle = p * inv_freq_i,
//   y[i] = x[i] cos - x[i+half] sin ;  y[i+half] = x[i+half] cos + x[i] sin.
// inverse = true rotates by -angle; that is exactly the backward: dx = rope(dy, inverse=true).
// Precision follows HF/PyTorch float32 step by step so the tables match it: the exponent
// 2i/head_dim, theta^exponent, 1/that and p*inv_freq are each rounded to float32; cos and sin of
// that float angle are then computed in double and rounded once (a correctly rounded cosf/sinf).
// position_divisor f: p is (float)p / f first (transformers' linear rope scaling).
// Throws megart::Error if head_dim is odd.
void rope_forward(float* y, const float* x, int64_t batch, int64_t seq, int64_t heads,
                  int64_t head_dim, float theta, int64_t position_offset, bool inverse,
                  float position_divisor = 1.0f);
// 16-bit: x, y are A* (the cos / sin tables stay float).
template <typename A>
void rope_forward(A *y, const A *x, int64_t batch, int64_t seq, int64_t heads, int64_t head_dim, float theta,
                  int64_t position_offset, bool inverse, float position_divisor = 1.0f);

// ---- Attention (kernels_attention.cpp) ----------------------------------------------------

// q, out: [batch, seq, q_heads, head_dim]; k, v: [batch, seq, kv_heads, head_dim].
// Grouped query attention: query head h reads kv head h / (q_heads / kv_heads).
// scores = scale * q.k; when causal, key position <= query position, and with a window w > 0
// (causal only) query position - key position <= w; softmax over keys (stable,
// two passes over a per-thread row of scores); out = P v. With dropout (rate > 0), P's element
// (sample, head, i, j) is dropped as a [samples, heads, seq, seq] dropout site (megart/dropout.h):
// out = (P * mask / (1 - rate)) v.
// Throws megart::Error if q_heads is not a multiple of kv_heads.
void attention_forward(float* out, const float* q, const float* k, const float* v, int64_t batch,
                       int64_t seq, int64_t q_heads, int64_t kv_heads, int64_t head_dim,
                       float scale, bool causal, int64_t window = 0, const AttentionDropout &dropout = {});

// Recomputes the probabilities from q and k. Writes dq [like q], dk and dv [like k]; dk/dv sum
// over the query heads of each group. Threads split (batch, kv_head) pairs, so each owns its
// dk/dv slices and the result is bitwise identical for any thread count.
void attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* q,
                        const float* k, const float* v, int64_t batch, int64_t seq,
                        int64_t q_heads, int64_t kv_heads, int64_t head_dim, float scale,
                        bool causal, int64_t window = 0, const AttentionDropout &dropout = {});

// One position of causal attention with a KV cache (generation): q, out [batch, 1, q_heads,
// head_dim]; k, v [batch, 1, kv_heads, head_dim] are stored at cache.position of `layer`'s
// cache, then each query head attends to the cached positions 0 .. cache.position. Row
// cache.position of attention_forward over the whole sequence, in the same arithmetic (with a
// window w > 0, the positions cache.position - w .. cache.position). Throws megart::Error if
// the layer or position is outside the cache or the heads do not divide.
void attention_decode(float* out, const float* q, const float* k, const float* v, const KvCache& cache,
                      int64_t layer, int64_t batch, int64_t q_heads, int64_t kv_heads, int64_t head_dim,
                      float scale, int64_t window = 0);

// 16-bit: every tensor (q, k, v, out, dout, dq, dk, dv) is A*; scores, probabilities and the
// dq / dk / dv sums stay fp32 until the one rounding on store.
template <typename A>
void attention_forward(A *out, const A *q, const A *k, const A *v, int64_t batch, int64_t seq, int64_t q_heads,
                       int64_t kv_heads, int64_t head_dim, float scale, bool causal, int64_t window = 0,
                       const AttentionDropout &dropout = {});
template <typename A>
void attention_backward(A *dq, A *dk, A *dv, const A *dout, const A *q, const A *k, const A *v, int64_t batch,
                        int64_t seq, int64_t q_heads, int64_t kv_heads, int64_t head_dim, float scale,
                        bool causal, int64_t window = 0, const AttentionDropout &dropout = {});

// ---- Loss (kernels_loss.cpp) --------------------------------------------------------------

// Mean cross-entropy: logits [tokens, vocab], labels [tokens]. Only the first valid_vocab
// columns take part in the softmax (the rest is vocab padding; pass vocab for none). Tokens
// labelled ignore_index (a masked language model's unmasked positions, transformers' -100) take
// no part: the mean is over the others, 0 when there are none. Accumulated in double. Throws
// megart::Error if a label is outside [0, valid_vocab) and not ignore_index, if valid_vocab is
// outside [1, vocab] or if tokens == 0 (the mean is undefined).
float cross_entropy_forward(const float* logits, const int32_t* labels, int64_t tokens,
                            int64_t vocab, int64_t valid_vocab, int32_t ignore_index = kNoIgnoredLabel);

// dlogits = dloss * (softmax(logits) - onehot(label)) / counted tokens; padded columns and
// ignored tokens' rows get 0. Same checks as the forward.
void cross_entropy_backward(float* dlogits, float dloss, const float* logits,
                            const int32_t* labels, int64_t tokens, int64_t vocab,
                            int64_t valid_vocab, int32_t ignore_index = kNoIgnoredLabel);

// 16-bit: logits and dlogits are A*; the loss stays float.
template <typename A>
float cross_entropy_forward(const A *logits, const int32_t *labels, int64_t tokens, int64_t vocab,
                            int64_t valid_vocab, int32_t ignore_index = kNoIgnoredLabel);
template <typename A>
void cross_entropy_backward(A *dlogits, float dloss, const A *logits, const int32_t *labels, int64_t tokens,
                            int64_t vocab, int64_t valid_vocab, int32_t ignore_index = kNoIgnoredLabel);

// ---- Elementwise (kernels_elementwise.cpp) ------------------------------------------------

// out[i, j] = a[i, j] + b[j]; a, out: [outer, inner], b: [inner] (outer = 1: same shape).
void add(float* out, const float* a, const float* b, int64_t outer, int64_t inner);
// out[i, j] = a[i, j] * b[j]; shapes as add.
void mul(float* out, const float* a, const float* b, int64_t outer, int64_t inner);
// out[j] = sum_i x[i, j]; x: [outer, inner]. Summed in double over fixed row blocks.
void reduce_sum_leading(float* out, const float* x, int64_t outer, int64_t inner);
// out = x * s.
void scale(float* out, const float* x, float s, int64_t n);

// 16-bit: add / mul for (O, L, R) = (A, A, A) and (A, A, float) (a bias on an activation);
// reduce_sum_leading of an A* x into a float out (a bias gradient); scale with A* out and x.
template <typename O, typename L, typename R>
void add(O *out, const L *a, const R *b, int64_t outer, int64_t inner);
template <typename O, typename L, typename R>
void mul(O *out, const L *a, const R *b, int64_t outer, int64_t inner);
template <typename A> void reduce_sum_leading(float *out, const A *x, int64_t outer, int64_t inner);
template <typename A> void scale(A *out, const A *x, float s, int64_t n);

// ---- Dropout (kernels_dropout.cpp) --------------------------------------------------------

// y = x * mask / (1 - rate) over a rank's block of a dropout site (megart/dropout.h): element
// (i0, i1, ...) of the block is element e = ((offset0 + i0) * extent1 + offset1 + i1) * ... of
// the site's global tensor, kept iff dropout_bits(key, e) >= dropout_keep_threshold(rate). The
// backward is the same map on the gradient. rate 0 copies; y may be x. Throws megart::Error
// unless 0 <= rate < 1, 1 <= rank <= 4 and the block lies inside the extents.
template <typename A> void apply_dropout(A *y, const A *x, const DropoutBlock &block);

// ---- mixture of experts (kernels_moe.cpp) --------------------------------------------------
// A: the activations' type, float or 16-bit (bf16_t, fp16_t): the tokens, the rows in expert
// order, the router's logits, probabilities and weights (and their gradients); the loads and the
// losses are float.
// A router's choices: experts [tokens, topk] in [0, experts); rows [tokens, topk] the place of
// each (token, choice) in expert order (by expert, then token, then choice; moe_assign), each
// row of [tokens x topk] once. Out-of-range experts or rows throw megart::Error.

// probs = softmax(logits) per token over the experts; experts the topk most probable (most
// probable first, the lower index first among equal probabilities); weights their probabilities,
// renormalised to sum to 1 unless pre_softmax.
// (16-bit: the softmax and the choice computed in fp32, probabilities and weights rounded.)
template <typename A>
void moe_route_forward(A *probs, int32_t *experts, A *weights, const A *logits, int64_t tokens, int64_t num_experts,
                       int64_t topk, bool pre_softmax);
// dlogits from the cotangents of probs and weights (moe_route_forward's results given).
template <typename A>
void moe_route_backward(A *dlogits, const A *dprobs, const A *dweights, const A *probs, const int32_t *experts,
                        const A *weights, int64_t tokens, int64_t num_experts, int64_t topk, bool pre_softmax);
// rows as above and counts[e] the choices of expert e; a dropped choice (expert -1) gets a row
// after every expert's (in token order) and is not counted.
void moe_assign(int32_t *rows, int32_t *counts, const int32_t *experts, int64_t tokens, int64_t topk,
                int64_t num_experts);
// Token dropping (Megatron's capacity factor): each expert keeps at most `capacity` of its choices,
// by weight (the most probable first, the earlier token among equal weights) or, by_position, the
// earliest tokens; kept = experts with -1 for a dropped choice, mask 1 for a kept one, 0 dropped.
template <typename A>
void moe_drop(int32_t *kept, A *mask, const int32_t *experts, const A *weights, int64_t tokens, int64_t topk,
              int64_t num_experts, int64_t capacity, bool by_position);
// out[rows[t, j]] = in[t] ([tokens, hidden] -> [tokens x topk, hidden]); _weighted: times weights[t, j].
template <typename A>
void moe_scatter(A *out, const A *in, const int32_t *rows, int64_t tokens, int64_t topk, int64_t hidden);
template <typename A>
void moe_scatter_weighted(A *out, const A *in, const int32_t *rows, const A *weights, int64_t tokens, int64_t topk,
                          int64_t hidden);
// out[t] = sum over j in order of in[rows[t, j]] (times weights[t, j]).
template <typename A>
void moe_gather(A *out, const A *in, const int32_t *rows, int64_t tokens, int64_t topk, int64_t hidden);
template <typename A>
void moe_gather_weighted(A *out, const A *in, const int32_t *rows, const A *weights, int64_t tokens, int64_t topk,
                         int64_t hidden);
// out[t, j] = tokens_in[t] . expert_rows[rows[t, j]].
template <typename A>
void moe_row_dot(A *out, const A *tokens_in, const A *expert_rows, const int32_t *rows, int64_t tokens, int64_t topk,
                 int64_t hidden);
// C [rows, n] = each segment's counts[s] rows of A [rows, k] (in order) times W[s mod experts]:
// [experts, k, n], or [experts, n, k] with transpose_w; rows past the counted ones (dropped
// choices', expert parallelism's padding) are zero. One segment per expert, or (expert
// parallelism) per expert of each sending rank; the counts must not sum past rows.
// (16-bit rows: the weights rounded as gemm rounds a float operand, fp32 accumulation.)
template <typename A>
void grouped_gemm(A *c, const A *a, const float *w, const int32_t *counts, int64_t num_segments, int64_t num_experts,
                  int64_t rows, int64_t k, int64_t n, bool transpose_w);
// dW[e] = the sum over e's segments of A_s^T dC_s ([experts, k, n]; dC_s^T A_s, [experts, n, k],
// with transpose); zeros for an expert with no rows.
template <typename A>
void grouped_gemm_weight_grad(float *dw, const A *a, const A *dc, const int32_t *counts, int64_t num_segments,
                              int64_t num_experts, int64_t rows, int64_t k, int64_t n, bool transpose);
// Expert parallelism over the step's ep group (StepContext::ep, whose rank r holds experts
// [r local, (r + 1) local), local = experts / its size). received[s local + e] = rank s's
// counts[r local + e]: an all-to-all of the counts.
void moe_exchange_counts(const StepContext &ctx, int32_t *received, const int32_t *counts, int64_t num_experts);
// out [exchanged_rows, hidden] = every rank's rows of this rank's experts (rank s's rows of its
// counts[r local .. (r + 1) local) from `in` [local_rows, hidden] in expert order), rank by rank,
// then zeros; moe_combine sends them back: out [local_rows, hidden] in expert order from `in`
// laid out as moe_dispatch's result. Throws megart::Error when the counts do not fit the rows
// (and, 16-bit, when the hidden size is odd: the rows travel as fp32 words).
template <typename A>
void moe_dispatch(const StepContext &ctx, A *out, const A *in, const int32_t *counts, const int32_t *received,
                  int64_t num_experts, int64_t local_rows, int64_t exchanged_rows, int64_t hidden);
template <typename A>
void moe_combine(const StepContext &ctx, A *out, const A *in, const int32_t *counts, const int32_t *received,
                 int64_t num_experts, int64_t local_rows, int64_t exchanged_rows, int64_t hidden);
// Qwen2-MoE's shared expert: y[t] = x[t] x sigmoid(gate[t]) ([tokens, hidden], gate [tokens]); its
// backward dx = dy x s and dgate[t] = s (1 - s) dy[t] . x[t].
template <typename A> void gate_rows_forward(A *y, const A *x, const A *gate, int64_t tokens, int64_t hidden);
template <typename A>
void gate_rows_backward(A *dx, A *dgate, const A *dy, const A *x, const A *gate, int64_t tokens, int64_t hidden);
// A router's z-loss: out[0] = mean over the tokens of logsumexp(logits[t])^2 (in double); its
// backward dlogits[t, e] = dloss x 2 lse_t softmax[t, e] / tokens.
template <typename A> void router_z_loss(float *out, const A *logits, int64_t tokens, int64_t num_experts);
template <typename A>
void router_z_loss_backward(A *dlogits, float dloss, const A *logits, int64_t tokens, int64_t num_experts);
// A router's load [2, experts]: row 0 the counts, row 1 each expert's probabilities summed over
// the tokens (in token order); its backward gives every token row 1 of dload.
template <typename A>
void router_load(float *load, const A *probs, const int32_t *counts, int64_t tokens, int64_t num_experts);
template <typename A> void router_load_backward(A *dprobs, const float *dload, int64_t tokens, int64_t num_experts);
// out[0] = scale x sum_e load[0, e] load[1, e]; its backward: row 1 = scale x dloss x load[0], row 0 zeros.
void load_balancing_loss(float *out, const float *load, int64_t num_experts, double scale);
void load_balancing_loss_backward(float *dload, float dloss, const float *load, int64_t num_experts, double scale);

} // namespace megart::cpu
