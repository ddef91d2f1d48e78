#include "tx/TxGemm.h"

namespace megac::tx {

GemmShape gemmShape(llvm::ArrayRef<int64_t> lhs, llvm::ArrayRef<int64_t> rhs, bool transposeLhs,
                    bool transposeRhs) {
  GemmShape g;
  const int64_t lr = static_cast<int64_t>(lhs.size()), rr = static_cast<int64_t>(rhs.size());
  g.lhsRowDim = transposeLhs ? lr - 1 : lr - 2;
  g.lhsContractDim = transposeLhs ? lr - 2 : lr - 1;
  g.rhsContractDim = transposeRhs ? rr - 1 : rr - 2;
  g.rhsColDim = transposeRhs ? rr - 2 : rr - 1;
  g.m = lhs[g.lhsRowDim];
  g.k = lhs[g.lhsContractDim];
  g.n = rhs[g.rhsColDim];
  g.rhsContractSize = rhs[g.rhsContractDim];
  g.sharedRhs = rr == 2 && lr > 2;
  int64_t leading = 1;
  for (int64_t d = 0; d + 2 < lr; ++d)
    leading *= lhs[d];
  if (g.sharedRhs)
    g.m *= leading; // the batch folds into the rows
  else
    g.batch = leading;
  return g;
}

GemmShape linearGemmShape(llvm::ArrayRef<int64_t> input, llvm::ArrayRef<int64_t> weight, bool transposeWeight) {
  GemmShape g;
  const int64_t ir = static_cast<int64_t>(input.size());
  g.lhsContractDim = ir - 1;
  g.lhsRowDim = ir - 2; // -1 for a vector input: it has one row
  g.rhsContractDim = transposeWeight ? 1 : 0;
  g.rhsColDim = transposeWeight ? 0 : 1;
  g.k = input[g.lhsContractDim];
  g.n = weight[g.rhsColDim];
  g.rhsContractSize = weight[g.rhsContractDim];
  g.sharedRhs = ir > 2;
  g.m = 1;
  for (int64_t d = 0; d + 1 < ir; ++d)
    g.m *= input[d];
  return g;
}

} // namespace megac::tx
