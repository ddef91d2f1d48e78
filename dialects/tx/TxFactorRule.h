// An op's sharding rule as data, in factors (Shardy's OpShardingRule): the op's iteration space
// is a list of factors, each dimension of each operand and result is a product of factors (one
// usually, several where a reshape merges dimensions, none for a size-1 dimension), and
// sharding a factor over a grid axis shards every dimension it appears in. A factor missing
// from a result is summed over for that result: sharding it leaves partial sums there (a
// GEMM's k, an embedding's vocabulary). A factor the op cannot split without another algorithm
// (a norm's row, softmax's keys) needs replication.
//
// Propagation reads these rules for every op (ShardingRuleOpInterface::getFactorRule); the
// `megac-test-factor-rules` pass prints them, one op per line:
//   ([i, j, k], [k, l]) -> ([i, j, l]) {i=2, j=16, k=64, l=256} reduction={k}
#pragma once

#include "mlir/IR/Operation.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>

namespace megac::tx {

struct FactorRule {
  /// A dimension: the factors whose product it is, major first (empty: a size-1 dimension).
  using Dim = llvm::SmallVector<int64_t, 2>;
  using Tensor = llvm::SmallVector<Dim, 4>;

  llvm::SmallVector<int64_t> factorSizes;
  llvm::SmallVector<bool> needsReplication; // per factor
  llvm::SmallVector<Tensor> operands, results;

  /// A new factor of `size`.
  int64_t addFactor(int64_t size, bool needReplication = false);
  /// Factors in no result that can be split: sharding one leaves every result a partial sum
  /// over its axes.
  llvm::SmallVector<int64_t> reductionFactors() const;
  /// Whether result `r` has factor `f` in some dimension.
  bool resultHas(unsigned r, int64_t f) const;
  /// Which factor of a dimension (`dim`: its factors, major first) each of the axes splitting it
  /// (`axisSizes`, major first) splits: the first axis the major factor it divides, each next axis
  /// the next factor it divides (a [dp, tp] split of a merged [batch x sequence] dimension: dp the
  /// batch, tp the sequence), or the same factor where no later one takes it. Empty where the
  /// axes do not fit the factors' sizes.
  llvm::SmallVector<int64_t, 2> factorsOfAxes(const Dim &dim, llvm::ArrayRef<int64_t> axisSizes) const;
  void print(llvm::raw_ostream &os) const;
};

/// One factor per dimension of a tensor of `shape` (none for size 1), in `rule`.
FactorRule::Tensor freshFactors(FactorRule &rule, llvm::ArrayRef<int64_t> shape);

/// Every operand and result with the first operand's factors (elementwise ops of one shape),
/// right-aligned: an operand of lower rank takes the trailing factors (a broadcast bias).
FactorRule elementwiseRule(mlir::Operation *op);

/// A reshape's factors: the dimensions of both shapes split into their common refinement (a
/// [b, s, h] -> [b, s, heads, d] reshape makes h the product of heads and d). Where the two
/// shapes share no refinement (sizes that do not divide), the dimensions involved form one
/// factor that needs replication.
FactorRule reshapeRule(llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> out);

} // namespace megac::tx
