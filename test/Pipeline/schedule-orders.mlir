// The orders megac-pipeline-schedule builds, rank by rank, against orders derived by hand from
// the rules (Megatron's 1F1B and interleaved 1F1B, GPipe, plain 1F1B over P x V chunks).
// "F2.1" is the forward of chunk 2 on microbatch 1; chunk c runs on rank c % P.

// 1F1B, P = 2, m = 4: rank r runs P - r - 1 warmup forwards, then one forward / one backward.
// RUN: rm -rf %t && split-file %s %t
// RUN: megac-opt %t/pp2-vpp1-m4-1f1b.mlir --megac-pipeline-schedule --megac-print-pipeline-schedule -o /dev/null | FileCheck %s --check-prefix=P2V1M4 --match-full-lines
// P2V1M4:      pipe.schedule @schedule: 1f1b, P = 2, V = 1, m = 4
// P2V1M4-NEXT: rank 0: F0.0 F0.1 B0.0 F0.2 B0.1 F0.3 B0.2 B0.3
// P2V1M4-NEXT: rank 1: F1.0 B1.0 F1.1 B1.1 F1.2 B1.2 F1.3 B1.3
// P2V1M4-NEXT: bubble: 0.25 (makespan 15, compute 12 per rank; tf 1, tb 2, tcomm 0)
// P2V1M4-NEXT: stash peak (bound): rank 0 2 (2), rank 1 1 (1)

// 1F1B, P = 4, m = 8: warmups of 3, 2, 1, 0 forwards.
// RUN: megac-opt %t/pp4-vpp1-m8-1f1b.mlir --megac-pipeline-schedule --megac-print-pipeline-schedule -o /dev/null | FileCheck %s --check-prefix=P4V1M8 --match-full-lines
// P4V1M8:      pipe.schedule @schedule: 1f1b, P = 4, V = 1, m = 8
// P4V1M8-NEXT: rank 0: F0.0 F0.1 F0.2 F0.3 B0.0 F0.4 B0.1 F0.5 B0.2 F0.6 B0.3 F0.7 B0.4 B0.5 B0.6 B0.7
// P4V1M8-NEXT: rank 1: F1.0 F1.1 F1.2 B1.0 F1.3 B1.1 F1.4 B1.2 F1.5 B1.3 F1.6 B1.4 F1.7 B1.5 B1.6 B1.7
// P4V1M8-NEXT: rank 2: F2.0 F2.1 B2.0 F2.2 B2.1 F2.3 B2.2 F2.4 B2.3 F2.5 B2.4 F2.6 B2.5 F2.7 B2.6 B2.7
// P4V1M8-NEXT: rank 3: F3.0 B3.0 F3.1 B3.1 F3.2 B3.2 F3.3 B3.3 F3.4 B3.4 F3.5 B3.5 F3.6 B3.6 F3.7 B3.7
// P4V1M8-NEXT: bubble: 0.375 (makespan 33, compute 24 per rank; tf 1, tb 2, tcomm 0)
// P4V1M8-NEXT: stash peak (bound): rank 0 4 (4), rank 1 3 (3), rank 2 2 (2), rank 3 1 (1)

// Interleaved, P = 2, V = 2, m = 4 (the default with vpp > 1): forward k runs local chunk
// (k / P) % V on microbatch (k / (P V)) P + k % P, backward k the chunks reversed; warmups
// 2 (P - r - 1) + (V - 1) P = 4 and 2.
// RUN: megac-opt %t/pp2-vpp2-m4-interleaved.mlir --megac-pipeline-schedule --megac-print-pipeline-schedule -o /dev/null | FileCheck %s --check-prefix=P2V2M4 --match-full-lines
// P2V2M4:      pipe.schedule @schedule: interleaved, P = 2, V = 2, m = 4
// P2V2M4-NEXT: rank 0: F0.0 F0.1 F2.0 F2.1 F0.2 B2.0 F0.3 B2.1 F2.2 B0.0 F2.3 B0.1 B2.2 B2.3 B0.2 B0.3
// P2V2M4-NEXT: rank 1: F1.0 F1.1 F3.0 B3.0 F3.1 B3.1 F1.2 B1.0 F1.3 B1.1 F3.2 B3.2 F3.3 B3.3 B1.2 B1.3
// P2V2M4-NEXT: bubble: 0.125 (makespan 27, compute 24 per rank; tf 1, tb 2, tcomm 0)
// P2V2M4-NEXT: stash peak (bound): rank 0 5 (5), rank 1 3 (3)

