// The `pipe` dialect: pipeline schedules as IR, one ordered list of actions per rank.
#ifndef MEGAC_PIPE_BASE_TD
#define MEGAC_PIPE_BASE_TD

include "mlir/IR/CommonAttrConstraints.td"
include "mlir/IR/OpBase.td"
include "mlir/IR/EnumAttr.td"

def Pipe_Dialect : Dialect {
  let name = "pipe";
  let cppNamespace = "::megac::pipe";
  let summary = "Pipeline-parallel schedules: per-rank forward / backward / send / recv lists";
  let description = [{
    A `pipe.schedule` says, for every pipeline rank, the order in which it runs the forward and
    backward of each (chunk, microbatch), the point-to-point messages it sends and receives,
    and the gradient sync and optimizer step that end the iteration. With P ranks and V chunks
    (virtual stages) per rank, chunk c runs on rank c % P.

    The schedule op's verifier checks the whole schedule before anything runs: every
    (chunk, microbatch) is forwarded and backwarded once on its rank, sends and receives between
    two ranks match in order, each op comes after what it needs, the ranks cannot deadlock
    (sends buffered, receives blocking), and the stashed activations stay within what the
    schedule kind promises.
  }];
}

class Pipe_Op<string mnemonic, list<Trait> traits = []> : Op<Pipe_Dialect, mnemonic, traits>;

def Pipe_Payload : I32EnumAttr<"Payload", "what a pipeline message carries", [
    I32EnumAttrCase<"Activation", 0, "activation">,
    I32EnumAttrCase<"Grad", 1, "grad">,
  ]> {
  let cppNamespace = "::megac::pipe";
}

// Where a tied weight's copies sum their gradients: the whole gradients, or this rank's shards of
// them once the data-parallel reduce-scatters have left only those (ZeRO-2/3, and the distributed
// optimizer with --overlap-grad-reduce).
def Pipe_TiedGrads : I32EnumAttr<"TiedGrads", "which gradients of a tied weight are summed", [
    I32EnumAttrCase<"Whole", 0, "grads">,
    I32EnumAttrCase<"Shards", 1, "grad_shards">,
  ]> {
  let cppNamespace = "::megac::pipe";
}

#endif // MEGAC_PIPE_BASE_TD
