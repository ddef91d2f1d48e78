#include "GradShardPlacement.h"
#include "GradSyncPlacement.h"

#include "megac/Plan/PlanIR.h"
#include "tx/TxNames.h"
#include "tx/TxOps.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace megac;

SmallVector<int64_t> megac::reduceScatterGradsInBackward(func::FuncOp fn, const tx::ParamTable &table,
                                                         const FlatBufferLayout &layout, int64_t shardDegree,
                                                         StringRef rule) {
  hoistParamGrads(fn); // a bucket is staged only from its first gradient to its last
  SmallVector<int64_t> bucketOf(table.size(), -1);
  for (auto [b, k] : llvm::enumerate(layout.buckets))
    for (int64_t i = k.firstParam; i <= k.lastParam; ++i)
      bucketOf[i] = static_cast<int64_t>(b);
  // Each bucket's gradients in the order backward makes them.
  SmallVector<SmallVector<tx::ParamGradOp>> grads(layout.buckets.size());
  for (tx::ParamGradOp g : fn.getBody().front().getOps<tx::ParamGradOp>())
    if (auto param = g.getParam().getDefiningOp<tx::ParamOp>())
      if (std::optional<int64_t> i = table.find(param))
        grads[bucketOf[*i]].push_back(g);

  MLIRContext *ctx = fn.getContext();
  OpBuilder b(ctx);
  auto gridRef = FlatSymbolRefAttr::get(ctx, names::kGrid);
  auto dpAxis = b.getDenseI16ArrayAttr({static_cast<int16_t>(GridAxis::Dp)});
  SmallVector<int64_t> made;
  for (auto [index, k] : llvm::enumerate(layout.buckets)) {
    if (grads[index].empty())
      continue;
    made.push_back(static_cast<int64_t>(index));
    const std::string name = "bucket_" + std::to_string(index);
    auto named = [&](const std::string &n, Location at) { return NameLoc::get(b.getStringAttr(n), at); };
    auto whole = RankedTensorType::get({k.numel}, b.getF32Type());
    b.setInsertionPoint(grads[index].front());
    Value bucket =
        tx::GradBucketInitOp::create(b, named(name + "_grads", fn.getLoc()), whole, k.firstParam, k.lastParam);
    for (tx::ParamGradOp g : grads[index]) {
      b.setInsertionPoint(g);
      const int64_t i = *table.find(g.getParam().getDefiningOp<tx::ParamOp>());
      bucket = tx::GradBucketAddOp::create(b, named(name + "_grads", g.getLoc()), whole, bucket, g.getGrad(),
                                           layout.paramOffsets[i] - k.offset);
      g.erase(); // before moving the insertion point: it would rest on g
      b.setInsertionPointAfter(bucket.getDefiningOp());
    }
    auto shard = RankedTensorType::get({k.numel / shardDegree}, b.getF32Type());
    auto sum = shard::ReduceScatterOp::create(b, named(name + "_grad_shard", fn.getLoc()), shard, gridRef, dpAxis,
                                              bucket, shard::ReductionKindAttr::get(ctx, shard::ReductionKind::Sum),
                                              b.getIndexAttr(0));
    sum->setAttr(names::kRuleAttr,
                 b.getStringAttr(rule + " bucket " + std::to_string(index) + " (" +
                                 table[k.firstParam].getName().str() + " .. " + table[k.lastParam].getName().str() +
                                 ", " + std::to_string(k.numel) + " elements with padding)"));
    tx::AddGradShardOp::create(b, fn.getLoc(), sum, k.firstParam, k.lastParam, k.offset / shardDegree);
  }
  return made;
}
