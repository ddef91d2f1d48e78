// megac-data-parallel: the gradient all-reduce over data-parallel ranks, in flat buckets; with a
// sharding strategy, Megatron's flat layout and the reduce-scatters / all-gathers of ZeRO-1/2/3
// (over shard groups of dp ranks, summed across their replicas with hybrid sharding).
#include "ShardPlacement.h"
#include "GradSyncPlacement.h"
#include "megac/Plan/PlanDialect.h"
#include "megac/Plan/FlatBufferLayout.h"
#include "megac/Plan/PlanIR.h"
#include "megac/Transforms/Passes.h"
#include "tx/TxChunks.h"
#include "tx/TxNames.h"
#include "tx/TxOps.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "megac-data-parallel"

namespace megac {
#define GEN_PASS_DEF_DATAPARALLEL
#include "megac/Transforms/Passes.h.inc"
} // namespace megac

using namespace mlir;
using namespace megac;

namespace {

constexpr StringLiteral kZero3Rule = "ZeRO-3 (optim_grads_params): all-gather of the parameter";

/// The shard group (and with hybrid sharding the replicas) of the plan's sharded state.
ShardGroups groupsOf(ModuleOp module, const ParallelPlan &plan) {
  ShardGroups groups;
  groups.overlapGrads = plan.overlapGradReduce;
  groups.prefetchParams = plan.overlapParamGather;
  groups.shard = shardGroupAxes(module, plan);
  if (plan.shardDegree != plan.dp)
    groups.replicas = replicaGroupAxes(module, plan);
  if (plan.ep > 1)
    groups.experts = expertDataParallelAxes(module, plan);
  return groups;
}

/// The distributed optimizer's flat buckets as buckets whose reduce-scatter backward starts.
SmallVector<GradBucket> reduceScatterBuckets(const FlatBufferLayout &layout) {
  SmallVector<GradBucket> buckets;
  for (const FlatBufferLayout::Bucket &k : layout.buckets)
    buckets.push_back({k.firstParam, k.lastParam, k.numel, k.shardNumel()});
  return buckets;
}

/// The label of the reduce-scatters in backward (ZeRO-2 and ZeRO-3).
std::string gradRule(const ParallelPlan &plan) {
  return std::string(plan.sharding == ShardingStrategy::OptimGrads ? "ZeRO-2" : "ZeRO-3") + " (" +
         shardingStrategyName(plan.sharding) + "): reduce-scatter of this microbatch's gradient";
}

struct DataParallelPass : public megac::impl::DataParallelBase<DataParallelPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<ParallelPlan> plan = readPlan(module, getArgument());
    if (failed(plan))
      return signalPassFailure();
    if (plan->dp == 1)
      return markAllAnalysesPreserved();
    const int64_t bucketSize = plan->ddpBucketSize;
    const bool overlap = plan->overlapGradReduce;

