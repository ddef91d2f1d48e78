// ZeRO-2 (--data-parallel-sharding-strategy optim_grads): every data-parallel rank keeps only its
// shard of each gradient bucket, so backward reduce-scatters a bucket over dp as soon as its last
// gradient is made, from a staging buffer in the step's workspace (megac-data-parallel).
#pragma once

#include "megac/Plan/FlatBufferLayout.h"
#include "tx/TxParamTable.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace megac {

/// Rewrites the tx.param_grad ops of `fn` (@train_step or a chunk backward): the gradients of each
/// bucket of `layout` go into a zeroed flat bucket (tx.grad_bucket_init, tx.grad_bucket_add at
/// the parameter's place in the bucket), which is reduce-scattered over dp right after its last
/// gradient (shard.reduce_scatter, labelled with `rule`) and added into this rank's gradient shard
/// (tx.add_grad_shard at bucket offset / `shardDegree`). Returns the buckets (indices into
/// layout.buckets) `fn` makes gradients of.
llvm::SmallVector<int64_t> reduceScatterGradsInBackward(mlir::func::FuncOp fn, const tx::ParamTable &table,
                                                        const FlatBufferLayout &layout, int64_t shardDegree,
                                                        llvm::StringRef rule);

} // namespace megac
