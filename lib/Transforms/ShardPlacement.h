// Sharded data parallelism inside the step (megac-data-parallel). ZeRO-2 (optim_grads): every
// data-parallel rank keeps only its shard of each gradient bucket, so backward reduce-scatters a
// bucket over dp as soon as its last gradient is made, from a staging buffer in the step's
// workspace. ZeRO-3 (optim_grads_params): the parameters too, so a function all-gathers a bucket
// right before it first uses one of its parameters, into its workspace.
#pragma once

#include "megac/Plan/FlatBufferLayout.h"
#include "megac/Plan/PlanIR.h"
#include "tx/TxParamTable.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace megac {

/// The ranks the state is sharded over (`shard`) and, with hybrid sharding, the replicas whose
/// shards are summed (`replicas`; grid null without hybrid sharding); with expert parallelism the
/// experts' buckets shard over the dp ranks holding the same experts (`experts`). Each bucket of
/// the flat layout says its degree and where its shard lies.
struct ShardGroups {
  CollectiveAxes shard, replicas, experts;
  /// The group a bucket's state is sharded over.
  const CollectiveAxes &of(const FlatBufferLayout::Bucket &k) const { return k.experts ? experts : shard; }
  // --overlap-grad-reduce: the reduce-scatters are started where they stand and waited for
  // (tx.wait_collective) where first read, at the end of the function; --overlap-param-gather:
  // each bucket's all-gather starts where the bucket before it is gathered (prefetched), and is
  // waited for where first read.
  bool overlapGrads = false, prefetchParams = false;
};

/// Rewrites the tx.param_grad ops of `fn` (@train_step or a chunk backward): the gradients of each
/// bucket of `layout` go into a zeroed flat bucket (tx.grad_bucket_init, tx.grad_bucket_add at
/// the parameter's place in the bucket), which is reduce-scattered over dp right after its last
/// gradient (shard.reduce_scatter, labelled with `rule`) and added into this rank's gradient shard
/// (tx.add_grad_shard at the bucket's shard offset); with hybrid sharding the shard is first
/// summed across the replicas (shard.all_reduce, as HSDP does every backward). Returns the buckets
/// (indices into layout.buckets) `fn` makes gradients of.
llvm::SmallVector<int64_t> reduceScatterGradsInBackward(mlir::func::FuncOp fn, const tx::ParamTable &table,
                                                        const FlatBufferLayout &layout, const ShardGroups &groups,
                                                        llvm::StringRef rule);

/// Replaces the uses of `fn`'s tx.param ops (run after reduceScatterGradsInBackward: no
/// tx.param_grad is left) with views of gathered buckets: before the first use of a parameter of
/// bucket k, this rank's shard (tx.local_param_shard at the bucket's shard offset) is
/// all-gathered over the shard group (labelled with `rule`) and each parameter read as a
/// tx.bucket_param view. A chunk's forward and backward gather apart, so the forward's buffers
/// are free once it is done (reshard after forward).
void gatherParamsBeforeUse(mlir::func::FuncOp fn, const tx::ParamTable &table, const FlatBufferLayout &layout,
                           const ShardGroups &groups, llvm::StringRef rule);

/// --overlap-param-gather with ZeRO-1/2: a tx.wait_param_gather before the first op of `fn` that
/// reads a parameter of each bucket of `layout` (the step's all-gathers run on into forward).
void waitForParamGathers(mlir::func::FuncOp fn, const tx::ParamTable &table, const FlatBufferLayout &layout);

} // namespace megac
