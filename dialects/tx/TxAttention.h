// An attention's score matrix, computed once from its operands' shapes and mask: what the cost
// model reads (AttentionOpInterface). A variant of attention (a window, another mask) says here
// how much of the matrix it computes.
#pragma once

#include "llvm/ADT/ArrayRef.h"

#include <cstdint>

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

/// Attention of [batch, seq, heads, head_dim] queries over keys of the same layout, every key or
/// (causal) the ones up to the query's position.
inline AttentionShape denseAttentionShape(llvm::ArrayRef<int64_t> query, llvm::ArrayRef<int64_t> key, bool causal,
                                          bool backward) {
  AttentionShape a;
  a.batch = query[0];
  a.heads = query[2];
  a.queries = query[1];
  a.keys = key[1];
  a.headDim = query[3];
  a.computedShare = causal ? 0.5 : 1.0;
  a.gemms = backward ? 5 : 2;
  a.backward = backward;
  return a;
}

} // namespace megac::tx