// Interleaved, P = 4, V = 2, m = 8: warmups 10, 8, 6, 4.
// RUN: megac-opt %t/pp4-vpp2-m8-interleaved.mlir --megac-pipeline-schedule --megac-print-pipeline-schedule -o /dev/null | FileCheck %s --check-prefix=P4V2M8 --match-full-lines
// P4V2M8:      pipe.schedule @schedule: interleaved, P = 4, V = 2, m = 8
// P4V2M8-NEXT: rank 0: F0.0 F0.1 F0.2 F0.3 F4.0 F4.1 F4.2 F4.3 F0.4 F0.5 F0.6 B4.0 F0.7 B4.1 F4.4 B4.2 F4.5 B4.3 F4.6 B0.0 F4.7 B0.1 B0.2 B0.3 B4.4 B4.5 B4.6 B4.7 B0.4 B0.5 B0.6 B0.7
// P4V2M8-NEXT: rank 1: F1.0 F1.1 F1.2 F1.3 F5.0 F5.1 F5.2 F5.3 F1.4 B5.0 F1.5 B5.1 F1.6 B5.2 F1.7 B5.3 F5.4 B1.0 F5.5 B1.1 F5.6 B1.2 F5.7 B1.3 B5.4 B5.5 B5.6 B5.7 B1.4 B1.5 B1.6 B1.7
// P4V2M8-NEXT: rank 2: F2.0 F2.1 F2.2 F2.3 F6.0 F6.1 F6.2 B6.0 F6.3 B6.1 F2.4 B6.2 F2.5 B6.3 F2.6 B2.0 F2.7 B2.1 F6.4 B2.2 F6.5 B2.3 F6.6 B6.4 F6.7 B6.5 B6.6 B6.7 B2.4 B2.5 B2.6 B2.7
// P4V2M8-NEXT: rank 3: F3.0 F3.1 F3.2 F3.3 F7.0 B7.0 F7.1 B7.1 F7.2 B7.2 F7.3 B7.3 F3.4 B3.0 F3.5 B3.1 F3.6 B3.2 F3.7 B3.3 F7.4 B7.4 F7.5 B7.5 F7.6 B7.6 F7.7 B7.7 B3.4 B3.5 B3.6 B3.7
// P4V2M8-NEXT: bubble: 0.1875 (makespan 57, compute 48 per rank; tf 1, tb 2, tcomm 0)
// P4V2M8-NEXT: stash peak (bound): rank 0 11 (11), rank 1 9 (9), rank 2 7 (7), rank 3 5 (5)

// GPipe, P = 2, m = 4: all forwards, then all backwards; same bubble as 1F1B, more stash.
// RUN: megac-opt %t/pp2-vpp1-m4-gpipe.mlir --megac-pipeline-schedule --megac-print-pipeline-schedule -o /dev/null | FileCheck %s --check-prefix=GPIPE --match-full-lines
// GPIPE:      pipe.schedule @schedule: gpipe, P = 2, V = 1, m = 4
// GPIPE-NEXT: rank 0: F0.0 F0.1 F0.2 F0.3 B0.0 B0.1 B0.2 B0.3
// GPIPE-NEXT: rank 1: F1.0 F1.1 F1.2 F1.3 B1.0 B1.1 B1.2 B1.3
// GPIPE-NEXT: bubble: 0.25 (makespan 15, compute 12 per rank; tf 1, tb 2, tcomm 0)
// GPIPE-NEXT: stash peak (bound): rank 0 4 (4), rank 1 4 (4)

// GPipe, P = 2, V = 2, m = 2: local chunks in order forward, last to first backward.
// RUN: megac-opt %t/pp2-vpp2-m2-gpipe.mlir --megac-pipeline-schedule --megac-print-pipeline-schedule -o /dev/null | FileCheck %s --check-prefix=GPIPE-V2 --match-full-lines
// GPIPE-V2:      rank 0: F0.0 F0.1 F2.0 F2.1 B2.0 B2.1 B0.0 B0.1
// GPIPE-V2-NEXT: rank 1: F1.0 F1.1 F3.0 F3.1 B3.0 B3.1 B1.0 B1.1

// Plain 1F1B over P x V = 4 chunks, m = 2: chunk c as its own 1F1B stage (timed with tf = 1,
// tb = 2), each rank taking its chunks' ops by start time. Starts: F0.0@0 F0.1@1 F2.0@2
// F2.1@3 B2.0@6 B2.1@9 B0.0@10 B0.1@13; F1.0@1 F1.1@2 F3.0@3 B3.0@4 F3.1@6 B3.1@7 B1.0@8 B1.1@11.
// RUN: megac-opt %t/pp2-vpp2-m2-1f1b.mlir --megac-pipeline-schedule --megac-print-pipeline-schedule -o /dev/null | FileCheck %s --check-prefix=1F1B-V2 --match-full-lines
// 1F1B-V2:      pipe.schedule @schedule: 1f1b, P = 2, V = 2, m = 2
// 1F1B-V2-NEXT: rank 0: F0.0 F0.1 F2.0 F2.1 B2.0 B2.1 B0.0 B0.1
// 1F1B-V2-NEXT: rank 1: F1.0 F1.1 F3.0 B3.0 F3.1 B3.1 B1.0 B1.1
// 1F1B-V2:      stash peak (bound): rank 0 4 (4), rank 1 3 (3)

