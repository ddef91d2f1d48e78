// The math of every `tx` op, forward and backward, in double precision, written from the op
// descriptions in docs/dialects/tx.md. Inputs are assumed verified (shapes agree, ids in
// range): the interpreter checks what the verifiers cannot before calling these.
// Backward kernels implement their own formulas; none is derived from a forward kernel, so
// comparing them with finite differences of the forward ones tests both.
#pragma once

#include "megac/Eval/Tensor.h"

#include <optional>

namespace megac::eval {

//===--- linear algebra and data movement ---------------------------------===//

/// [..., M, K] x ([K, N] shared, or [..., K, N] batched) -> [..., M, N]; the transpose
/// flags read lhs as [..., K, M] and rhs as [N, K].
Tensor matmul(const Tensor &lhs, const Tensor &rhs, bool transposeLhs, bool transposeRhs);
/// Elementwise, rhs repeated over the leading dimensions of lhs.
Tensor broadcastAdd(const Tensor &lhs, const Tensor &rhs);
Tensor broadcastMul(const Tensor &lhs, const Tensor &rhs);
/// Sums over the leading dimensions of `input` down to the trailing shape `shape`.
Tensor reduceSum(const Tensor &input, const Shape &shape);
Tensor reshape(const Tensor &input, const Shape &shape);
/// `size` entries along `dim` starting at `offset`.
Tensor slice(const Tensor &input, int64_t dim, int64_t offset, int64_t size);
/// A zero tensor of `shape` with `input` placed at `offset` along `dim`.
Tensor pad(const Tensor &input, int64_t dim, int64_t offset, const Shape &shape);
/// table [V, H], ids [...] -> [..., H].
Tensor embedding(const Tensor &table, const Tensor &ids);
/// grad [..., H], ids [...] -> [vocab, H], rows summed by id.
Tensor embeddingGrad(const Tensor &grad, const Tensor &ids, int64_t vocab);

//===--- normalisation ----------------------------------------------------===//

struct NormGrads {
  Tensor input, weight, bias; // bias is empty for rms_norm
};

/// (x - mean) / sqrt(var + eps) * w + b over the last dimension; var is biased (1/H).
Tensor layerNorm(const Tensor &x, const Tensor &w, const Tensor &b, double eps);
NormGrads layerNormGrad(const Tensor &dy, const Tensor &x, const Tensor &w, double eps);
/// x / sqrt(mean(x^2) + eps) * w over the last dimension.
/// The scale is w + weightOffset (Gemma's 1 + w).
Tensor rmsNorm(const Tensor &x, const Tensor &w, double eps, double weightOffset = 0.0);
NormGrads rmsNormGrad(const Tensor &dy, const Tensor &x, const Tensor &w, double eps, double weightOffset = 0.0);

//===--- activations ------------------------------------------------------===//

/// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), or exactly 0.5 x (1 + erf(x / sqrt 2)).
Tensor gelu(const Tensor &x, bool tanhApproximation);
Tensor geluGrad(const Tensor &dy, const Tensor &x, bool tanhApproximation);
/// silu(gate) * up, silu(g) = g * sigmoid(g).
Tensor swiglu(const Tensor &gate, const Tensor &up);
struct SwigluGrads {
  Tensor gate, up;
};
SwigluGrads swigluGrad(const Tensor &dy, const Tensor &gate, const Tensor &up);

//===--- attention --------------------------------------------------------===//

/// x [b, s, heads, d]: position p rotates (x[i], x[i + d/2]) by p * theta^(-2i/d) for
/// i < d/2 (rotate_half convention); `inverse` rotates by the negative angle.
Tensor rope(const Tensor &x, double theta, bool inverse, double positionDivisor = 1.0);
/// q [b, s, heads, d], k and v [b, s, groups, d]; query head h uses kv head
/// h / (heads / groups); softmax over keys of scale * q.k, keys j <= i when causal, and
/// i - window <= j with a window (0: none).
Tensor attention(const Tensor &q, const Tensor &k, const Tensor &v, bool causal, int64_t window, double scale);
struct AttentionGrads {
  Tensor query, key, value;
};
AttentionGrads attentionGrad(const Tensor &dout, const Tensor &q, const Tensor &k, const Tensor &v,
                             bool causal, int64_t window, double scale);

//===--- loss -------------------------------------------------------------===//

/// Mean over label positions of logsumexp(logits) - logits[label]; a scalar. Positions labelled
/// `ignore` take no part (0 when every one is ignored).
Tensor crossEntropy(const Tensor &logits, const Tensor &labels, std::optional<int64_t> ignore = std::nullopt);
/// dloss / N * (softmax(logits) - onehot(label)), N the positions not ignored (ignored rows 0).
Tensor crossEntropyGrad(const Tensor &dloss, const Tensor &logits, const Tensor &labels,
                        std::optional<int64_t> ignore = std::nullopt);

//===--- mixture of experts -----------------------------------------------===//

/// logits [T, E]: probs = softmax over the experts; experts [T, k] the k most probable, most
/// probable first, the lower index first among equals; weights their probabilities, renormalised
/// to sum to 1 unless preSoftmax.
struct Routing {
  Tensor probs, experts, weights;
};
Routing moeRoute(const Tensor &logits, int64_t topk, bool preSoftmax);
/// dlogits from the cotangents of probs and weights (the softmax's and the renormalisation's).
Tensor moeRouteGrad(const Tensor &dprobs, const Tensor &dweights, const Tensor &probs, const Tensor &experts,
                    const Tensor &weights, bool preSoftmax);
/// experts [T, k] -> rows [T, k] (each choice's place ordered by expert, token, choice) and
/// counts [numExperts].
struct Assignment {
  Tensor rows, counts;
};
Assignment moeAssign(const Tensor &experts, int64_t numExperts);
/// Each expert's choices beyond `capacity`, the least probable (or the latest tokens') first,
/// dropped: kept = experts with -1 there, mask 1 kept / 0 dropped.
struct Dropping {
  Tensor kept, mask;
};
Dropping moeDrop(const Tensor &experts, const Tensor &weights, int64_t numExperts, int64_t capacity, bool byPosition);
/// [T, H] -> [T k, H]: out[rows[t, j]] = x[t] (* weights[t, j]); weights may be null.
Tensor moeScatter(const Tensor &x, const Tensor &rows, const Tensor *weights);
/// [T k, H] -> [T, H]: out[t] = sum_j (weights[t, j] *) y[rows[t, j]].
Tensor moeGather(const Tensor &y, const Tensor &rows, const Tensor *weights);
/// out[t, j] = a[t] . b[rows[t, j]].
Tensor moeRowDot(const Tensor &a, const Tensor &b, const Tensor &rows);
/// lhs [R, K] in expert order, rhs [E, K, N] ([E, N, K] transposed), counts [E] -> [R, N].
Tensor groupedMatmul(const Tensor &lhs, const Tensor &rhs, const Tensor &counts, bool transposeRhs);
/// [E, K, N] ([E, N, K] transposed): each expert's lhs_e^T grad_e.
Tensor groupedMatmulWeightGrad(const Tensor &lhs, const Tensor &grad, const Tensor &counts, int64_t experts,
                               bool transpose);

/// probs [T, E], counts [E] -> [2, E]: the counts, then each expert's probabilities summed.
Tensor routerLoad(const Tensor &probs, const Tensor &counts);
/// [2, E] -> [T, E]: row 1 for every token.
Tensor routerLoadGrad(const Tensor &grad, int64_t tokens);
/// scale x sum_e load[0, e] x load[1, e], a scalar.
Tensor loadBalancingLoss(const Tensor &load, double scale);
/// [2, E]: row 0 zeros (the counts have no gradient), row 1 scale x grad x load[0].
Tensor loadBalancingLossGrad(const Tensor &grad, const Tensor &load, double scale);

/// logits [T, E]: mean over t of logsumexp_e(logits[t, e])^2, a scalar; its gradient
/// grad x 2 lse_t softmax[t, e] / T.
Tensor routerZLoss(const Tensor &logits);
Tensor routerZLossGrad(const Tensor &grad, const Tensor &logits);
/// x [T, H] times sigmoid(gate [T, 1]) row by row.
Tensor gateRows(const Tensor &x, const Tensor &gate);
struct GateRowsGrads {
  Tensor input, gate;
};
GateRowsGrads gateRowsGrad(const Tensor &dy, const Tensor &x, const Tensor &gate);

} // namespace megac::eval
