// megac-pipeline-schedule's closing actions: what ends each rank's iteration, from the plan and
// from which ranks hold a weight another rank holds too (here `wte`, as GPT-2's embedding is its
// LM head). Only the closing ops are checked; schedule-ir.mlir checks the steps before them.
// RUN: rm -rf %t && split-file %s %t
// RUN: megac-opt %t/pp2-dp2.mlir --megac-pipeline-schedule | FileCheck %s --check-prefix=PP2_DP2
// RUN: megac-opt %t/pp2-dp2-zero1.mlir --megac-pipeline-schedule | FileCheck %s --check-prefix=PP2_DP2_ZERO1
// RUN: megac-opt %t/pp2-dp2-zero1-overlap.mlir --megac-pipeline-schedule | FileCheck %s --check-prefix=PP2_DP2_ZERO1_OVERLAP
// RUN: megac-opt %t/pp2-dp2-zero2.mlir --megac-pipeline-schedule | FileCheck %s --check-prefix=PP2_DP2_ZERO2
// RUN: megac-opt %t/pp2-dp2-zero3.mlir --megac-pipeline-schedule | FileCheck %s --check-prefix=PP2_DP2_ZERO3
// RUN: megac-opt %t/pp3-dp1.mlir --megac-pipeline-schedule | FileCheck %s --check-prefix=PP3_DP1
// RUN: megac-opt %t/pp1-dp2-zero3.mlir --megac-pipeline-schedule | FileCheck %s --check-prefix=PP1_DP2_ZERO3
// RUN: megac-opt %t/pp1-dp2-zero1.mlir --megac-pipeline-schedule | FileCheck %s --check-prefix=PP1_DP2_ZERO1
// RUN: megac-opt %t/pp2-dp2-zero1.mlir --megac-pipeline-schedule | megac-opt | FileCheck %s --check-prefix=PP2_DP2_ZERO1

// Plain data parallelism: the tied copies add the dp-summed gradients (Megatron's order).
// PP2_DP2-LABEL: pipe.rank 0
// PP2_DP2:         pipe.backward chunk 0 microbatch 1
// PP2_DP2-NEXT:    pipe.grad_sync
// PP2_DP2-NEXT:    pipe.tied_sum grads
// PP2_DP2-NEXT:    pipe.optimizer_step
// PP2_DP2-NEXT:  }
// PP2_DP2-NEXT:  pipe.rank 1
// PP2_DP2:         pipe.grad_sync
// PP2_DP2-NEXT:    pipe.tied_sum grads
// PP2_DP2-NEXT:    pipe.optimizer_step
// PP2_DP2-NEXT:  }

// ZeRO-1: whole gradients summed before the reduce-scatter, which would leave the two stages
// different shards of wte; each rank steps its shard, then the shard group gathers.
// PP2_DP2_ZERO1-LABEL: pipe.rank 0
// PP2_DP2_ZERO1:         pipe.backward chunk 0 microbatch 1
// PP2_DP2_ZERO1-NEXT:    pipe.tied_sum grads
// PP2_DP2_ZERO1-NEXT:    pipe.grad_sync
// PP2_DP2_ZERO1-NEXT:    pipe.optimizer_step
// PP2_DP2_ZERO1-NEXT:    pipe.param_gather
// PP2_DP2_ZERO1-NEXT:  }
// PP2_DP2_ZERO1-NEXT:  pipe.rank 1
// PP2_DP2_ZERO1:         pipe.tied_sum grads
// PP2_DP2_ZERO1-NEXT:    pipe.grad_sync
// PP2_DP2_ZERO1-NEXT:    pipe.optimizer_step
// PP2_DP2_ZERO1-NEXT:    pipe.param_gather

// ZeRO-1 overlapped: backward starts the reduce-scatters, so the copies sum the reduced shards.
// PP2_DP2_ZERO1_OVERLAP-LABEL: pipe.rank 0
// PP2_DP2_ZERO1_OVERLAP:         pipe.backward chunk 0 microbatch 1
// PP2_DP2_ZERO1_OVERLAP-NEXT:    pipe.grad_sync
// PP2_DP2_ZERO1_OVERLAP-NEXT:    pipe.tied_sum grad_shards
// PP2_DP2_ZERO1_OVERLAP-NEXT:    pipe.optimizer_step
// PP2_DP2_ZERO1_OVERLAP-NEXT:    pipe.param_gather

