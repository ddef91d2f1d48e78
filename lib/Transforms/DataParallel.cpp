// megac-data-parallel: the gradient all-reduce over data-parallel ranks, in flat buckets.
#include "megac/Transforms/Passes.h"
#include "tx/TxOps.h"
#include "tx/TxParamTable.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"

namespace megac {
#define GEN_PASS_DEF_DATAPARALLEL
#include "megac/Transforms/Passes.h.inc"
} // namespace megac

using namespace mlir;
using namespace megac;

namespace {

struct DataParallelPass : public megac::impl::DataParallelBase<DataParallelPass> {
  using DataParallelBase::DataParallelBase;

  void runOnOperation() override {
    if (dp == 1)
      return;
    ModuleOp module = getOperation();
    auto entry = module.lookupSymbol<func::FuncOp>("train_step");
    int64_t stages = tx::pipelineStages(module);
    if ((!entry && stages == 1) || !module.lookupSymbol<shard::GridOp>("grid")) {
      module.emitError("megac-data-parallel: needs @train_step (or pipeline chunk functions) and @grid (run "
                       "megac-autodiff and megac-tensor-parallel first)");
      return signalPassFailure();
    }
    if (bucketSize < 1) {
      module.emitError() << "megac-data-parallel: bucket-size must be >= 1, got " << bucketSize;
      return signalPassFailure();
    }
    // With pipeline parallelism each stage syncs the gradients of its own parameter table.
    if (stages == 1) {
      SmallVector<tx::ParamOp> table = tx::parameterTable(entry);
      SmallVector<Bucket> buckets = addSyncFunction(module, "sync_gradients", table, {});
      if (overlapGradReduce)
        placeStarts(entry, table, buckets);
      return;
    }
    for (int64_t s = 0; s < stages; ++s) {
      SmallVector<func::FuncOp> fns = tx::stageFunctions(module, s);
      SmallVector<tx::ParamOp> table = tx::parameterTable(fns);
      // Overlapped, a bucket is started by the backward of one chunk: none spans two.
      SmallVector<int64_t> chunkStarts;
      if (overlapGradReduce)
        for (func::FuncOp fn : fns)
          if (!fn.getName().ends_with("_backward"))
            if (std::optional<int64_t> first = firstIndex(fn, table))
              chunkStarts.push_back(*first);
      SmallVector<Bucket> buckets =
          addSyncFunction(module, "sync_gradients_stage" + std::to_string(s), table, chunkStarts);
      if (!overlapGradReduce)
        continue;
      for (func::FuncOp fn : fns)
        if (fn.getName().ends_with("_backward"))
          placeStarts(fn, table, buckets);
      if (failed(checkStarts(module, s, fns, table, buckets)))
        return signalPassFailure();
    }
  }

  struct Bucket {
    int64_t first, last, elements; // parameter indices [first, last]
  };

  /// Each bucket of a stage is started exactly once, by the chunk backward that makes all of its
  /// gradients: otherwise it would never be summed, or be summed before it is final.
  static LogicalResult checkStarts(ModuleOp module, int64_t stage, ArrayRef<func::FuncOp> fns,
                                   ArrayRef<tx::ParamOp> table, ArrayRef<Bucket> buckets) {
    for (const Bucket &bucket : buckets) {
      func::FuncOp starter;
      int64_t starts = 0;
      for (func::FuncOp fn : fns)
        for (tx::StartGradSyncOp op : fn.getOps<tx::StartGradSyncOp>())
          if (static_cast<int64_t>(op.getFirst()) == bucket.first && static_cast<int64_t>(op.getLast()) == bucket.last)
            starter = fn, ++starts;
      bool complete = starts == 1;
      for (func::FuncOp fn : fns)
        fn.walk([&](tx::ParamGradOp g) {
          std::optional<int64_t> i = indexIn(table, g.getParam().getDefiningOp<tx::ParamOp>());
          if (i && *i >= bucket.first && *i <= bucket.last && fn != starter)
            complete = false;
        });
      if (!complete)
        return module.emitError() << "megac-data-parallel: stage " << stage << "'s gradient bucket params["
                                  << bucket.first << ", " << bucket.last << "] is started " << starts
                                  << " times, or not by the one chunk backward that makes all its gradients";
    }
    return success();
  }

