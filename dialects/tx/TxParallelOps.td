// Operations of the vocabulary-parallel cross-entropy (Megatron): each tensor-parallel rank
// holds a slice of the logits' vocabulary; the softmax is assembled from three all-reduced
// statistics (max, sum of exponentials, target logit) so the logits are never gathered.
#ifndef MEGAC_TX_PARALLEL_OPS_TD
#define MEGAC_TX_PARALLEL_OPS_TD

include "tx/TxBase.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Tx_LogitsMaxOp : Tx_Op<"logits_max", [Tx_KernelCall, Pure]> {
  let summary = "max over the (local) vocabulary: [..., V] -> [...]";
  let description = [{
    With `vocab_size`, columns past the real vocabulary (padding) are left out; with the logits
    split over tp, that counts the columns of the whole vocabulary.
  }];
  let arguments = (ins Tx_FloatTensor:$logits, OptionalAttr<I64Attr>:$vocab_size);
  let results = (outs Tx_FloatTensor:$result);
  let assemblyFormat = "$logits (`vocab_size` $vocab_size^)? attr-dict `:` type($logits) `->` type($result)";
  let hasVerifier = 1;
}

def Tx_LogitsSumExpOp : Tx_Op<"logits_sum_exp", [Tx_KernelCall, Pure]> {
  let summary = "sum over the (local) vocabulary of exp(logits - max)";
  let arguments = (ins Tx_FloatTensor:$logits, Tx_FloatTensor:$max, OptionalAttr<I64Attr>:$vocab_size);
  let results = (outs Tx_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $max (`vocab_size` $vocab_size^)? attr-dict `:` type($logits) `,` type($max) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Tx_TargetLogitOp : Tx_Op<"target_logit", [Tx_KernelCall, Pure]> {
  let summary = "the logit of each label; with vocab_parallel, 0 where the label is on another rank";
  let arguments = (ins Tx_FloatTensor:$logits, Tx_IdTensor:$labels, UnitAttr:$vocab_parallel);
  let results = (outs Tx_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $labels (`vocab_parallel` $vocab_parallel^)? attr-dict `:` type($logits) `,` type($labels) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Tx_CrossEntropyFromStatsOp : Tx_Op<"cross_entropy_from_stats", [Tx_KernelCall, Pure, AllTypesMatch<["max", "sum_exp", "target"]>]> {
  let summary = "mean over tokens of max + log(sum_exp) - target";
  let description = [{
    With `ignore_index` and the labels, tokens labelled ignore_index take no part (the mean over
    the others, 0 when there are none), as tx.cross_entropy's.
  }];
  let arguments = (ins Tx_FloatTensor:$max, Tx_FloatTensor:$sum_exp, Tx_FloatTensor:$target,
                       Optional<Tx_IdTensor>:$labels, OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs Tx_FloatScalar:$result);
  let assemblyFormat = [{
    $max `,` $sum_exp `,` $target (`ignore_index` $ignore_index^ `of` $labels `:` type($labels))? attr-dict
    `:` type($max) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Tx_CrossEntropyGradFromStatsOp : Tx_Op<"cross_entropy_grad_from_stats", [Tx_KernelCall, Pure, AllTypesMatch<["max", "sum_exp"]>, AllTypesMatch<["logits", "result"]>]> {
  let summary = "gradient of the (local) logits from the all-reduced max and sum of exponentials";
  let description = [{
    `grad * (exp(logits - max) / sum_exp - onehot(label)) / tokens`; with `vocab_parallel`
    the one-hot only marks labels in this rank's share of the vocabulary. With `ignore_index`,
    rows labelled so are 0 and `tokens` counts the others.
  }];
  let arguments = (ins Tx_FloatScalar:$grad, Tx_FloatTensor:$logits, Tx_IdTensor:$labels,
                       Tx_FloatTensor:$max, Tx_FloatTensor:$sum_exp, UnitAttr:$vocab_parallel,
                       OptionalAttr<I64Attr>:$vocab_size, OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs Tx_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $logits `,` $labels `,` $max `,` $sum_exp (`vocab_parallel` $vocab_parallel^)?
    (`vocab_size` $vocab_size^)? (`ignore_index` $ignore_index^)? attr-dict
    `:` type($grad) `,` type($logits) `,` type($labels) `,` type($max)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Data-parallel gradient buckets
//===----------------------------------------------------------------------===//

def Tx_GradBucketOp : Tx_Op<"grad_bucket", [MemoryEffects<[MemRead]>]> {
  let summary = "the flat gradients of parameters first..last of the program's parameter table";
  let description = [{
    One data-parallel bucket: the gradients of consecutive parameters, read as one flat tensor
    so that a single collective syncs them. Indices are positions in the parameter table: the
    `tx.param` ops of `@train_step` in order of appearance, each distinct block once.
  }];
  let arguments = (ins I64Attr:$first, I64Attr:$last);
  let results = (outs 1DTensorOf<[AnyFloat]>:$result);
  let assemblyFormat = "`params` `[` $first `,` $last `]` attr-dict `:` type($result)";
}

def Tx_SetGradBucketOp : Tx_Op<"set_grad_bucket", [MemoryEffects<[MemWrite]>]> {
  let summary = "writes a flat bucket back into the gradients of parameters first..last";
  let arguments = (ins 1DTensorOf<[AnyFloat]>:$value, I64Attr:$first, I64Attr:$last);
  let assemblyFormat = "$value `params` `[` $first `,` $last `]` attr-dict `:` type($value)";
}

// MemWrite too: the all-reduce it starts sums the gradients in place (and an op with no results
// that only reads would be erased as dead).
def Tx_StartGradSyncOp : Tx_Op<"start_grad_sync", [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "the gradients of parameters first..last are final for this microbatch: start their dp sum";
  let description = [{
    Placed by megac-data-parallel with `overlap-grad-reduce` right after the last `tx.param_grad`
    of a bucket in `@train_step` (or a chunk's backward), so that on the iteration's last microbatch the bucket's
    data-parallel all-reduce runs while backward goes on (Megatron's --overlap-grad-reduce). On
    the other microbatches it does nothing; the runtime waits for every bucket before the
    optimizer. Indices as in `tx.grad_bucket`. With `reduce_scatter` (the distributed optimizer's
    flat buckets) the bucket is reduce-scattered in place over the shard group instead: this
    rank's `shard_numel`-element shard of the sum lands at the bucket's start.
  }];
  let arguments = (ins I64Attr:$first, I64Attr:$last, OptionalAttr<I64Attr>:$shard_numel);
  let assemblyFormat = "`params` `[` $first `,` $last `]` (`reduce_scatter` $shard_numel^)? attr-dict";
}

// The distributed optimizer (ZeRO-1): parameters and gradients in flat padded buffers
// (FlatBufferLayout), each bucket of which splits into equal shards over the dp ranks.
def Tx_SetGradShardOp : Tx_Op<"set_grad_shard", [MemoryEffects<[MemWrite]>]> {
  let summary = "writes this rank's shard of a reduced gradient bucket to the bucket's first elements";
  let description = [{
    After the bucket of parameters first..last is reduce-scattered over the dp ranks, this rank's
    shard of the sum is stored at the start of the bucket (where in-place reduce-scatters put it);
    the optimizer step reads it there. Indices as in `tx.grad_bucket`.
  }];
  let arguments = (ins 1DTensorOf<[AnyFloat]>:$value, I64Attr:$first, I64Attr:$last);
  let assemblyFormat = "$value `params` `[` $first `,` $last `]` attr-dict `:` type($value)";
}

def Tx_ParamShardOp : Tx_Op<"param_shard", [MemoryEffects<[MemRead]>]> {
  let summary = "this rank's shard of the flat parameter bucket first..last (as the optimizer step left it)";
  let arguments = (ins I64Attr:$first, I64Attr:$last);
  let results = (outs 1DTensorOf<[AnyFloat]>:$result);
  let assemblyFormat = "`params` `[` $first `,` $last `]` attr-dict `:` type($result)";
}

def Tx_SetParamBucketOp : Tx_Op<"set_param_bucket", [MemoryEffects<[MemWrite]>]> {
  let summary = "writes a whole flat parameter bucket (every rank's shard, gathered) back into parameters first..last";
  let arguments = (ins 1DTensorOf<[AnyFloat]>:$value, I64Attr:$first, I64Attr:$last);
  let assemblyFormat = "$value `params` `[` $first `,` $last `]` attr-dict `:` type($value)";
}

// ZeRO-2 (optim_grads): each rank keeps only its shard of every gradient bucket. Backward adds a
// bucket's gradients into a flat staging buffer of the step's workspace, reduce-scatters it over
// dp as soon as its last gradient is made, and adds this rank's shard into the sharded gradients.
def Tx_GradBucketInitOp : Tx_Op<"grad_bucket_init", [MemoryEffects<[MemAlloc]>]> {
  let summary = "a zeroed flat staging buffer for the gradients of parameters first..last (one microbatch)";
  let description = [{
    Laid out as the parameters' flat bucket (FlatBufferLayout, padding zero); `tx.grad_bucket_add`
    fills it. Indices as in `tx.grad_bucket`. An allocation: two buckets of one type stay apart.
  }];
  let arguments = (ins I64Attr:$first, I64Attr:$last);
  let results = (outs 1DTensorOf<[AnyFloat]>:$result);
  let assemblyFormat = "`params` `[` $first `,` $last `]` attr-dict `:` type($result)";
}

def Tx_GradBucketAddOp : Tx_Op<"grad_bucket_add", [Pure, AllTypesMatch<["bucket", "result"]>]> {
  let summary = "the bucket with a parameter's gradient added at its element offset (in place)";
  let description = [{
    `result` is `bucket` with `grad` (flattened) added to elements offset .. offset + numel(grad);
    it reuses the bucket's storage, so `bucket` has no other use after it.
  }];
  let arguments = (ins 1DTensorOf<[AnyFloat]>:$bucket, Tx_FloatTensor:$grad, I64Attr:$offset);
  let results = (outs 1DTensorOf<[AnyFloat]>:$result);
  let assemblyFormat = "$bucket `,` $grad `at` $offset attr-dict `:` type($bucket) `,` type($grad)";
  let hasVerifier = 1;
}

def Tx_AddGradShardOp : Tx_Op<"add_grad_shard", [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "adds this rank's reduced shard of a gradient bucket into the sharded gradients";
  let description = [{
    ZeRO-2: the rank's gradient buffer holds one shard of every bucket (flat layout size / shard
    degree elements); this bucket's shard starts at element `offset` of it. Indices as in
    `tx.grad_bucket`.
  }];
  let arguments = (ins 1DTensorOf<[AnyFloat]>:$value, I64Attr:$first, I64Attr:$last, I64Attr:$offset);
  let assemblyFormat = "$value `params` `[` $first `,` $last `]` `at` $offset attr-dict `:` type($value)";
}

// ZeRO-3 (optim_grads_params): each rank keeps only its shard of every parameter bucket too; a
// function all-gathers a bucket over dp right before it first uses one of its parameters, and the
// parameters are views into the gathered bucket (freed after their last use).
def Tx_LocalParamShardOp : Tx_Op<"local_param_shard", [MemoryEffects<[MemRead]>]> {
  let summary = "this rank's shard of the flat parameter bucket first..last, where ZeRO-3 keeps it";
  let description = [{
    The rank's parameter shards (flat layout size / shard degree elements, updated in place by the
    optimizer step); this bucket's shard starts at element `offset` of them. Indices as in
    `tx.grad_bucket`.
  }];
  let arguments = (ins I64Attr:$first, I64Attr:$last, I64Attr:$offset);
  let results = (outs 1DTensorOf<[AnyFloat]>:$result);
  let assemblyFormat = "`params` `[` $first `,` $last `]` `at` $offset attr-dict `:` type($result)";
}

// --overlap-param-gather with ZeRO-1/2: the step's parameter all-gathers run on into the next
// forward, which waits for each flat bucket before it first reads its parameters.
def Tx_WaitCollectiveOp : Tx_Op<"wait_collective", [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "waits here for an overlapped collective, started where it stands";
  let description = [{
    A shard.all_gather, shard.reduce_scatter or shard.all_reduce with a wait is started where it
    stands and runs while the ops between go on (--overlap-grad-reduce's reduce-scatters,
    --overlap-param-gather's prefetched all-gathers); megac-data-parallel places the wait before
    the first op that reads its result (a view reads nothing), or before the return. The
    collective's input stays alive until here; its result is complete after it.
  }];
  let arguments = (ins Tx_FloatTensor:$pending);
  let assemblyFormat = "$pending attr-dict `:` type($pending)";
  let hasVerifier = 1;
}

def Tx_WaitParamGatherOp : Tx_Op<"wait_param_gather", [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "waits until the previous step's all-gather of flat bucket `bucket` (params first..last) is done";
  let description = [{
    A no-op when nothing is in flight (every microbatch but an iteration's first). Indices as in
    `tx.grad_bucket`; `bucket` is the bucket's place in the flat layout.
  }];
  let arguments = (ins I64Attr:$first, I64Attr:$last, I64Attr:$bucket);
  let assemblyFormat = "`params` `[` $first `,` $last `]` `bucket` $bucket attr-dict";
}

def Tx_BucketParamOp : Tx_Op<"bucket_param", [Pure]> {
  let summary = "a parameter as a view of its gathered flat bucket (elements offset .. offset + numel)";
  let arguments = (ins 1DTensorOf<[AnyFloat]>:$bucket, I64Attr:$offset);
  let results = (outs Tx_FloatTensor:$result);
  let assemblyFormat = "$bucket `at` $offset attr-dict `:` type($bucket) `->` type($result)";
  let hasVerifier = 1;
}

#endif // MEGAC_TX_PARALLEL_OPS_TD
