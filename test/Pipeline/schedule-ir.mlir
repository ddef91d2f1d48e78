// The schedule as IR: megac-pipeline-schedule's pipe.schedule, op by op, and its round trip
// through the printer, the parser and the schedule verifier.
// RUN: rm -rf %t && split-file %s %t
// RUN: megac-opt %t/pp2-vpp1-m2-1f1b.mlir --megac-pipeline-schedule | FileCheck %s
// RUN: megac-opt %t/pp2-vpp1-m2-1f1b.mlir --megac-pipeline-schedule | megac-opt | FileCheck %s
// RUN: megac-opt %t/pp2-vpp2-m2-interleaved.mlir --megac-pipeline-schedule | FileCheck %s --check-prefix=INTERLEAVED
// RUN: megac-opt %t/pp1-dp2.mlir --megac-pipeline-schedule | FileCheck %s --check-prefix=ONE-STAGE
// RUN: megac-opt %t/pp1-dp2.mlir --megac-pipeline-schedule | megac-opt | FileCheck %s --check-prefix=ONE-STAGE

// Rank 0 runs one warmup forward; each receive right before the op that needs it, each send
// right after the op that produces what it sends; grad sync and optimizer step close each rank.
// CHECK-LABEL: pipe.schedule @schedule kind "1f1b" stages 2 virtual_stages 1 microbatches 2 {
// CHECK-NEXT:    pipe.rank 0 {
// CHECK-NEXT:      pipe.forward chunk 0 microbatch 0
// CHECK-NEXT:      pipe.send activation chunk 0 microbatch 0 to 1
// CHECK-NEXT:      pipe.forward chunk 0 microbatch 1
// CHECK-NEXT:      pipe.send activation chunk 0 microbatch 1 to 1
// CHECK-NEXT:      pipe.recv grad chunk 0 microbatch 0 from 1
// CHECK-NEXT:      pipe.backward chunk 0 microbatch 0
// CHECK-NEXT:      pipe.recv grad chunk 0 microbatch 1 from 1
// CHECK-NEXT:      pipe.backward chunk 0 microbatch 1
// CHECK-NEXT:      pipe.grad_sync
// CHECK-NEXT:      pipe.optimizer_step
// CHECK-NEXT:    }
// CHECK-NEXT:    pipe.rank 1 {
// CHECK-NEXT:      pipe.recv activation chunk 1 microbatch 0 from 0
// CHECK-NEXT:      pipe.forward chunk 1 microbatch 0
// CHECK-NEXT:      pipe.backward chunk 1 microbatch 0
// CHECK-NEXT:      pipe.send grad chunk 1 microbatch 0 to 0
// CHECK-NEXT:      pipe.recv activation chunk 1 microbatch 1 from 0
// CHECK-NEXT:      pipe.forward chunk 1 microbatch 1
// CHECK-NEXT:      pipe.backward chunk 1 microbatch 1
// CHECK-NEXT:      pipe.send grad chunk 1 microbatch 1 to 0
// CHECK-NEXT:      pipe.grad_sync
// CHECK-NEXT:      pipe.optimizer_step
// CHECK-NEXT:    }
// CHECK-NEXT:  }

// With two chunks per rank the last chunk (3, on rank 1) sends no activation and chunk 0
// sends no gradient; chunk 2 on rank 0 takes its input from chunk 1 on rank 1.
// INTERLEAVED-LABEL: pipe.schedule @schedule kind "interleaved" stages 2 virtual_stages 2 microbatches 2 {
// INTERLEAVED-NEXT:    pipe.rank 0 {
// INTERLEAVED-NEXT:      pipe.forward chunk 0 microbatch 0
// INTERLEAVED-NEXT:      pipe.send activation chunk 0 microbatch 0 to 1
// INTERLEAVED-NEXT:      pipe.forward chunk 0 microbatch 1
// INTERLEAVED-NEXT:      pipe.send activation chunk 0 microbatch 1 to 1
// INTERLEAVED-NEXT:      pipe.recv activation chunk 2 microbatch 0 from 1
// INTERLEAVED-NEXT:      pipe.forward chunk 2 microbatch 0
// INTERLEAVED-NEXT:      pipe.send activation chunk 2 microbatch 0 to 1
// INTERLEAVED:         pipe.rank 1 {
// INTERLEAVED-NEXT:      pipe.recv activation chunk 1 microbatch 0 from 0
// INTERLEAVED-NEXT:      pipe.forward chunk 1 microbatch 0
// INTERLEAVED-NEXT:      pipe.send activation chunk 1 microbatch 0 to 0
// INTERLEAVED-NEXT:      pipe.recv activation chunk 1 microbatch 1 from 0
// INTERLEAVED-NEXT:      pipe.forward chunk 1 microbatch 1
// INTERLEAVED-NEXT:      pipe.send activation chunk 1 microbatch 1 to 0
// INTERLEAVED-NEXT:      pipe.recv activation chunk 3 microbatch 0 from 0
// INTERLEAVED-NEXT:      pipe.forward chunk 3 microbatch 0
// INTERLEAVED-NEXT:      pipe.backward chunk 3 microbatch 0
// INTERLEAVED-NEXT:      pipe.send grad chunk 3 microbatch 0 to 0

// Without pipeline parallelism the iteration is a schedule too: one stage with one chunk, its
// forward then its backward (compiled for one microbatch: the runtime's global batch chooses
// how many run), then the gradient sync and the optimizer step; no messages.
// ONE-STAGE-LABEL: pipe.schedule @schedule kind "1f1b" stages 1 virtual_stages 1 microbatches 1 {
// ONE-STAGE-NEXT:    pipe.rank 0 {
// ONE-STAGE-NEXT:      pipe.forward chunk 0 microbatch 0
// ONE-STAGE-NEXT:      pipe.backward chunk 0 microbatch 0
// ONE-STAGE-NEXT:      pipe.grad_sync
// ONE-STAGE-NEXT:      pipe.optimizer_step
// ONE-STAGE-NEXT:    }
// ONE-STAGE-NEXT:  }

//--- pp2-vpp1-m2-1f1b.mlir
shard.grid @grid(shape = 2x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 2, dp = 1, tp = 1, num_microbatches = 2, num_virtual_stages_per_pipeline_rank = 1, pipeline_schedule = "1f1b">}

//--- pp2-vpp2-m2-interleaved.mlir
shard.grid @grid(shape = 2x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 2, dp = 1, tp = 1, num_microbatches = 2, num_virtual_stages_per_pipeline_rank = 2, pipeline_schedule = "interleaved">}

//--- pp1-dp2.mlir
shard.grid @grid(shape = 1x2x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 2, tp = 1>}
