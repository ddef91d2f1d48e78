// Passes that build and show pipeline schedules (the `pipe` dialect).
#ifndef MEGAC_PIPELINE_PASSES_TD
#define MEGAC_PIPELINE_PASSES_TD

include "mlir/Pass/PassBase.td"

def PipelineSchedule : Pass<"megac-pipeline-schedule", "mlir::ModuleOp"> {
  let summary = "Adds pipe.schedule @schedule: the verified per-rank GPipe / 1F1B / interleaved schedule";
  let description = [{
    Every plan's iteration is a schedule. Builds the schedule of the plan's (`@grid`) `pp`
    pipeline ranks with `num_virtual_stages_per_pipeline_rank` chunks each over
    `num_microbatches` microbatches and appends it to the module as `pipe.schedule @schedule`:
    per rank, forwards, backwards and the sends / receives between them, ended by
    `pipe.grad_sync` and `pipe.optimizer_step`. `pipeline_schedule` is `gpipe`, `1f1b` or
    `interleaved` (Megatron's interleaved 1F1B). The op's verifier proves the schedule cannot
    deadlock. Plans no schedule exists for (say interleaved with a number of microbatches that is
    not a multiple of `pp`) fail with a message saying what to change. Without pipeline
    parallelism (pp = 1) the schedule is one stage with one chunk, `1f1b` over one microbatch:
    the runtime's --global-batch-size chooses the microbatches, and each runs the rank's list.
  }];
  let dependentDialects = ["::megac::pipe::PipeDialect"];
}

def PrintPipelineSchedule : Pass<"megac-print-pipeline-schedule", "mlir::ModuleOp"> {
  let summary = "Prints each pipe.schedule: per-rank order, simulated bubble and activation stash";
  let description = [{
    For every `pipe.schedule` in the module, prints one line per rank
    (`rank 0: F0.0 F0.1 B0.0 ...`), the bubble fraction of a timing simulation (forward `tf`,
    backward `tb`, message latency `tcomm`) and each rank's peak of stashed activations against
    the bound of the schedule's kind. With `comms`, the lines include the messages (`sA0.1>1`:
    send activation of chunk 0 microbatch 1 to rank 1; `rG0.1<1`: receive gradient from rank 1).
    With `trace`, prints the Chrome trace / Perfetto JSON of the simulation instead.
    The module is left unchanged.
  }];
  let options = [
    Option<"comms", "comms", "bool", "false", "list the sends and receives too">,
    Option<"trace", "trace", "bool", "false", "print the Chrome trace JSON of the simulation">,
    Option<"tf", "tf", "double", "1.0", "time of one chunk's forward">,
    Option<"tb", "tb", "double", "2.0", "time of one chunk's backward">,
    Option<"tcomm", "tcomm", "double", "0.0", "latency of one message">,
  ];
}

#endif // MEGAC_PIPELINE_PASSES_TD
