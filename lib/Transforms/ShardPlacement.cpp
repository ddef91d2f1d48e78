#include "ShardPlacement.h"
#include "GradSyncPlacement.h"

#include "megac/Analysis/BufferAliases.h"
#include "megac/Plan/PlanIR.h"
#include "tx/TxNames.h"
#include "tx/TxOps.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace megac;

/// The name of the grid axis `axes` runs over ("dp", with hybrid sharding "dp_shard" /
/// "dp_replicate", the experts' "expert_dp").
static StringRef axisName(const CollectiveAxes &axes) {
  if (axes.grid.getValue() == names::kDpGrid)
    return dpGridAxisName(static_cast<DpGridAxis>(axes.axes.asArrayRef()[0]));
  if (axes.grid.getValue() == names::kEpGrid)
    return epGridAxisName(static_cast<EpGridAxis>(axes.axes.asArrayRef()[0]));
  return gridAxisName(static_cast<GridAxis>(axes.axes.asArrayRef()[0]));
}

/// Records how a flat (1-D) value is spread, as megac-tensor-parallel records its values: split
/// over `split` (or whole), a partial sum over `partial`.
static void recordSharding(Value v, std::optional<StringRef> split, ArrayRef<StringRef> partial) {
  Builder b(v.getContext());
  SmallVector<Attribute> dim, sums;
  if (split)
    dim.push_back(b.getStringAttr(*split));
  for (StringRef p : partial)
    sums.push_back(b.getStringAttr(p));
  v.getDefiningOp()->setAttr(names::kShardingAttr,
                             tx::ShardingAttr::get(v.getContext(), b.getArrayAttr({b.getArrayAttr(dim)}),
                                                   b.getArrayAttr(sums)));
}

/// The bucket of each of `n` parameters (table order).
/// Whether `op` reads `pending`, the result of an overlapped collective (a view reads nothing),
/// or ends the function (where every collective left is waited for).
static bool readsOrReturns(Operation &op, Value pending) {
  if (isa<func::ReturnOp>(op))
    return true;
  if (isa<tx::ReshapeOp, tx::BucketParamOp>(op))
    return false;
  return llvm::any_of(op.getOperands(), [&](Value v) { return aliasRoot(v) == pending; });
}

/// A tx.wait_collective for each of `collectives` (in order) before the first op that reads its
/// result: the collective runs while the ops between go on.
static void waitWhereFirstRead(ArrayRef<Operation *> collectives) {
  for (Operation *collective : collectives) {
    Value pending = collective->getResult(0);
    Operation *at = collective->getNextNode();
    while (!readsOrReturns(*at, pending))
      at = at->getNextNode();
    OpBuilder b(at);
    tx::WaitCollectiveOp::create(b, collective->getLoc(), pending);
  }
}

static SmallVector<int64_t> bucketsOfParams(const FlatBufferLayout &layout, int64_t n) {
  SmallVector<int64_t> bucketOf(n, -1);
  for (auto [b, k] : llvm::enumerate(layout.buckets))
    for (int64_t i = k.firstParam; i <= k.lastParam; ++i)
      bucketOf[i] = static_cast<int64_t>(b);
  return bucketOf;
}

