// Tensor parallelism as rules on the ops: how a value is spread over the tensor-parallel ranks,
// and what an op's sharding rule (ShardingRuleOpInterface, dialects/tx/TxSharding.cpp) can ask
// of the pass that drives them (megac-tensor-parallel).
#pragma once

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Value.h"

namespace megac::tx {

class ShardingAttr;

/// How a value is spread over the tensor-parallel ranks: whole on every rank, split along one
/// dimension, or a partial sum (each rank holds a part; the value is their sum).
struct Sharding {
  enum Kind : uint8_t { Replicated, Split, Partial };
  Kind kind = Replicated;
  int64_t dim = -1; // for Split
  static constexpr Sharding replicated() { return {}; }
  static constexpr Sharding split(int64_t d) { return {Split, d}; }
  static constexpr Sharding partial() { return {Partial, -1}; }
  bool isSplit() const { return kind == Split; }
  bool isSplitAlong(int64_t d) const { return kind == Split && dim == d; }
  bool isPartial() const { return kind == Partial; }
  bool operator==(const Sharding &o) const { return kind == o.kind && dim == o.dim; }
  bool operator!=(const Sharding &o) const { return !(*this == o); }

  /// `#tx.sharding<...>` over the grid's "tp" axis, for a value of rank `rank`.
  ShardingAttr toAttr(mlir::MLIRContext *context, int64_t rank) const;
};

/// The sharding megac-tensor-parallel recorded for `v` (on its op, or on its function argument);
/// null where none was recorded.
ShardingAttr recordedSharding(mlir::Value v);

/// The dimension of [batch, seq, hidden] activations that sequence parallelism splits.
inline constexpr int64_t kSequenceDim = 1;

/// What a sharding rule can ask of the pass that runs it.
class ShardingRewriter {
public:
  virtual ~ShardingRewriter();

  virtual Sharding get(mlir::Value v) const = 0;
  virtual void set(mlir::Value v, Sharding s) = 0;
  /// Makes operand `i` of `op` have sharding `to`: inserts the collective before `op` (once per
  /// value and sharding) and records `rule`, the Megatron rule that needs it, on it.
  virtual void require(mlir::Operation *op, unsigned i, Sharding to, llvm::StringRef rule) = 0;
  /// An all-reduce of `v` over tp at `b`'s insertion point, recorded with `rule`; its result is
  /// whole on every rank.
  virtual mlir::Value allReduce(mlir::OpBuilder &b, mlir::Value v, mlir::shard::ReductionKind kind,
                                llvm::StringRef rule) = 0;
  /// Vocabulary-parallel cross-entropy: the all-reduced softmax statistics (max, sum of
  /// exponentials) of split `logits`, recorded by the forward for the backward.
  virtual void recordSoftmaxStats(mlir::Value logits, mlir::Value max, mlir::Value sumExp) = 0;
  virtual std::optional<std::pair<mlir::Value, mlir::Value>> softmaxStats(mlir::Value logits) const = 0;

  virtual int64_t tensorParallelSize() const = 0;
  virtual bool sequenceParallel() const = 0;

  /// Partial sums of operand `i` become whole before a non-linear op.
  void requireWhole(mlir::Operation *op, unsigned i);
  /// The rule that reduces partial sums `v` (reduce-scattered along the sequence with `scatter`,
  /// else all-reduced before `before`), named after what made them: a row-parallel layer
  /// (Megatron's g), a vocabulary-parallel embedding.
  std::string reduceRule(mlir::Value v, bool scatter, llvm::StringRef before) const;
  /// With sequence parallelism, a [batch, seq, hidden] activation outside the tensor-parallel
  /// regions is split along the sequence.
  bool seqSplittable(mlir::Value v) const;
};

} // namespace megac::tx
