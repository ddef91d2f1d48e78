// RUN: megac-opt %s --split-input-file --megac-shard-partition=axes=tp --verify-diagnostics
// RUN: not megac-opt %s --split-input-file --megac-shard-partition=axes=dp 2>&1 | FileCheck %s --check-prefix=AXES
// AXES: megac-shard-partition: axes=dp: this pass partitions tp (dp's sums are megac-data-parallel's, its batch megac-shard-localize's); give axes=tp

shard.grid @grid(shape = 1x1x2) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 2>}

// A sum recorded as partial over tp whose other operand is whole: no collective makes partial sums.
func.func @whole_into_partial_sum(%sum: tensor<4x8xf32> {megac.sharding = #tx.sharding<[{}, {}], partial={"tp"}>}, %whole: tensor<4x8xf32> {megac.sharding = #tx.sharding<[{}, {}]>}) -> tensor<4x8xf32> {
  // expected-error @+1 {{needs partial sums over tp of a value, which is not one; megac-shard-propagate decided otherwise}}
  %d = tx.add %sum, %whole {megac.sharding = #tx.sharding<[{}, {}], partial={"tp"}>} : tensor<4x8xf32>, tensor<4x8xf32>
  return %d : tensor<4x8xf32>
}

// -----

shard.grid @grid(shape = 1x1x2) {megac.axes = ["pp", "dp", "tp"], megac.plan = #megac.plan<pp = 1, dp = 1, tp = 2>}

// A split the axis does not divide.
// expected-error @+1 {{splits dimension 0 of 'tensor<3x8xf32>' over tp (2 ranks), which does not divide it}}
func.func @odd(%rows: tensor<3x8xf32> {megac.sharding = #tx.sharding<[{"tp"}, {}]>}) -> tensor<3x8xf32> {
  return %rows : tensor<3x8xf32>
}
