// A large plan builds, verifies (on the pass's output and when read back) and prints quickly:
// P = 8, V = 4, m = 64, 8 x 2 x 256 compute ops plus their messages.
// RUN: rm -rf %t && split-file %s %t
// RUN: megac-opt %t/pp8-vpp4-m64-interleaved.mlir --megac-pipeline-schedule | megac-opt --megac-print-pipeline-schedule -o /dev/null | FileCheck %s
// CHECK: pipe.schedule @schedule: interleaved, P = 8, V = 4, m = 64
// Bubble (P - 1) / (V m) = 7 / 256.
// CHECK: bubble: 0.0273438 (makespan 789, compute 768 per rank; tf 1, tb 2, tcomm 0)
// Stash min(V m, 2 (P - r - 1) + (V - 1) P + 1) = 39, 37, ..., 25.
// CHECK: stash peak (bound): rank 0 39 (39), rank 1 37 (37), rank 2 35 (35), rank 3 33 (33), rank 4 31 (31), rank 5 29 (29), rank 6 27 (27), rank 7 25 (25)

//--- pp8-vpp4-m64-interleaved.mlir
shard.grid @grid(shape = 8x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 8, dp = 1, tp = 1, num_microbatches = 64, num_virtual_stages_per_pipeline_rank = 4, pipeline_schedule = "interleaved">}
