// Plans no schedule exists for: megac-pipeline-schedule fails with the builder's message, which
// names the flag, the value and the fix; a plan without what a schedule needs fails naming the
// plan's key.
// RUN: rm -rf %t && split-file %s %t
// RUN: not megac-opt %t/m6.mlir --megac-pipeline-schedule 2>&1 | FileCheck %s --check-prefix=NOT-MULTIPLE
// NOT-MULTIPLE: error: pipeline schedule: --pipeline-schedule interleaved needs the number of microbatches (m) to be a multiple of the pipeline size P (--pipeline-model-parallel-size), got m = 6, P = 4; the nearest valid is m = 4 or m = 8 (or use --pipeline-schedule 1f1b)

// RUN: not megac-opt %t/m7.mlir --megac-pipeline-schedule 2>&1 | FileCheck %s --check-prefix=NEAREST-ABOVE
// NEAREST-ABOVE: got m = 7, P = 4; the nearest valid is m = 8 (or use --pipeline-schedule 1f1b)

// RUN: not megac-opt %t/m3.mlir --megac-pipeline-schedule 2>&1 | FileCheck %s --check-prefix=FEWER-THAN-P
// FEWER-THAN-P: got m = 3, P = 4; the nearest valid is m = 4 (or use --pipeline-schedule 1f1b)

// RUN: not megac-opt %t/one-chunk.mlir --megac-pipeline-schedule 2>&1 | FileCheck %s --check-prefix=ONE-CHUNK
// ONE-CHUNK: error: pipeline schedule: --pipeline-schedule interleaved needs more than one chunk per rank, but --vpp is 1; use --pipeline-schedule 1f1b, or give --vpp 2 or more

// RUN: not megac-opt %t/no-chunks.mlir --megac-pipeline-schedule 2>&1 | FileCheck %s --check-prefix=NO-CHUNKS
// NO-CHUNKS: error: pp is 2, so megac.plan needs num_virtual_stages_per_pipeline_rank >= 1 (got 0), num_microbatches >= 1 (got 4) and a pipeline_schedule

// RUN: not megac-opt %t/no-microbatches.mlir --megac-pipeline-schedule 2>&1 | FileCheck %s --check-prefix=NO-MICROBATCHES
// NO-MICROBATCHES: error: pp is 2, so megac.plan needs num_virtual_stages_per_pipeline_rank >= 1 (got 1), num_microbatches >= 1 (got 0) and a pipeline_schedule

// RUN: not megac-opt %t/unknown.mlir --megac-pipeline-schedule 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// UNKNOWN: error: megac.plan's pipeline_schedule must be gpipe, 1f1b or interleaved, got "zero-bubble"

// RUN: not megac-opt %t/no-grid.mlir --megac-pipeline-schedule 2>&1 | FileCheck %s --check-prefix=NO-GRID
// NO-GRID: error: megac-pipeline-schedule: the module has no shard.grid @grid with a megac.plan = #megac.plan<...>; the frontend records the plan there

// RUN: not megac-opt %t/axes.mlir --megac-pipeline-schedule 2>&1 | FileCheck %s --check-prefix=AXES
// AXES: error: @grid needs megac.axes = ["pp", "dp", "tp"] (Megatron's rank order)

//--- m6.mlir
shard.grid @grid(shape = 4x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 4, dp = 1, tp = 1, num_microbatches = 6, num_virtual_stages_per_pipeline_rank = 2, pipeline_schedule = "interleaved">}
//--- m7.mlir
shard.grid @grid(shape = 4x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 4, dp = 1, tp = 1, num_microbatches = 7, num_virtual_stages_per_pipeline_rank = 2, pipeline_schedule = "interleaved">}
//--- m3.mlir
shard.grid @grid(shape = 4x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 4, dp = 1, tp = 1, num_microbatches = 3, num_virtual_stages_per_pipeline_rank = 2, pipeline_schedule = "interleaved">}
//--- one-chunk.mlir
shard.grid @grid(shape = 4x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 4, dp = 1, tp = 1, num_microbatches = 8, num_virtual_stages_per_pipeline_rank = 1, pipeline_schedule = "interleaved">}
//--- no-chunks.mlir
shard.grid @grid(shape = 2x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 2, dp = 1, tp = 1, num_microbatches = 4, num_virtual_stages_per_pipeline_rank = 0, pipeline_schedule = "1f1b">}
//--- no-microbatches.mlir
shard.grid @grid(shape = 2x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 2, dp = 1, tp = 1, num_microbatches = 0, num_virtual_stages_per_pipeline_rank = 1, pipeline_schedule = "1f1b">}
//--- unknown.mlir
shard.grid @grid(shape = 2x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 2, dp = 1, tp = 1, num_microbatches = 4, num_virtual_stages_per_pipeline_rank = 1, pipeline_schedule = "zero-bubble">}
//--- no-grid.mlir
module {}
//--- axes.mlir
shard.grid @grid(shape = 2x1x1) {megac.axes = ["dp", "pp", "tp"], megac.plan = #megac.plan<pp = 2, num_microbatches = 2, num_virtual_stages_per_pipeline_rank = 1, pipeline_schedule = "1f1b">}