    // Each stage (pp = 1: the one) syncs the gradients of its own parameter table.
    if (!tx::hasChunkFunctions(module)) {
      module.emitError() << getArgument() << ": needs the chunk functions (run megac-pipeline-split first)";
      return signalPassFailure();
    }
    // ZeRO-2 and ZeRO-3 reduce-scatter in backward; ZeRO-3 gathers in each chunk function unless
    // the parameters stay gathered for the iteration (then it is ZeRO-2's program). The
    // overlapped distributed optimizer starts its reduce-scatters in backward too.
    const bool gradsInBackward = plan->shardedState() == ShardingStrategy::OptimGrads ||
                                 plan->shardedState() == ShardingStrategy::OptimGradsParams;
    const bool tiedOnShards = plan->tiedGradsOnShards();
    llvm::StringMap<int64_t> stagesHolding; // tensor name -> stages whose tables hold it (tied: 2)
    for (int64_t s = 0; s < plan->pp; ++s) {
      llvm::StringSet<> names;
      tx::ParamTable table(tx::stageFunctions(module, s, plan->pp));
      for (tx::ParamOp p : table.all())
        if (names.insert(p.getName()).second)
          ++stagesHolding[p.getName()];
    }
    for (int64_t s = 0; s < plan->pp; ++s) {
      SmallVector<func::FuncOp> fns = tx::stageFunctions(module, s, plan->pp);
      tx::ParamTable table(fns);
      // Overlapped: each bucket's sync starts in the chunk backward that makes its last gradient.
      auto startInBackward = [&](ArrayRef<GradBucket> buckets) {
        for (func::FuncOp fn : fns)
          if (isBackward(roleOf(fn)))
            placeGradSyncStarts(fn, table, buckets);
        return checkGradSyncStarts(module, s, fns, table, buckets);
      };
      // Overlapped, or reduce-scattered in backward (ZeRO-2), a bucket is made by the backward of
      // one chunk: none spans two.
      SmallVector<int64_t> chunkStarts;
      if (overlap || gradsInBackward)
        for (func::FuncOp fn : fns)
          if (!isBackward(roleOf(fn)))
            if (std::optional<int64_t> first = table.firstIn(fn))
              chunkStarts.push_back(*first);
      // ZeRO-2/3 (and the overlapped distributed optimizer) sum a tied weight's gradient (GPT-2's
      // wte in the first and the last stage) after the reduce-scatters, shard with shard: alone in
      // its bucket, it has the same shards in both stages.
      if (tiedOnShards)
        for (int64_t i = 0; i < table.size(); ++i)
          if (stagesHolding[table[i].getName()] > 1)
            chunkStarts.append({i, i + 1});
      if (plan->sharding != ShardingStrategy::NoShard) {
        const FlatBufferLayout layout = addShardedFunctions(module, names::stageSyncName(s),
                                                            names::stageGatherName(s), table, *plan, chunkStarts);
        if (failed(checkOffload(module, layout, *plan)))
          return signalPassFailure();
        if (gradsInBackward && failed(reduceScatterInChunks(module, s, fns, table, layout, *plan)))
          return signalPassFailure();
        if (plan->shardedState() == ShardingStrategy::OptimGradsParams)
          for (func::FuncOp fn : fns) // each chunk function gathers what it uses, and frees it
            gatherParamsBeforeUse(fn, table, layout, groupsOf(module, *plan), kZero3Rule);
        else if (plan->overlapParamGather) // the step's gathers run on into the forwards
          for (func::FuncOp fn : fns)
            if (!isBackward(roleOf(fn)))
              waitForParamGathers(fn, table, layout);
        if (overlap && plan->sharding == ShardingStrategy::Optim &&
            failed(startInBackward(reduceScatterBuckets(layout))))
          return signalPassFailure();
        continue;
      }
      // Expert parallelism: the experts' gradients sum over other ranks than the rest, so no bucket
      // holds both.
      for (int64_t i = 1; i < table.size(); ++i)
        if (tx::holdsExpertBlock(table[i]) != tx::holdsExpertBlock(table[i - 1]))
          chunkStarts.push_back(i);
      SmallVector<GradBucket> buckets =
          addSyncFunction(module, names::stageSyncName(s), table, bucketSize, chunkStarts, *plan);
      if (overlap && failed(startInBackward(buckets)))
        return signalPassFailure();
    }
  }

  /// ZeRO-2 in the backward chunks of stage `stage`: each bucket reduce-scattered by the one chunk
  /// backward that makes all its gradients.
  LogicalResult reduceScatterInChunks(ModuleOp module, int64_t stage, ArrayRef<func::FuncOp> fns,
                                      const tx::ParamTable &table, const FlatBufferLayout &layout,
                                      const ParallelPlan &plan) {
    SmallVector<int64_t> makers(layout.buckets.size(), 0);
    for (func::FuncOp fn : fns)
      if (isBackward(roleOf(fn)))
        for (int64_t bucket : reduceScatterGradsInBackward(fn, table, layout, groupsOf(module, plan), gradRule(plan)))
          ++makers[bucket];
    for (auto [index, k] : llvm::enumerate(layout.buckets))
      if (makers[index] > 1)
        return module.emitError() << getArgument() << ": stage " << stage << "'s gradient bucket " << index
                                  << " (params[" << k.firstParam << ", " << k.lastParam
                                  << "]) gets gradients from " << makers[index]
                                  << " chunk backwards; each must be reduce-scattered by one";
    return success();
  }

  /// ZeRO-Offload must move something: a fraction too small for a shard's elements is refused.
  LogicalResult checkOffload(ModuleOp module, const FlatBufferLayout &layout, const ParallelPlan &plan) {
    const int64_t shard = layout.shardNumel;
    if (plan.optimizerOffloadFraction <= 0 || plan.offloadedNumel(shard) > 0)
      return success();
    return module.emitError() << "--optimizer-offload-fraction " << plan.optimizerOffloadFraction
                              << " offloads none of a rank's " << shard << "-element optimizer shard; give at least "
                              << 1.0 / static_cast<double>(shard) << ", or drop --optimizer-cpu-offload";
  }

  /// Sharded state over `table` in Megatron's padded flat layout, which goes on @`syncName` for
  /// the emitter and the memory plan. ZeRO-1: @`syncName` reduce-scatters each gradient bucket
  /// over the shard group (this rank's shard of the sum kept at the bucket's start, where the
  /// optimizer steps it; summed across replicas with hybrid sharding). ZeRO-1 and ZeRO-2:
  /// @`gatherName` all-gathers each bucket's updated parameter shards after the step. An
  /// expert-parallel rank's experts are sharded over the dp ranks holding the same experts, in
  /// buckets of their own (Megatron's expert-data-parallel group).
  FlatBufferLayout addShardedFunctions(ModuleOp module, StringRef syncName, StringRef gatherName,
                                       const tx::ParamTable &table, const ParallelPlan &plan,
                                       ArrayRef<int64_t> chunkStarts) {
    SmallVector<int64_t> numels;
    SmallVector<bool> experts;
    for (tx::ParamOp p : table.all()) {
      numels.push_back(p.getType().getNumElements());
      experts.push_back(tx::holdsExpertBlock(p));
    }
    const int64_t d = plan.shardDegree, expertDegree = plan.dp / plan.ep;
    const FlatBufferLayout layout =
        layoutFlatBuffer(numels, plan.ddpBucketSize, d, chunkStarts, experts, expertDegree);
    OpBuilder b(module.getBodyRegion());
    b.setInsertionPointToEnd(module.getBody());
    MLIRContext *ctx = b.getContext();
    Location loc = FusedLoc::get(ctx, {module.getLoc()}, b.getStringAttr(getArgument()));
    const ShardGroups groups = groupsOf(module, plan);
    auto named = [&](const std::string &name) { return NameLoc::get(b.getStringAttr(name), loc); };
    // optim_grads and optim_grads_params reduce-scatter in backward instead: their
    // @sync_gradients only carries the layout.
    const std::string strategy = shardingStrategyName(plan.sharding);
    const bool gradsInBackward = plan.sharding != ShardingStrategy::Optim;
    const std::string kept = plan.keepsParamsGathered() ? ", kept for the next iteration's pipeline schedule" : "";

    auto sync = func::FuncOp::create(b, loc, syncName, b.getFunctionType({}, {}));
    setRole(sync, FunctionRole::SyncGradients);
    SmallVector<int64_t> bucketPairs, expertBuckets;
    for (auto [index, k] : llvm::enumerate(layout.buckets)) {
      bucketPairs.append({k.offset, k.numel});
      if (k.experts)
        expertBuckets.push_back(static_cast<int64_t>(index));
    }
    SmallVector<NamedAttribute> fields = {
        b.getNamedAttr("param_offsets", b.getDenseI64ArrayAttr(layout.paramOffsets)),
        b.getNamedAttr("buckets", b.getDenseI64ArrayAttr(bucketPairs)),
        b.getNamedAttr("numel", b.getI64IntegerAttr(layout.numel)),
        b.getNamedAttr("shard_degree", b.getI64IntegerAttr(d)),
        b.getNamedAttr("shard_numel", b.getI64IntegerAttr(layout.shardNumel)),
        b.getNamedAttr("sharding", b.getStringAttr(shardingStrategyName(plan.shardedState()))),
        b.getNamedAttr("offloaded_numel", b.getI64IntegerAttr(plan.offloadedNumel(layout.shardNumel)))};
    if (!expertBuckets.empty()) // sharded over expert_dp: expert_shard_degree ranks
      fields.append({b.getNamedAttr("expert_buckets", b.getDenseI64ArrayAttr(expertBuckets)),
                     b.getNamedAttr("expert_shard_degree", b.getI64IntegerAttr(expertDegree))});
    sync->setAttr(names::kFlatLayoutAttr, b.getDictionaryAttr(fields));
    OpBuilder sb = OpBuilder::atBlockEnd(sync.addEntryBlock());
    // ZeRO-3 keeps the updated shards: nothing to gather after the step.
    const bool paramsSharded = plan.shardedState() == ShardingStrategy::OptimGradsParams;
    func::FuncOp gather;
    OpBuilder gb(ctx);
    if (!paramsSharded) {
      gather = func::FuncOp::create(b, loc, gatherName, b.getFunctionType({}, {}));
      setRole(gather, FunctionRole::GatherParams);
      gb.setInsertionPointToEnd(gather.addEntryBlock());
    }
    for (auto [index, k] : llvm::enumerate(layout.buckets)) {
      const std::string name = "bucket_" + std::to_string(index);
      auto whole = RankedTensorType::get({k.numel}, b.getF32Type());
      auto shard = RankedTensorType::get({k.shardNumel()}, b.getF32Type());
      const CollectiveAxes &over = groups.of(k);
      const std::string what = " bucket " + std::to_string(index) + " (" + table[k.firstParam].getName().str() +
                               " .. " + table[k.lastParam].getName().str() + ", " + std::to_string(k.numel) +
                               " elements with padding" + (k.experts ? "; over the dp ranks holding these experts)" : ")");
      if (!gradsInBackward) {
        Value grads = tx::GradBucketOp::create(sb, named(name), whole, k.firstParam, k.lastParam);
        Value sum = shard::ReduceScatterOp::create(sb, named(name + "_shard"), shard, over.grid, over.axes, grads,
                                                   shard::ReductionKindAttr::get(ctx, shard::ReductionKind::Sum),
                                                   sb.getIndexAttr(0));
        sum.getDefiningOp()->setAttr(names::kRuleAttr, sb.getStringAttr("distributed optimizer (" + strategy +
                                                                        "): reduce-scatter of gradient" + what));
        if (groups.replicas.grid) {
          auto across = shard::AllReduceOp::create(sb, named(name + "_shard_summed"), shard, groups.replicas.grid,
                                                   groups.replicas.axes, sum,
                                                   shard::ReductionKindAttr::get(ctx, shard::ReductionKind::Sum));
          across->setAttr(names::kRuleAttr,
                          sb.getStringAttr("hybrid sharding: the gradient shard summed across the replicas of" + what));
          sum = across;
        }
        tx::SetGradShardOp::create(sb, loc, sum, k.firstParam, k.lastParam);
      }
      if (paramsSharded)
        continue;
      Value mine = tx::ParamShardOp::create(gb, named(name + "_param_shard"), shard, k.firstParam, k.lastParam);
      auto all = shard::AllGatherOp::create(gb, named(name + "_params"), whole, over.grid, over.axes, mine,
                                            gb.getIndexAttr(0));
      all->setAttr(names::kRuleAttr, gb.getStringAttr("distributed optimizer (" + strategy +
                                                      "): all-gather of the updated parameter" + what + kept));
      tx::SetParamBucketOp::create(gb, loc, all, k.firstParam, k.lastParam);
    }
    func::ReturnOp::create(sb, loc);
    if (gather)
      func::ReturnOp::create(gb, loc);
    return layout;
  }

  /// @`fnName`: the buckets over `table`, each closed where it would pass `bucketSize` elements or
  /// reach one of `boundaries` (table indices that start a new bucket).
  SmallVector<GradBucket> addSyncFunction(ModuleOp module, StringRef fnName, const tx::ParamTable &table,
                                          int64_t bucketSize, ArrayRef<int64_t> boundaries, const ParallelPlan &plan) {
    // Buckets from the last parameter back: backward finishes those gradients first.
    SmallVector<GradBucket> buckets;
    int64_t last = table.size() - 1, elements = 0;
    for (int64_t i = last; i >= 0; --i) {
      int64_t n = table[i].getType().getNumElements();
      if (elements > 0 && (elements + n > bucketSize || llvm::is_contained(boundaries, i + 1))) {
        buckets.push_back({i + 1, last, elements});
        last = i, elements = 0;
      }
      elements += n;
    }
    if (last >= 0)
      buckets.push_back({0, last, elements});

    OpBuilder b(module.getBodyRegion());
    b.setInsertionPointToEnd(module.getBody());
    Location loc = FusedLoc::get(b.getContext(), {module.getLoc()}, b.getStringAttr(getArgument()));
    auto fn = func::FuncOp::create(b, loc, fnName, b.getFunctionType({}, {}));
    setRole(fn, FunctionRole::SyncGradients);
    b.setInsertionPointToEnd(fn.addEntryBlock());
    auto gridRef = FlatSymbolRefAttr::get(b.getContext(), names::kGrid);
    auto dpAxis = b.getDenseI16ArrayAttr({static_cast<int16_t>(GridAxis::Dp)});
    for (auto [index, bucketRange] : llvm::enumerate(buckets)) {
      const int64_t first = bucketRange.first, end = bucketRange.last, n = bucketRange.elements;
      LLVM_DEBUG(llvm::dbgs() << DEBUG_TYPE ": @" << fnName << " bucket " << index << ": params [" << first << ", "
                              << end << "], " << n << " elements\n");
      auto type = RankedTensorType::get({n}, b.getF32Type());
      std::string name = "bucket_" + std::to_string(index);
      Value bucket = tx::GradBucketOp::create(b, NameLoc::get(b.getStringAttr(name), loc), type, first, end);
      // An expert-parallel rank's experts: summed over the dp ranks that hold the same ones.
      const bool experts = tx::holdsExpertBlock(table[first]);
      const CollectiveAxes over = experts ? expertDataParallelAxes(module, plan) : CollectiveAxes{gridRef, dpAxis};
      auto sum = shard::AllReduceOp::create(b, NameLoc::get(b.getStringAttr(name + "_summed"), loc), type, over.grid,
                                            over.axes, bucket,
                                            shard::ReductionKindAttr::get(b.getContext(), shard::ReductionKind::Sum));
      sum->setAttr(names::kRuleAttr,
                   b.getStringAttr((experts ? "expert parallel: the experts' gradient bucket "
                                            : "data parallel: gradient bucket ") +
                                   std::to_string(index) + " (" + table[first].getName() + " .. " +
                                   table[end].getName() + ")" +
                                   (experts ? ", over the dp ranks holding the same experts" : "")));
      tx::SetGradBucketOp::create(b, loc, sum, first, end);
    }
    func::ReturnOp::create(b, loc);
    return buckets;
  }
};

} // namespace
