#include "GradSyncPlacement.h"
#include "tx/TxChunks.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace megac;

LogicalResult megac::checkGradSyncStarts(ModuleOp module, int64_t stage, ArrayRef<func::FuncOp> fns,
                                       const tx::ParamTable &table, ArrayRef<GradBucket> buckets) {
  // Each gradient's table index and the function that makes it, found once for all buckets.
  SmallVector<std::pair<int64_t, func::FuncOp>> grads;
  for (func::FuncOp fn : fns)
    fn.walk([&](tx::ParamGradOp g) {
      if (std::optional<int64_t> i = table.find(g.getParam().getDefiningOp<tx::ParamOp>()))
        grads.push_back({*i, fn});
    });
  for (const GradBucket &bucket : buckets) {
    func::FuncOp starter;
    int64_t starts = 0;
    for (func::FuncOp fn : fns)
      for (tx::StartGradSyncOp op : fn.getOps<tx::StartGradSyncOp>())
        if (static_cast<int64_t>(op.getFirst()) == bucket.first && static_cast<int64_t>(op.getLast()) == bucket.last)
          starter = fn, ++starts;
    bool complete = starts == 1;
    for (auto [i, fn] : grads)
      if (i >= bucket.first && i <= bucket.last && fn != starter)
        complete = false;
    if (!complete)
      return module.emitError() << "megac-data-parallel: stage " << stage << "'s gradient bucket params["
                                << bucket.first << ", " << bucket.last << "] is started " << starts
                                << " times, or not by the one chunk backward that makes all its gradients";
  }
  return success();
}

void megac::hoistParamGrads(func::FuncOp fn) {
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
}

void megac::placeGradSyncStarts(func::FuncOp fn, const tx::ParamTable &table, ArrayRef<GradBucket> buckets) {
  hoistParamGrads(fn);
  Block &body = fn.getBody().front();
  SmallVector<Operation *> lastGrad(table.size(), nullptr);
  for (Operation &op : body)
    if (auto g = dyn_cast<tx::ParamGradOp>(op))
      if (std::optional<int64_t> i = table.find(g.getParam().getDefiningOp<tx::ParamOp>()))
        lastGrad[*i] = &op;
  // A chunk's backward starts only its own buckets; @train_step all of them (a bucket with no
  // gradient in backward is final from the start).
  const bool chunk = tx::chunkOf(fn).has_value();
  for (const GradBucket &bucket : buckets) {
    Operation *after = nullptr;
    for (int64_t i = bucket.first; i <= bucket.last; ++i)
      if (lastGrad[i] && (!after || after->isBeforeInBlock(lastGrad[i])))
        after = lastGrad[i];
    if (!after && chunk)
      continue;
    OpBuilder b(fn.getContext());
    if (after)
      b.setInsertionPointAfter(after);
    else
      b.setInsertionPointToStart(&body);
    tx::StartGradSyncOp::create(b, fn.getLoc(), bucket.first, bucket.last,
                                bucket.shardNumel ? b.getI64IntegerAttr(bucket.shardNumel) : IntegerAttr());
  }
}