// Plain 1F1B over 4 chunks, m = 4, with the messages. Rank 1 takes activations in the order
// F1.0 F1.1 F1.2 F3.0 F3.1 F3.2 F1.3 F3.3, so rank 0 holds F0.3's output (sA0.3) until
// F2.1's and F2.2's are sent: messages between two ranks are matched in order.
// RUN: megac-opt %t/pp2-vpp2-m4-1f1b.mlir --megac-pipeline-schedule --megac-print-pipeline-schedule=comms=true -o /dev/null | FileCheck %s --check-prefix=1F1B-COMMS --match-full-lines
// 1F1B-COMMS:      rank 0: F0.0 sA0.0>1 F0.1 sA0.1>1 F0.2 sA0.2>1 rA2.0<1 F2.0 sA2.0>1 F0.3 rA2.1<1 F2.1 sA2.1>1 rG2.0<1 B2.0 sG2.0>1 rA2.2<1 F2.2 sA2.2>1 sA0.3>1 rG2.1<1 B2.1 sG2.1>1 rG0.0<1 B0.0 rA2.3<1 F2.3 sA2.3>1 rG2.2<1 B2.2 sG2.2>1 rG0.1<1 B0.1 rG2.3<1 B2.3 sG2.3>1 rG0.2<1 B0.2 rG0.3<1 B0.3
// 1F1B-COMMS-NEXT: rank 1: rA1.0<0 F1.0 sA1.0>0 rA1.1<0 F1.1 sA1.1>0 rA1.2<0 F1.2 sA1.2>0 rA3.0<0 F3.0 B3.0 sG3.0>0 rA3.1<0 F3.1 B3.1 sG3.1>0 rG1.0<0 B1.0 sG1.0>0 rA3.2<0 F3.2 B3.2 sG3.2>0 rA1.3<0 F1.3 sA1.3>0 rG1.1<0 B1.1 sG1.1>0 rA3.3<0 F3.3 B3.3 sG3.3>0 rG1.2<0 B1.2 sG1.2>0 rG1.3<0 B1.3 sG1.3>0
// 1F1B-COMMS-NEXT: bubble: 0.125 (makespan 27, compute 24 per rank; tf 1, tb 2, tcomm 0)

// Without pipeline parallelism in the plan the schedule is one stage with one chunk over one
// microbatch (the runtime runs it once per microbatch of its global batch): no bubble.
// RUN: megac-opt %t/pp1.mlir --megac-pipeline-schedule --megac-print-pipeline-schedule -o /dev/null | FileCheck %s --check-prefix=P1 --match-full-lines
// P1:      pipe.schedule @schedule: 1f1b, P = 1, V = 1, m = 1
// P1-NEXT: rank 0: F0.0 B0.0
// P1-NEXT: bubble: 0 (makespan 3, compute 3 per rank; tf 1, tb 2, tcomm 0)
// P1-NEXT: stash peak (bound): rank 0 1 (1)

//--- pp2-vpp1-m4-1f1b.mlir
shard.grid @grid(shape = 2x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 2, dp = 1, tp = 1, num_microbatches = 4, num_virtual_stages_per_pipeline_rank = 1, pipeline_schedule = "1f1b">}

//--- pp4-vpp1-m8-1f1b.mlir
shard.grid @grid(shape = 4x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 4, dp = 1, tp = 1, num_microbatches = 8, num_virtual_stages_per_pipeline_rank = 1, pipeline_schedule = "1f1b">}

//--- pp2-vpp2-m4-interleaved.mlir
shard.grid @grid(shape = 2x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 2, dp = 1, tp = 1, num_microbatches = 4, num_virtual_stages_per_pipeline_rank = 2, pipeline_schedule = "interleaved">}

//--- pp4-vpp2-m8-interleaved.mlir
shard.grid @grid(shape = 4x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 4, dp = 1, tp = 1, num_microbatches = 8, num_virtual_stages_per_pipeline_rank = 2, pipeline_schedule = "interleaved">}

//--- pp2-vpp1-m4-gpipe.mlir
shard.grid @grid(shape = 2x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 2, dp = 1, tp = 1, num_microbatches = 4, num_virtual_stages_per_pipeline_rank = 1, pipeline_schedule = "gpipe">}

//--- pp2-vpp2-m2-gpipe.mlir
shard.grid @grid(shape = 2x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 2, dp = 1, tp = 1, num_microbatches = 2, num_virtual_stages_per_pipeline_rank = 2, pipeline_schedule = "gpipe">}

//--- pp2-vpp2-m2-1f1b.mlir
shard.grid @grid(shape = 2x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 2, dp = 1, tp = 1, num_microbatches = 2, num_virtual_stages_per_pipeline_rank = 2, pipeline_schedule = "1f1b">}

//--- pp2-vpp2-m4-1f1b.mlir
shard.grid @grid(shape = 2x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 2, dp = 1, tp = 1, num_microbatches = 4, num_virtual_stages_per_pipeline_rank = 2, pipeline_schedule = "1f1b">}

//--- pp1.mlir
shard.grid @grid(shape = 1x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 1>}