SmallVector<int64_t> megac::reduceScatterGradsInBackward(func::FuncOp fn, const tx::ParamTable &table,
                                                         const FlatBufferLayout &layout, const ShardGroups &groups,
                                                         StringRef rule) {
  hoistParamGrads(fn); // a bucket is staged only from its first gradient to its last
  const SmallVector<int64_t> bucketOf = bucketsOfParams(layout, table.size());
  // Each bucket's gradients in the order backward makes them.
  SmallVector<SmallVector<tx::ParamGradOp>> grads(layout.buckets.size());
  for (tx::ParamGradOp g : fn.getBody().front().getOps<tx::ParamGradOp>())
    if (auto param = g.getParam().getDefiningOp<tx::ParamOp>())
      if (std::optional<int64_t> i = table.find(param))
        grads[bucketOf[*i]].push_back(g);

  MLIRContext *ctx = fn.getContext();
  OpBuilder b(ctx);
  SmallVector<int64_t> made;
  SmallVector<Operation *> overlapped; // started, waited for where first read
  for (auto [index, k] : llvm::enumerate(layout.buckets)) {
    if (grads[index].empty())
      continue;
    made.push_back(static_cast<int64_t>(index));
    const std::string name = "bucket_" + std::to_string(index);
    auto named = [&](const std::string &n, Location at) { return NameLoc::get(b.getStringAttr(n), at); };
    auto whole = RankedTensorType::get({k.numel}, b.getF32Type());
    b.setInsertionPoint(grads[index].front());
    // Each rank's bucket is its part of a sum over the dp ranks (of the shard group and of the
    // replicas): reduce-scattered, a shard of it; summed across the replicas, the whole shard.
    const CollectiveAxes &over = groups.of(k);
    SmallVector<StringRef> dpAxes = {axisName(over)};
    if (groups.replicas.grid)
      dpAxes.push_back(axisName(groups.replicas));
    Value bucket =
        tx::GradBucketInitOp::create(b, named(name + "_grads", fn.getLoc()), whole, k.firstParam, k.lastParam);
    recordSharding(bucket, std::nullopt, dpAxes);
    for (tx::ParamGradOp g : grads[index]) {
      b.setInsertionPoint(g);
      const int64_t i = *table.find(g.getParam().getDefiningOp<tx::ParamOp>());
      bucket = tx::GradBucketAddOp::create(b, named(name + "_grads", g.getLoc()), whole, bucket, g.getGrad(),
                                           layout.paramOffsets[i] - k.offset);
      recordSharding(bucket, std::nullopt, dpAxes);
      g.erase(); // before moving the insertion point: it would rest on g
      b.setInsertionPointAfter(bucket.getDefiningOp());
    }
    auto shard = RankedTensorType::get({k.shardNumel()}, b.getF32Type());
    const std::string what = " bucket " + std::to_string(index) + " (" + table[k.firstParam].getName().str() + " .. " +
                             table[k.lastParam].getName().str() + ", " + std::to_string(k.numel) +
                             " elements with padding" + (k.experts ? "; over the dp ranks holding these experts)" : ")");
    Value sum = shard::ReduceScatterOp::create(b, named(name + "_grad_shard", fn.getLoc()), shard, over.grid,
                                               over.axes, bucket,
                                               shard::ReductionKindAttr::get(ctx, shard::ReductionKind::Sum),
                                               b.getIndexAttr(0));
    sum.getDefiningOp()->setAttr(names::kRuleAttr, b.getStringAttr(rule + what));
    recordSharding(sum, axisName(over), ArrayRef<StringRef>(dpAxes).drop_front());
    if (groups.overlapGrads) {
      // Backward goes on while the bucket is reduced; its shard is kept at the end.
      overlapped.push_back(sum.getDefiningOp());
      b.setInsertionPoint(fn.getBody().front().getTerminator());
    }
    if (groups.replicas.grid) {
      auto across = shard::AllReduceOp::create(b, named(name + "_grad_shard_summed", fn.getLoc()), shard,
                                               groups.replicas.grid, groups.replicas.axes, sum,
                                               shard::ReductionKindAttr::get(ctx, shard::ReductionKind::Sum));
      across->setAttr(names::kRuleAttr,
                      b.getStringAttr("hybrid sharding: the gradient shard summed across the replicas of" + what));
      sum = across;
      recordSharding(sum, axisName(over), {});
    }
    tx::AddGradShardOp::create(b, fn.getLoc(), sum, k.firstParam, k.lastParam, k.shardOffset);
  }
  waitWhereFirstRead(overlapped);
  return made;
}

