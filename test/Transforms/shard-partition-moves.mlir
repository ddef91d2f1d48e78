// RUN: megac-opt %s --megac-shard-partition=axes=tp | FileCheck %s
// Shardings given by hand, as propagation would record them: split on one dimension to another
// (gathered, then sliced), whole to split (a local slice), partial sums to whole (reduced once for
// both users), partial sums passed through a sum.
// CHECK-LABEL: func.func @moves(
// CHECK-SAME:    %[[ROWS:.*]]: tensor<2x8xf32> {{.*}}, %[[WHOLE:.*]]: tensor<4x8xf32> {{.*}}, %[[SUM:.*]]: tensor<4x8xf32>
// CHECK-NEXT:    %[[G:.*]] = shard.all_gather %[[ROWS]] {{.*}} gather_axis = 0 {{.*}} : tensor<2x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %[[S:.*]] = shard.all_slice %[[G]] {{.*}} slice_axis = 1 {{.*}} : tensor<4x8xf32> -> tensor<4x4xf32>
// CHECK-NEXT:    tx.gelu %[[S]]
// CHECK-NEXT:    %[[W:.*]] = shard.all_slice %[[WHOLE]] {{.*}} slice_axis = 0 {{.*}} : tensor<4x8xf32> -> tensor<2x8xf32>
// CHECK-NEXT:    tx.gelu %[[W]]
// CHECK-NEXT:    %[[R:.*]] = shard.all_reduce %[[SUM]] {{.*}} {megac.rule = "partial sums over tp reduced before tx.gelu"
// CHECK-NEXT:    tx.gelu %[[R]]
// CHECK-NEXT:    tx.add %[[SUM]], %[[SUM]]
// CHECK-NEXT:    tx.gelu %[[R]]
shard.grid @grid(shape = 1x1x2) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 2>}

func.func @moves(%rows: tensor<4x8xf32> {megac.sharding = #tx.sharding<[{"tp"}, {}]>}, %whole: tensor<4x8xf32> {megac.sharding = #tx.sharding<[{}, {}]>}, %sum: tensor<4x8xf32> {megac.sharding = #tx.sharding<[{}, {}], partial={"tp"}>}) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %a = tx.gelu %rows (tanh) {megac.sharding = #tx.sharding<[{}, {"tp"}]>} : tensor<4x8xf32>
  %b = tx.gelu %whole (tanh) {megac.sharding = #tx.sharding<[{"tp"}, {}]>} : tensor<4x8xf32>
  %c = tx.gelu %sum (tanh) {megac.sharding = #tx.sharding<[{}, {}]>} : tensor<4x8xf32>
  %d = tx.add %sum, %sum {megac.sharding = #tx.sharding<[{}, {}], partial={"tp"}>} : tensor<4x8xf32>, tensor<4x8xf32>
  %e = tx.gelu %sum (tanh) {megac.sharding = #tx.sharding<[{}, {}]>} : tensor<4x8xf32>
  return %a, %b, %c : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}
