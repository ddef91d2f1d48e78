// Verifiers of the vocabulary-parallel cross-entropy ops: per-token statistics have the
// logits' shape without the vocabulary dimension.
#include "tx/TxOps.h"
#include "tx/TxVerifyUtils.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"

using namespace mlir;
using namespace megac::tx;
using namespace megac::tx::verify;

static LogicalResult expectPerToken(Operation *op, StringRef what, Value stat, Value logits) {
  ArrayRef<int64_t> l = shapeOf(logits);
  if (l.size() < 2)
    return op->emitOpError() << "logits must be [..., vocab] with rank >= 2, found " << shapeString(l);
  return expectShape(op, what, shapeOf(stat), l.drop_back(), "the logits' shape without the vocab dimension");
}

LogicalResult LogitsMaxOp::verify() { return expectPerToken(*this, "result", getResult(), getLogits()); }

LogicalResult LogitsSumExpOp::verify() {
  if (failed(expectPerToken(*this, "max", getMax(), getLogits())))
    return failure();
  return expectPerToken(*this, "result", getResult(), getLogits());
}

LogicalResult TargetLogitOp::verify() {
  if (failed(expectPerToken(*this, "labels", getLabels(), getLogits())))
    return failure();
  return expectPerToken(*this, "result", getResult(), getLogits());
}

LogicalResult WaitCollectiveOp::verify() {
  Operation *start = getPending().getDefiningOp();
  if (!start || !isa<shard::AllGatherOp, shard::ReduceScatterOp, shard::AllReduceOp>(start))
    return emitOpError() << "waits for a collective (shard.all_gather, shard.reduce_scatter or shard.all_reduce), "
                            "not for " << (start ? start->getName().getStringRef() : StringRef("a block argument"));
  if (start->getBlock() != (*this)->getBlock() || !start->isBeforeInBlock(*this))
    return emitOpError() << "must follow the collective it waits for in its block";
  if (llvm::count_if(getPending().getUsers(), [](Operation *u) { return isa<WaitCollectiveOp>(u); }) != 1)
    return emitOpError() << "is one of several waits for one collective; a collective is waited for once";
  return success();
}

LogicalResult CrossEntropyFromStatsOp::verify() {
  for (Value v : {getSumExp(), getTarget()})
    if (failed(expectShape(*this, "statistic", shapeOf(v), shapeOf(getMax()), "the shape of max")))
      return failure();
  if (bool(getLabels()) != bool(getIgnoreIndexAttr()))
    return emitOpError() << "takes the labels with ignore_index and only then";
  if (getLabels() && failed(expectShape(*this, "labels", shapeOf(getLabels()), shapeOf(getMax()), "the shape of max")))
    return failure();
  return verifyIgnoreIndex(*this, getIgnoreIndexAttr());
}

LogicalResult CrossEntropyGradFromStatsOp::verify() {
  if (failed(verifyIgnoreIndex(*this, getIgnoreIndexAttr())) ||
      failed(expectPerToken(*this, "labels", getLabels(), getLogits())) ||
      failed(expectPerToken(*this, "max", getMax(), getLogits())) ||
      failed(expectPerToken(*this, "sum_exp", getSumExp(), getLogits())))
    return failure();
  return expectShape(*this, "result", shapeOf(getResult()), shapeOf(getLogits()), "the shape of logits");
}

/// `op` reaches `part` elements at `offset` of a flat bucket: they must lie inside it.
static LogicalResult expectInsideBucket(Operation *op, StringRef what, Value bucket, Value part, int64_t offset) {
  const int64_t n = cast<RankedTensorType>(bucket.getType()).getNumElements();
  const int64_t m = cast<RankedTensorType>(part.getType()).getNumElements();
  if (offset < 0 || m > n || offset > n - m)
    return op->emitOpError() << what << " " << m << " elements at offset " << offset << " of a bucket of " << n
                             << " elements";
  return success();
}

LogicalResult GradBucketAddOp::verify() {
  return expectInsideBucket(*this, "adds", getBucket(), getGrad(), getOffset());
}

LogicalResult BucketParamOp::verify() {
  return expectInsideBucket(*this, "views", getBucket(), getResult(), getOffset());
}