void megac::gatherParamsBeforeUse(func::FuncOp fn, const tx::ParamTable &table, const FlatBufferLayout &layout,
                                  const ShardGroups &groups, StringRef rule) {
  Block &body = fn.getBody().front();
  const SmallVector<int64_t> bucketOf = bucketsOfParams(layout, table.size());
  // Per bucket, each parameter's uses.
  using Uses = SmallVector<std::pair<int64_t, OpOperand *>>; // (table index, use)
  SmallVector<Uses> uses(layout.buckets.size());
  for (tx::ParamOp p : body.getOps<tx::ParamOp>()) {
    std::optional<int64_t> i = table.find(p);
    if (!i)
      continue;
    for (OpOperand &use : p->getUses())
      uses[bucketOf[*i]].push_back({*i, &use});
  }

  MLIRContext *ctx = fn.getContext();
  OpBuilder b(ctx);
  // Each bucket with uses and the op that first reads one of its parameters, in the order the
  // function reads them.
  struct Gather {
    int64_t bucket;
    Operation *first;
  };
  SmallVector<Gather> gathers;
  SmallVector<Operation *> overlapped; // prefetched: waited for where first read
  for (auto [index, k] : llvm::enumerate(layout.buckets)) {
    Operation *first = nullptr;
    for (auto [i, use] : uses[index]) {
      Operation *user = body.findAncestorOpInBlock(*use->getOwner());
      if (!first || user->isBeforeInBlock(first))
        first = user;
    }
    if (first)
      gathers.push_back({static_cast<int64_t>(index), first});
  }
  llvm::stable_sort(gathers, [](const Gather &a, const Gather &b) { return a.first->isBeforeInBlock(b.first); });
  for (auto [g, gather] : llvm::enumerate(gathers)) {
    const int64_t index = gather.bucket;
    const FlatBufferLayout::Bucket &k = layout.buckets[index];
    // Prefetched, a bucket is gathered where the one read before it is.
    Operation *first = groups.prefetchParams && g > 0 ? gathers[g - 1].first : gather.first;
    const std::string name = "bucket_" + std::to_string(index);
    auto named = [&](const std::string &n) { return NameLoc::get(b.getStringAttr(n), fn.getLoc()); };
    b.setInsertionPoint(first);
    const CollectiveAxes &over = groups.of(k);
    auto shardType = RankedTensorType::get({k.shardNumel()}, b.getF32Type());
    Value mine = tx::LocalParamShardOp::create(b, named(name + "_param_shard"), shardType, k.firstParam,
                                               k.lastParam, k.shardOffset);
    recordSharding(mine, axisName(over), {});
    auto all = shard::AllGatherOp::create(b, named(name + "_params"), RankedTensorType::get({k.numel}, b.getF32Type()),
                                          over.grid, over.axes, mine, b.getIndexAttr(0));
    if (groups.prefetchParams)
      overlapped.push_back(all);
    recordSharding(all.getResult(), std::nullopt, {});
    all->setAttr(names::kRuleAttr, b.getStringAttr(rule + " bucket " + std::to_string(index) + " (" +
                                                   table[k.firstParam].getName().str() + " .. " +
                                                   table[k.lastParam].getName().str() + ")"));
    // One view per parameter, named as the parameter was.
    DenseMap<int64_t, Value> views;
    for (auto [i, use] : uses[index]) {
      Value &view = views[i];
      if (!view) {
        auto p = use->get().getDefiningOp<tx::ParamOp>();
        view = tx::BucketParamOp::create(b, p.getLoc(), p.getType(), all, layout.paramOffsets[i] - k.offset);
      }
      use->set(view);
    }
  }
  waitWhereFirstRead(overlapped);
}

void megac::waitForParamGathers(func::FuncOp fn, const tx::ParamTable &table, const FlatBufferLayout &layout) {
  Block &body = fn.getBody().front();
  const SmallVector<int64_t> bucketOf = bucketsOfParams(layout, table.size());
  SmallVector<Operation *> first(layout.buckets.size(), nullptr);
  for (tx::ParamOp p : body.getOps<tx::ParamOp>()) {
    std::optional<int64_t> i = table.find(p);
    if (!i)
      continue;
    for (Operation *user : p->getUsers()) {
      if (isa<tx::ParamGradOp>(user)) // names the parameter, reads nothing of it
        continue;
      Operation *top = body.findAncestorOpInBlock(*user);
      Operation *&f = first[bucketOf[*i]];
      if (!f || top->isBeforeInBlock(f))
        f = top;
    }
  }
  OpBuilder b(fn.getContext());
  for (auto [index, k] : llvm::enumerate(layout.buckets))
    if (first[index]) {
      b.setInsertionPoint(first[index]);
      tx::WaitParamGatherOp::create(b, fn.getLoc(), k.firstParam, k.lastParam, static_cast<int64_t>(index));
    }
}
