// RUN: megac-opt %s --megac-test-factor-rules 2>&1 | FileCheck %s
// RUN: megac-opt %s --megac-test-kernel-calls 2>&1 | FileCheck %s --check-prefix=CALLS
// RUN: megac-opt %s | megac-opt | FileCheck %s --check-prefix=ROUNDTRIP
// The mixture-of-experts ops (dialects/tx/TxMoeOps.td): each one's sharding rule in factors (the
// tokens split, the choices and the experts whole; rows in expert order are the merged tokens x k)
// and its kernel call, one op per line; and they print as they parse.

func.func @moe(%x: tensor<6x4xf32>, %logits: tensor<6x8xf32>, %w: tensor<8x5x4xf32>, %dy: tensor<12x5xf32>, %w4: tensor<4x5x4xf32>) {
  // CHECK: remark: ([i, j]) -> ([i, j], [i, k], [i, k]) {i=6, j=8, k=2} need_replication={j, k}{{$}}
  // CALLS: remark: moe_route_forward(%probs, %experts, %weights, %arg1, tokens=6, experts=8, topk=2, pre_softmax=false)
  %probs, %experts, %weights = tx.moe_route %logits topk 2 : tensor<6x8xf32> -> tensor<6x2xi32>, tensor<6x2xf32>
  // CHECK: remark: ([i, j]) -> ([i, j], [k]) {i=6, j=2, k=8} need_replication={j, k}{{$}}
  // CALLS: remark: moe_assign(%rows, %counts, %experts, tokens=6, topk=2, experts=8)
  %rows, %counts = tx.moe_assign %experts : tensor<6x2xi32> -> tensor<8xi32>
  // CHECK: remark: ([i]) -> () {i=8} need_replication={i}{{$}}
  // CALLS: remark: record_expert_load(ctx, %counts, experts=8)
  tx.record_expert_load %counts : tensor<8xi32>
  // CHECK: remark: ([i, k], [i, j]) -> ([(i, j), k]) {i=6, j=2, k=4} need_replication={j}{{$}}
  // CALLS: remark: moe_scatter(%0, %arg0, %rows, tokens=6, topk=2, hidden=4)
  %xe = tx.moe_scatter %x, %rows : tensor<6x4xf32>, tensor<6x2xi32> -> tensor<12x4xf32>
  // CHECK: remark: ([i, k], [j, l, k], [j]) -> ([i, l]) {i=12, j=8, k=4, l=5} reduction={k} need_replication={j}{{$}}
  // CALLS: remark: grouped_gemm(%1, %0, %arg2, %counts, segments=8, experts=8, rows=12, k=4, n=5, transpose_w=true)
  %h = tx.grouped_matmul %xe, %w, %counts transpose_rhs : tensor<12x4xf32>, tensor<8x5x4xf32>, tensor<8xi32> -> tensor<12x5xf32>
  // CHECK: remark: ([(i, j), k], [i, j], [i, j]) -> ([i, k]) {i=6, j=2, k=4} need_replication={j}{{$}}
  // CALLS: remark: moe_gather_weighted(%2, %0, %rows, %weights, tokens=6, topk=2, hidden=4)
  %y = tx.moe_gather %xe, %rows weights %weights : tensor<6x2xf32> : tensor<12x4xf32>, tensor<6x2xi32> -> tensor<6x4xf32>
  // CHECK: remark: ([i, j], [i, k], [i, j], [i, k], [i, k]) -> ([i, j]) {i=6, j=8, k=2} need_replication={j, k}{{$}}
  // CALLS: remark: moe_route_backward(%3, %probs, %weights, %probs, %experts, %weights, tokens=6, experts=8, topk=2, pre_softmax=true)
  %d = tx.moe_route_grad %probs, %weights, %probs, %experts, %weights pre_softmax : tensor<6x8xf32>, tensor<6x2xf32>, tensor<6x2xi32>
  // CHECK: remark: ([i, k], [(i, j), k], [i, j]) -> ([i, j]) {i=6, j=2, k=4} reduction={k} need_replication={j}{{$}}
  // CALLS: remark: moe_row_dot(%4, %arg0, %0, %rows, tokens=6, topk=2, hidden=4)
  %dot = tx.moe_row_dot %x, %xe, %rows : tensor<6x4xf32>, tensor<12x4xf32>, tensor<6x2xi32> -> tensor<6x2xf32>
  // CHECK: remark: ([i, k], [i, l], [j]) -> ([j, l, k]) {i=12, j=8, k=4, l=5} reduction={i} need_replication={j}{{$}}
  // CALLS: remark: grouped_gemm_weight_grad(%5, %0, %arg3, %counts, segments=8, experts=8, rows=12, k=4, n=5, transpose=true)
  %dw = tx.grouped_matmul_weight_grad %xe, %dy, %counts transpose : tensor<12x4xf32>, tensor<12x5xf32>, tensor<8xi32> -> tensor<8x5x4xf32>
  // Expert parallelism over 2 ranks (megac-expert-parallel): the exchanges have no factors (each
  // side keeps the sharding its other ops give it), the grouped GEMM's received counts (a count per
  // expert of each sender) a factor of their own; a kernel call each; the 2 x 6 received rows.
  // CHECK: remark: ([1]) -> ([1]) {}{{$}}
  // CALLS: remark: moe_exchange_counts(ctx, %6, %counts, experts=8)
  %received = tx.moe_exchange_counts %counts over 2 ranks : tensor<8xi32>
  // CHECK: remark: ([1, 1], [1], [1]) -> ([1, 1]) {}{{$}}
  // CALLS: remark: moe_dispatch(ctx, %7, %0, %counts, %6, experts=8, local_rows=12, exchanged_rows=24, hidden=4)
  %sent = tx.moe_dispatch %xe, %counts, %received over 2 ranks : tensor<12x4xf32>, tensor<8xi32> -> tensor<24x4xf32>
  // CHECK: remark: ([i, k], [j, l, k], [m]) -> ([i, l]) {i=24, j=4, k=4, l=5, m=8} reduction={k} need_replication={j, m}{{$}}
  // CALLS: remark: grouped_gemm(%8, %7, %arg4, %6, segments=8, experts=4, rows=24, k=4, n=5, transpose_w=true)
  %hs = tx.grouped_matmul %sent, %w4, %received transpose_rhs : tensor<24x4xf32>, tensor<4x5x4xf32>, tensor<8xi32> -> tensor<24x5xf32>
  // CHECK: remark: ([1, 1], [1], [1]) -> ([1, 1]) {}{{$}}
  // CALLS: remark: moe_combine(ctx, %9, %8, %counts, %6, experts=8, local_rows=12, exchanged_rows=24, hidden=5)
  %back = tx.moe_combine %hs, %counts, %received over 2 ranks : tensor<24x5xf32>, tensor<8xi32> -> tensor<12x5xf32>
  // ROUNDTRIP: tx.moe_route %arg1 topk 2 : tensor<6x8xf32> -> tensor<6x2xi32>, tensor<6x2xf32>
  // ROUNDTRIP: tx.record_expert_load %counts : tensor<8xi32>
  // ROUNDTRIP: tx.moe_gather %{{.*}}, %{{.*}} weights %{{.*}} : tensor<6x2xf32> : tensor<12x4xf32>, tensor<6x2xi32> -> tensor<6x4xf32>
  // ROUNDTRIP: tx.moe_route_grad {{.*}} pre_softmax : tensor<6x8xf32>, tensor<6x2xf32>, tensor<6x2xi32>
  // ROUNDTRIP: tx.moe_dispatch %{{.*}}, %{{.*}}, %{{.*}} over 2 ranks : tensor<12x4xf32>, tensor<8xi32> -> tensor<24x4xf32>
  return
}
