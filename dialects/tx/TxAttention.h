// An attention's score matrix, computed once from its operands' shapes and mask: what the cost
// model reads (AttentionOpInterface). A variant of attention (a window, another mask) says here
// how much of the matrix it computes.
#pragma once

#include "llvm/ADT/ArrayRef.h"

#include <cstdint>
#include <optional>

namespace megac::tx {

/// `batch x heads` score matrices of [queries, keys], each entry a dot product of `headDim`.
struct AttentionShape {
  int64_t batch = 0, heads = 0, queries = 0, keys = 0, headDim = 0;
  /// The share of the score matrix a flash-style kernel computes (a causal mask skips half).
  double computedShare = 1.0;
  /// GEMMs over the matrix: QK^T and PV forward; the backward recomputes the scores and makes
  /// dV, dP, dQ and dK (FlashAttention-2's count).
  int64_t gemms = 2;
  bool backward = false;
};

/// Of a causal mask's n(n+1)/2 scores, the share a window of `window` keys before each query
/// keeps: n + sum over queries i of min(i, window).
inline double windowShareOfCausal(int64_t n, int64_t window) {
  if (n <= 1 || window >= n - 1)
    return 1.0;
  const double w = double(window), before = w * (w + 1) / 2 + double(n - 1 - window) * w;
  return (double(n) + before) / (double(n) * double(n + 1) / 2);
}

/// Attention of [batch, seq, heads, head_dim] queries over keys of the same layout, every key or
/// (causal) the ones up to the query's position, or (a window) at most `window` before it.
inline AttentionShape denseAttentionShape(llvm::ArrayRef<int64_t> query, llvm::ArrayRef<int64_t> key, bool causal,
                                          std::optional<uint64_t> window, bool backward) {
  AttentionShape a;
  a.batch = query[0];
  a.heads = query[2];
  a.queries = query[1];
  a.keys = key[1];
  a.headDim = query[3];
  a.computedShare = causal ? 0.5 : 1.0;
  if (causal && window)
    a.computedShare *= windowShareOfCausal(a.queries, int64_t(*window));
  a.gemms = backward ? 5 : 2;
  a.backward = backward;
  return a;
}

} // namespace megac::tx
