// megac-data-parallel: the gradient all-reduce over data-parallel ranks, in flat buckets.
#include "GradSyncPlacement.h"
#include "megac/Plan/PlanIR.h"
#include "megac/Transforms/Passes.h"
#include "tx/TxChunks.h"
#include "tx/TxNames.h"
#include "tx/TxOps.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "megac-data-parallel"

namespace megac {
#define GEN_PASS_DEF_DATAPARALLEL
#include "megac/Transforms/Passes.h.inc"
} // namespace megac

using namespace mlir;
using namespace megac;

namespace {

struct DataParallelPass : public megac::impl::DataParallelBase<DataParallelPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<ParallelPlan> plan = readPlan(module, getArgument());
    if (failed(plan))
      return signalPassFailure();
    if (plan->dp == 1)
      return;
    const int64_t bucketSize = plan->ddpBucketSize;
    const bool overlap = plan->overlapGradReduce;
    auto entry = module.lookupSymbol<func::FuncOp>(names::kTrainStep);
    // With pipeline parallelism each stage syncs the gradients of its own parameter table.
    if (!tx::hasChunkFunctions(module)) {
      if (!entry) {
        module.emitError() << getArgument() << ": needs @" << names::kTrainStep
                           << " or pipeline chunk functions (run megac-autodiff first)";
        return signalPassFailure();
      }
      tx::ParamTable table(entry);
      SmallVector<GradBucket> buckets = addSyncFunction(module, names::kSyncGradients, table, bucketSize, {});
      if (overlap)
        placeGradSyncStarts(entry, table, buckets);
      return;
    }
    for (int64_t s = 0; s < plan->pp; ++s) {
      SmallVector<func::FuncOp> fns = tx::stageFunctions(module, s, plan->pp);
      tx::ParamTable table(fns);
      // Overlapped, a bucket is started by the backward of one chunk: none spans two.
      SmallVector<int64_t> chunkStarts;
      if (overlap)
        for (func::FuncOp fn : fns)
          if (!names::isBackwardHalf(fn.getName()))
            if (std::optional<int64_t> first = table.firstIn(fn))
              chunkStarts.push_back(*first);
      SmallVector<GradBucket> buckets =
          addSyncFunction(module, names::stageSyncName(s), table, bucketSize, chunkStarts);
      if (!overlap)
        continue;
      for (func::FuncOp fn : fns)
        if (names::isBackwardHalf(fn.getName()))
          placeGradSyncStarts(fn, table, buckets);
      if (failed(checkGradSyncStarts(module, s, fns, table, buckets)))
        return signalPassFailure();
    }
  }

  /// @`fnName`: the buckets over `table`, each closed where it would pass `bucketSize` elements or
  /// reach one of `boundaries` (table indices that start a new bucket).
  SmallVector<GradBucket> addSyncFunction(ModuleOp module, StringRef fnName, const tx::ParamTable &table,
                                          int64_t bucketSize, ArrayRef<int64_t> boundaries) {
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
    b.setInsertionPointToEnd(fn.addEntryBlock());
    auto gridRef = FlatSymbolRefAttr::get(b.getContext(), names::kGrid);
    auto dpAxis = b.getDenseI16ArrayAttr({static_cast<int16_t>(GridAxis::Dp)});
    for (auto [index, bucketRange] : llvm::enumerate(buckets)) {
      auto [first, end, n] = bucketRange;
      LLVM_DEBUG(llvm::dbgs() << DEBUG_TYPE ": @" << fnName << " bucket " << index << ": params [" << first << ", "
                              << end << "], " << n << " elements\n");
      auto type = RankedTensorType::get({n}, b.getF32Type());
      std::string name = "bucket_" + std::to_string(index);
      Value bucket = tx::GradBucketOp::create(b, NameLoc::get(b.getStringAttr(name), loc), type, first, end);
      auto sum =
          shard::AllReduceOp::create(b, NameLoc::get(b.getStringAttr(name + "_summed"), loc), type, gridRef, dpAxis,
                                     bucket, shard::ReductionKindAttr::get(b.getContext(), shard::ReductionKind::Sum));
      sum->setAttr(names::kRuleAttr, b.getStringAttr("data parallel: gradient bucket " + std::to_string(index) + " (" +
                                                     table[first].getName() + " .. " + table[end].getName() + ")"));
      tx::SetGradBucketOp::create(b, loc, sum, first, end);
    }
    func::ReturnOp::create(b, loc);
    return buckets;
  }
};

} // namespace
