// RUN: megac-opt %s --megac-plan-workspace -split-input-file | FileCheck %s
// megac-plan-workspace on hand-written functions: which values get a buffer, for how long, where.

// A chain: %a is dead once %b is computed, so %c takes its place; %b lives on through its view
// (%v) until %c reads it. The returned %d is the caller's buffer: no offset. 256 bytes each.
// CHECK-LABEL: func.func private @layer
// CHECK-SAME:    attributes {megac.frame_bytes = 512 : i64, megac.role = #megac.role<layer>, megac.workspace_bytes = 512 : i64}
// CHECK-NEXT:    tx.gelu {{.*}} {megac.live_until = array<i64: 1>, megac.workspace_offsets = array<i64: 0>}
// CHECK-NEXT:    tx.gelu {{.*}} {megac.live_until = array<i64: 3>, megac.workspace_offsets = array<i64: 256>}
// CHECK-NEXT:    tx.reshape {{[^{]*}} :
// CHECK-NEXT:    tx.gelu {{.*}} {megac.live_until = array<i64: 4>, megac.workspace_offsets = array<i64: 0>}
// CHECK-NEXT:    tx.gelu {{[^{]*}} :
// CHECK-NEXT:    return
func.func private @layer(%x: tensor<2x4x8xf32>) -> tensor<8x8xf32> attributes {megac.role = #megac.role<layer>} {
  %a = tx.gelu %x (tanh) : tensor<2x4x8xf32>
  %b = tx.gelu %a (tanh) : tensor<2x4x8xf32>
  %v = tx.reshape %b : tensor<2x4x8xf32> -> tensor<8x8xf32>
  %c = tx.gelu %v (tanh) : tensor<8x8xf32>
  %d = tx.gelu %c (tanh) : tensor<8x8xf32>
  return %d : tensor<8x8xf32>
}

// -----

// A caller's workspace holds its callee's after its own frame (128 + 64 bytes); the returned loss,
// a scalar the step returns as a number, has a buffer of its own; a parameter has none.
// CHECK-LABEL: func.func private @callee
// CHECK-SAME:    megac.frame_bytes = 128 : i64
// CHECK-SAME:    megac.workspace_bytes = 128 : i64
// CHECK-LABEL: func.func @train_step
// CHECK-SAME:    megac.frame_bytes = 192 : i64
// CHECK-SAME:    megac.workspace_bytes = 320 : i64
// CHECK-NEXT:    tx.param "w" init(normal) : tensor<4x8xf32>
// CHECK-NEXT:    call @callee{{.*}} {megac.live_until = array<i64: 2>, megac.workspace_offsets = array<i64: 0>}
// CHECK-NEXT:    tx.cross_entropy {{.*}} {megac.live_until = array<i64: 3>, megac.workspace_offsets = array<i64: 128>}
func.func private @callee(%x: tensor<4x8xf32>) -> tensor<4x8xf32> attributes {megac.role = #megac.role<layer>} {
  %a = tx.gelu %x (tanh) : tensor<4x8xf32>
  %b = tx.gelu %a (tanh) : tensor<4x8xf32>
  return %b : tensor<4x8xf32>
}
func.func @train_step(%ids: tensor<4xi32>, %labels: tensor<4xi32>, %dloss: tensor<f32>) -> tensor<f32> attributes {megac.role = #megac.role<train_step>} {
  %w = tx.param "w" init(normal) : tensor<4x8xf32>
  %h = call @callee(%w) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %loss = tx.cross_entropy %h, %labels : tensor<4x8xf32>, tensor<4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// An overlapped all-reduce (one with a tx.wait_collective) reads its input until its wait: %p
// lives until then, and %q cannot take its place.
// CHECK-LABEL: func.func @overlapped
// CHECK-NEXT:    tx.gelu {{.*}} {megac.live_until = array<i64: 3>, megac.workspace_offsets = array<i64: 0>}
// CHECK-NEXT:    shard.all_reduce {{.*}} {megac.live_until = array<i64: 4>, megac.workspace_offsets = array<i64: 128>}
// CHECK-NEXT:    tx.gelu {{.*}} {megac.live_until = array<i64: 4>, megac.workspace_offsets = array<i64: 256>}
// CHECK-NEXT:    tx.wait_collective
shard.grid @grid(shape = 1x1x2) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 2>}
func.func @overlapped(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %p = tx.gelu %x (tanh) : tensor<4x8xf32>
  %s = shard.all_reduce %p on @grid grid_axes = [2] : tensor<4x8xf32> -> tensor<4x8xf32>
  %q = tx.gelu %x (tanh) : tensor<4x8xf32>
  tx.wait_collective %s : tensor<4x8xf32>
  %r = tx.add %s, %q : tensor<4x8xf32>, tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}

// -----

// The gradient buckets' function is runtime calls on the gradients' buffer: no workspace.
// CHECK-LABEL: func.func @sync_gradients
// CHECK-NOT:     megac.frame_bytes
func.func @sync_gradients() attributes {megac.role = #megac.role<sync_gradients>} {
  return
}
