// A matrix product's GEMM, computed once from its operands' shapes and transpose flags: what
// the verifier, the sharding rules, the VJP, the emitter and the cost model all read.
#pragma once

#include "llvm/ADT/ArrayRef.h"

#include <cstdint>

namespace megac::tx {

/// `batch` independent products of [m x k] by [k x n]. A matrix rhs shared by every batch entry
/// of a higher-rank lhs folds the lhs's leading dimensions into m (batch 1), as the kernels run
/// it. The *Dim fields are positions in the operands' shapes, for rules that split them.
struct GemmShape {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  bool sharedRhs = false; // a matrix rhs with a higher-rank lhs
  int64_t lhsRowDim = 0, lhsContractDim = 0, rhsContractDim = 0, rhsColDim = 0;
  int64_t rhsContractSize = 0; // k as the rhs gives it (the verifier compares the two)
};

/// The GEMM of lhs x rhs with the transpose flags (lhs rank >= 2; rhs a matrix or lhs's rank).
GemmShape gemmShape(llvm::ArrayRef<int64_t> lhs, llvm::ArrayRef<int64_t> rhs, bool transposeLhs,
                    bool transposeRhs);

/// A linear layer's GEMM: input [..., K] (rank >= 1) times a matrix weight [K, N] ([N, K]
/// transposed), the input's leading dimensions folded into m.
GemmShape linearGemmShape(llvm::ArrayRef<int64_t> input, llvm::ArrayRef<int64_t> weight, bool transposeWeight);

} // namespace megac::tx