// PP2_DP2_ZERO2-LABEL: pipe.rank 1
// PP2_DP2_ZERO2:         pipe.send grad chunk 1 microbatch 1 to 0
// PP2_DP2_ZERO2-NEXT:    pipe.grad_sync
// PP2_DP2_ZERO2-NEXT:    pipe.tied_sum grad_shards
// PP2_DP2_ZERO2-NEXT:    pipe.optimizer_step
// PP2_DP2_ZERO2-NEXT:    pipe.param_gather
// PP2_DP2_ZERO2-NEXT:  }

// ZeRO-3 under pp keeps the parameters gathered through the iteration (ZeRO-2's state): the
// step's shards are gathered after it.
// PP2_DP2_ZERO3-LABEL: pipe.rank 0
// PP2_DP2_ZERO3:         pipe.grad_sync
// PP2_DP2_ZERO3-NEXT:    pipe.tied_sum grad_shards
// PP2_DP2_ZERO3-NEXT:    pipe.optimizer_step
// PP2_DP2_ZERO3-NEXT:    pipe.param_gather

// Only the ranks holding wte sum it; without dp the sync is a no-op but still closes the rank.
// PP3_DP1-LABEL: pipe.rank 0
// PP3_DP1:         pipe.grad_sync
// PP3_DP1-NEXT:    pipe.tied_sum grads
// PP3_DP1-NEXT:    pipe.optimizer_step
// PP3_DP1-NEXT:  }
// PP3_DP1-NEXT:  pipe.rank 1
// PP3_DP1:         pipe.backward
// PP3_DP1:         pipe.grad_sync
// PP3_DP1-NEXT:    pipe.optimizer_step
// PP3_DP1-NEXT:  }
// PP3_DP1-NEXT:  pipe.rank 2
// PP3_DP1:         pipe.grad_sync
// PP3_DP1-NEXT:    pipe.tied_sum grads
// PP3_DP1-NEXT:    pipe.optimizer_step
// PP3_DP1-NEXT:  }

// ZeRO-3 without pp keeps the parameters sharded: no gather after the step.
// PP1_DP2_ZERO3-LABEL: pipe.rank 0
// PP1_DP2_ZERO3-NEXT:    pipe.forward chunk 0 microbatch 0
// PP1_DP2_ZERO3-NEXT:    pipe.backward chunk 0 microbatch 0
// PP1_DP2_ZERO3-NEXT:    pipe.grad_sync
// PP1_DP2_ZERO3-NEXT:    pipe.optimizer_step
// PP1_DP2_ZERO3-NEXT:  }

// PP1_DP2_ZERO1-LABEL: pipe.rank 0
// PP1_DP2_ZERO1:         pipe.grad_sync
// PP1_DP2_ZERO1-NEXT:    pipe.optimizer_step
// PP1_DP2_ZERO1-NEXT:    pipe.param_gather
// PP1_DP2_ZERO1-NEXT:  }

//--- pp2-dp2.mlir
shard.grid @grid(shape = 2x2x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 2, dp = 2, tp = 1, num_microbatches = 2, num_virtual_stages_per_pipeline_rank = 1, pipeline_schedule = "1f1b">}
func.func @chunk0_forward() attributes {megac.chunk = 0 : i64, megac.role = #megac.role<chunk_forward>} {
  %wte = tx.param "wte" init(normal) : tensor<16x8xf32>
  %w = tx.param "h.0.w" init(normal) : tensor<8x8xf32>
  return
}
func.func @chunk1_forward() attributes {megac.chunk = 1 : i64, megac.role = #megac.role<chunk_forward>} {
  %w = tx.param "h.1.w" init(normal) : tensor<8x8xf32>
  %wte = tx.param "wte" init(normal) : tensor<16x8xf32>
  return
}

//--- pp2-dp2-zero1.mlir
shard.grid @grid(shape = 2x2x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 2, dp = 2, tp = 1, num_microbatches = 2, num_virtual_stages_per_pipeline_rank = 1, pipeline_schedule = "1f1b", data_parallel_sharding_strategy = "optim">}
func.func @chunk0_forward() attributes {megac.chunk = 0 : i64, megac.role = #megac.role<chunk_forward>} {
  %wte = tx.param "wte" init(normal) : tensor<16x8xf32>
  %w = tx.param "h.0.w" init(normal) : tensor<8x8xf32>
  return
}
func.func @chunk1_forward() attributes {megac.chunk = 1 : i64, megac.role = #megac.role<chunk_forward>} {
  %w = tx.param "h.1.w" init(normal) : tensor<8x8xf32>
  %wte = tx.param "wte" init(normal) : tensor<16x8xf32>
  return
}

