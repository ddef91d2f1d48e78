// Operations of the `pipe` dialect.
#ifndef MEGAC_PIPE_OPS_TD
#define MEGAC_PIPE_OPS_TD

include "pipe/PipeBase.td"
include "mlir/IR/SymbolInterfaces.td"

def Pipe_ScheduleOp : Pipe_Op<"schedule", [Symbol, IsolatedFromAbove, NoTerminator, SingleBlock]> {
  let summary = "a verified pipeline schedule: one `pipe.rank` list per pipeline rank";
  let description = [{
    `kind` is the schedule it was built as (`gpipe`, `1f1b` or `interleaved`), which fixes the
    bound on stashed activations the verifier enforces; `stages` is P, `virtual_stages` V (chunks
    per rank) and `microbatches` m. The body holds `pipe.rank 0` ... `pipe.rank P-1`. Every
    plan has one: without pipeline parallelism P = V = m = 1 (forward, then backward, of chunk 0),
    and an iteration of more microbatches than m runs each rank's forwards, backwards and messages
    once per m of them (microbatches k m ... k m + m - 1), then its closing actions (`pipe.grad_sync`,
    `pipe.tied_sum`, `pipe.optimizer_step`, `pipe.param_gather`; see pipe.rank) once.

    ```mlir
    pipe.schedule @schedule kind "1f1b" stages 2 virtual_stages 1 microbatches 1 {
      pipe.rank 0 {
        pipe.forward chunk 0 microbatch 0
        pipe.send activation chunk 0 microbatch 0 to 1
        pipe.recv grad chunk 0 microbatch 0 from 1
        pipe.backward chunk 0 microbatch 0
        pipe.grad_sync
        pipe.optimizer_step
      }
      pipe.rank 1 {
        pipe.recv activation chunk 1 microbatch 0 from 0
        pipe.forward chunk 1 microbatch 0
        pipe.backward chunk 1 microbatch 0
        pipe.send grad chunk 1 microbatch 0 to 0
        pipe.grad_sync
        pipe.optimizer_step
      }
    }
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, StrAttr:$kind, I64Attr:$stages,
                       I64Attr:$virtual_stages, I64Attr:$microbatches);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $sym_name `kind` $kind `stages` $stages `virtual_stages` $virtual_stages
    `microbatches` $microbatches attr-dict-with-keyword $body
  }];
  let hasRegionVerifier = 1;
}

def Pipe_RankOp : Pipe_Op<"rank", [HasParent<"ScheduleOp">, NoTerminator, SingleBlock]> {
  let summary = "what one pipeline rank runs, in order";
  let description = [{
    The compute and message ops of one rank in the order it runs them (once per round of the
    schedule's microbatches), then the actions that close its iteration, once:
    `pipe.tied_sum grads`?, `pipe.grad_sync`, `pipe.tied_sum`?, `pipe.optimizer_step`,
    `pipe.param_gather`? (at most one tied_sum; on grad_shards only after the grad_sync that
    finishes the shards).
  }];
  let arguments = (ins I64Attr:$rank);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$rank attr-dict-with-keyword $body";
  let hasVerifier = 1;
}

class Pipe_ComputeOp<string mnemonic, string what> : Pipe_Op<mnemonic, [HasParent<"RankOp">]> {
  let summary = what # " of one chunk on one microbatch";
  let arguments = (ins I64Attr:$chunk, I64Attr:$microbatch);
  let assemblyFormat = "`chunk` $chunk `microbatch` $microbatch attr-dict";
}

def Pipe_ForwardOp : Pipe_ComputeOp<"forward", "the forward">;
def Pipe_BackwardOp : Pipe_ComputeOp<"backward", "the backward">;

def Pipe_SendOp : Pipe_Op<"send", [HasParent<"RankOp">]> {
  let summary = "sends a chunk's output activation or input gradient to another rank";
  let description = [{
    `activation chunk c` sends chunk c's output to rank `to` (which runs chunk c + 1);
    `grad chunk c` sends chunk c's input gradient to rank `to` (which runs chunk c - 1). `chunk`
    is always the chunk on this rank. Sends are buffered: the rank goes on without waiting.
  }];
  let arguments = (ins Pipe_Payload:$payload, I64Attr:$chunk, I64Attr:$microbatch, I64Attr:$peer);
  let assemblyFormat = "$payload `chunk` $chunk `microbatch` $microbatch `to` $peer attr-dict";
}

def Pipe_RecvOp : Pipe_Op<"recv", [HasParent<"RankOp">]> {
  let summary = "receives a chunk's input activation or output gradient from another rank";
  let description = [{
    `activation chunk c` receives chunk c's input from rank `from` (which runs chunk c - 1);
    `grad chunk c` receives chunk c's output gradient from rank `from` (which runs chunk c + 1).
    A receive blocks until the message is there. Between two ranks, the k-th receive of a payload
    takes the k-th send of it.
  }];
  let arguments = (ins Pipe_Payload:$payload, I64Attr:$chunk, I64Attr:$microbatch, I64Attr:$peer);
  let assemblyFormat = "$payload `chunk` $chunk `microbatch` $microbatch `from` $peer attr-dict";
}

def Pipe_GradSyncOp : Pipe_Op<"grad_sync", [HasParent<"RankOp">]> {
  let summary = "synchronises this rank's gradients once all its backwards are done";
  let description = [{
    The data-parallel gradient sum of the rank's parameters in the compiled buckets: all-reduced,
    or reduce-scattered over the shard group with the distributed optimizer. Starts the buckets
    (unless the backward started them: --overlap-grad-reduce, ZeRO-2/3) and waits for them. A
    no-op without data parallelism.
  }];
  let assemblyFormat = "attr-dict";
}

def Pipe_TiedSumOp : Pipe_Op<"tied_sum", [HasParent<"RankOp">]> {
  let summary = "sums the gradients of the weights this rank shares with other pipeline ranks";
  let description = [{
    GPT-2's word embedding is the LM head too: the first and the last stage each hold a copy and
    add their gradients. `grads` sums the whole gradients (before the data-parallel sync with the
    plain distributed optimizer, whose reduce-scatter leaves each rank a shard that the stages'
    layouts place differently; after it otherwise, as Megatron does); `grad_shards` sums this
    rank's reduced shard of each tied weight's own bucket, after the sync that finishes it.
    Only ranks that hold a tied weight have one, and all of them the same.
  }];
  let arguments = (ins Pipe_TiedGrads:$grads);
  let assemblyFormat = "$grads attr-dict";
}

def Pipe_OptimizerStepOp : Pipe_Op<"optimizer_step", [HasParent<"RankOp">]> {
  let summary = "updates this rank's parameters (skipped when the gradients are not finite)";
  let assemblyFormat = "attr-dict";
}

def Pipe_ParamGatherOp : Pipe_Op<"param_gather", [HasParent<"RankOp">]> {
  let summary = "gives every rank of the shard group the updated parameters; ends the iteration";
  let description = [{
    The distributed optimizer (ZeRO-1/2, and ZeRO-3 while pipeline stages keep the parameters
    gathered) steps each rank's shard only; this all-gathers the compiled buckets of updated
    parameters, or with --overlap-param-gather starts the all-gathers, which the next forward
    waits for. Nothing after a skipped step. Not with ZeRO-3's sharded parameters, which each
    function gathers before use.
  }];
  let assemblyFormat = "attr-dict";
}

#endif // MEGAC_PIPE_OPS_TD
