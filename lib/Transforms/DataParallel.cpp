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
      SmallVector<Bucket> buckets = addSyncFunction(module, "sync_gradients", table);
      if (overlapGradReduce)
        placeStarts(entry, table, buckets);
    } else {
      if (overlapGradReduce) {
        module.emitError("megac-data-parallel: overlap-grad-reduce is not supported with pipeline parallelism yet "
                         "(the stages sync after their schedule)");
        return signalPassFailure();
      }
      for (int64_t s = 0; s < stages; ++s)
        addSyncFunction(module, "sync_gradients_stage" + std::to_string(s),
                        tx::parameterTable(tx::stageFunctions(module, s)));
    }
  }

  struct Bucket {
    int64_t first, last, elements; // parameter indices [first, last]
  };

  /// A tx.start_grad_sync after the last tx.param_grad of each bucket's parameters.
  void placeStarts(func::FuncOp entry, SmallVector<tx::ParamOp> &table, ArrayRef<Bucket> buckets) {
    DenseMap<Operation *, int64_t> indexOf;
    for (auto [i, p] : llvm::enumerate(table))
      indexOf[p] = static_cast<int64_t>(i);
    Block &body = entry.getBody().front();
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
      if (auto g = dyn_cast<tx::ParamGradOp>(op)) {
        auto it = indexOf.find(g.getParam().getDefiningOp());
        if (it != indexOf.end())
          lastGrad[it->second] = &op;
      }
    for (const Bucket &bucket : buckets) {
      Operation *after = nullptr;
      for (int64_t i = bucket.first; i <= bucket.last; ++i)
        if (lastGrad[i] && (!after || after->isBeforeInBlock(lastGrad[i])))
          after = lastGrad[i];
      OpBuilder b(entry.getContext());
      if (after)
        b.setInsertionPointAfter(after);
      else // no gradient in backward at all: final from the start
        b.setInsertionPointToStart(&body);
      tx::StartGradSyncOp::create(b, entry.getLoc(), bucket.first, bucket.last);
    }
  }

  SmallVector<Bucket> addSyncFunction(ModuleOp module, StringRef name, SmallVector<tx::ParamOp> table) {
    // Buckets from the last parameter back: backward finishes those gradients first.
    SmallVector<Bucket> buckets;
    int64_t last = static_cast<int64_t>(table.size()) - 1, elements = 0;
    for (int64_t i = last; i >= 0; --i) {
      int64_t n = table[i].getType().getNumElements();
      if (elements > 0 && elements + n > bucketSize) {
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