//--- pp2-dp2-zero1-overlap.mlir
shard.grid @grid(shape = 2x2x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 2, dp = 2, tp = 1, num_microbatches = 2, num_virtual_stages_per_pipeline_rank = 1, pipeline_schedule = "1f1b", overlap_grad_reduce = true, data_parallel_sharding_strategy = "optim">}
func.func @chunk0_forward() attributes {megac.chunk = 0 : i64, megac.role = #megac.role<chunk_forward>} {
  %wte = tx.param "wte" init(normal) : tensor<16x8xf32>
  %w = tx.param "h.0.w" init(normal) : tensor<8x8xf32>
  return
}
func.func @chunk1_forward() attributes {megac.chunk = 1 : i64, megac.role = #megac.role<chunk_forward>} {
  %w = tx.param "h.1.w" init(normal) : tensor<8x8xf32>
  %wte = tx.param "wte" init(normal) : tensor<16x8xf32>
  return
}

//--- pp2-dp2-zero2.mlir
shard.grid @grid(shape = 2x2x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 2, dp = 2, tp = 1, num_microbatches = 2, num_virtual_stages_per_pipeline_rank = 1, pipeline_schedule = "1f1b", data_parallel_sharding_strategy = "optim_grads">}
func.func @chunk0_forward() attributes {megac.chunk = 0 : i64, megac.role = #megac.role<chunk_forward>} {
  %wte = tx.param "wte" init(normal) : tensor<16x8xf32>
  %w = tx.param "h.0.w" init(normal) : tensor<8x8xf32>
  return
}
func.func @chunk1_forward() attributes {megac.chunk = 1 : i64, megac.role = #megac.role<chunk_forward>} {
  %w = tx.param "h.1.w" init(normal) : tensor<8x8xf32>
  %wte = tx.param "wte" init(normal) : tensor<16x8xf32>
  return
}

//--- pp2-dp2-zero3.mlir
shard.grid @grid(shape = 2x2x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 2, dp = 2, tp = 1, num_microbatches = 2, num_virtual_stages_per_pipeline_rank = 1, pipeline_schedule = "1f1b", data_parallel_sharding_strategy = "optim_grads_params">}
func.func @chunk0_forward() attributes {megac.chunk = 0 : i64, megac.role = #megac.role<chunk_forward>} {
  %wte = tx.param "wte" init(normal) : tensor<16x8xf32>
  %w = tx.param "h.0.w" init(normal) : tensor<8x8xf32>
  return
}
func.func @chunk1_forward() attributes {megac.chunk = 1 : i64, megac.role = #megac.role<chunk_forward>} {
  %w = tx.param "h.1.w" init(normal) : tensor<8x8xf32>
  %wte = tx.param "wte" init(normal) : tensor<16x8xf32>
  return
}

//--- pp3-dp1.mlir
shard.grid @grid(shape = 3x1x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 3, dp = 1, tp = 1, num_microbatches = 3, num_virtual_stages_per_pipeline_rank = 1, pipeline_schedule = "1f1b">}
func.func @chunk0_forward() attributes {megac.chunk = 0 : i64, megac.role = #megac.role<chunk_forward>} {
  %wte = tx.param "wte" init(normal) : tensor<16x8xf32>
  return
}
func.func @chunk1_forward() attributes {megac.chunk = 1 : i64, megac.role = #megac.role<chunk_forward>} {
  %w = tx.param "h.0.w" init(normal) : tensor<8x8xf32>
  return
}
func.func @chunk2_forward() attributes {megac.chunk = 2 : i64, megac.role = #megac.role<chunk_forward>} {
  %wte = tx.param "wte" init(normal) : tensor<16x8xf32>
  return
}

//--- pp1-dp2-zero3.mlir
shard.grid @grid(shape = 1x2x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 2, tp = 1, data_parallel_sharding_strategy = "optim_grads_params">}

//--- pp1-dp2-zero1.mlir
shard.grid @grid(shape = 1x2x1) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 2, tp = 1, data_parallel_sharding_strategy = "optim">}