  /// Where `p` is in `table`: the entry with its checkpoint name and block offsets.
  static std::optional<int64_t> indexIn(ArrayRef<tx::ParamOp> table, tx::ParamOp p) {
    for (auto [i, entry] : llvm::enumerate(table)) {
      tx::ParamOp e = entry; // ODS accessors are not const
      if (e.getName() == p.getName() && e.getOffsets() == p.getOffsets())
        return static_cast<int64_t>(i);
    }
    return std::nullopt;
  }

  /// The first table index of the parameters `fn` uses.
  static std::optional<int64_t> firstIndex(func::FuncOp fn, ArrayRef<tx::ParamOp> table) {
    std::optional<int64_t> first;
    fn.walk([&](tx::ParamOp p) {
      if (std::optional<int64_t> i = indexIn(table, p); i && (!first || *i < *first))
        first = i;
    });
    return first;
  }

  /// A tx.start_grad_sync after the last tx.param_grad of each bucket whose parameters get
  /// their gradients in `fn` (@train_step, or one pipeline chunk's backward).
  void placeStarts(func::FuncOp fn, ArrayRef<tx::ParamOp> table, ArrayRef<Bucket> buckets) {
    Block &body = fn.getBody().front();
    // Autodiff adds the gradients into the parameters at the end of backward; each can go as
    // soon as its value exists (nothing reads the gradients before the sync). In reverse, so
    // that accumulations moved behind the same op keep their order (and their rounding).
    SmallVector<tx::ParamGradOp> grads(body.getOps<tx::ParamGradOp>());
    for (tx::ParamGradOp g : llvm::reverse(grads)) {
      Operation *def = g.getGrad().getDefiningOp(), *param = g.getParam().getDefiningOp();
      if (!def || def->getBlock() != &body || (param && param->getBlock() == &body && def->isBeforeInBlock(param)))
        continue;
      g->moveAfter(def);
    }
    SmallVector<Operation *> lastGrad(table.size(), nullptr);
    for (Operation &op : body)
      if (auto g = dyn_cast<tx::ParamGradOp>(op))
        if (std::optional<int64_t> i = indexIn(table, g.getParam().getDefiningOp<tx::ParamOp>()))
          lastGrad[*i] = &op;
    for (const Bucket &bucket : buckets) {
      Operation *after = nullptr;
      for (int64_t i = bucket.first; i <= bucket.last; ++i)
        if (lastGrad[i] && (!after || after->isBeforeInBlock(lastGrad[i])))
          after = lastGrad[i];
      // A chunk's backward starts only its own buckets; @train_step all of them (a bucket with
      // no gradient in backward is final from the start).
      bool chunk = fn->hasAttr("megac.chunk");
      if (!after && chunk)
        continue;
      OpBuilder b(fn.getContext());
      if (after)
        b.setInsertionPointAfter(after);
      else
        b.setInsertionPointToStart(&body);
      tx::StartGradSyncOp::create(b, fn.getLoc(), bucket.first, bucket.last);
    }
  }

  /// @`name`: the buckets over `table`, each closed where it would pass bucket-size elements or
  /// reach one of `boundaries` (table indices that start a new bucket).
  SmallVector<Bucket> addSyncFunction(ModuleOp module, StringRef name, SmallVector<tx::ParamOp> table,
                                      ArrayRef<int64_t> boundaries) {
    // Buckets from the last parameter back: backward finishes those gradients first.
    SmallVector<Bucket> buckets;
    int64_t last = static_cast<int64_t>(table.size()) - 1, elements = 0;
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
    Location loc = module.getLoc();
    auto fn = func::FuncOp::create(b, loc, name, b.getFunctionType({}, {}));
    b.setInsertionPointToEnd(fn.addEntryBlock());
    auto gridRef = FlatSymbolRefAttr::get(b.getContext(), "grid");
    for (auto [index, bucketRange] : llvm::enumerate(buckets)) {
      auto [first, end, n] = bucketRange;
      auto type = RankedTensorType::get({n}, b.getF32Type());
      Value bucket = tx::GradBucketOp::create(b, loc, type, first, end);
      auto sum = shard::AllReduceOp::create(b, loc, type, gridRef, b.getDenseI16ArrayAttr({0}), bucket,
                                            shard::ReductionKindAttr::get(b.getContext(), shard::ReductionKind::Sum));
      sum->setAttr("megac.rule", b.getStringAttr("data parallel: gradient bucket " + std::to_string(index) + " (" +
                                                 table[first].getName() + " .. " + table[end].getName() + ")"));
      tx::SetGradBucketOp::create(b, loc, sum, first, end);
    }
    func::ReturnOp::create(b, loc);
    return buckets;
  }
};

} // namespace
