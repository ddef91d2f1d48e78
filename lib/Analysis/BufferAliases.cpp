#include "megac/Analysis/BufferAliases.h"

#include "tx/TxOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

using namespace mlir;

bool megac::isView(Operation &op) {
  return isa<tx::ReshapeOp, tx::ParamOp, tx::GradBucketAddOp, tx::BucketParamOp, tx::LocalParamShardOp>(op);
}

Value megac::aliasRoot(Value v) {
  while (true) {
    if (auto reshape = v.getDefiningOp<tx::ReshapeOp>())
      v = reshape.getInput();
    else if (auto add = v.getDefiningOp<tx::GradBucketAddOp>())
      v = add.getBucket();
    else if (auto view = v.getDefiningOp<tx::BucketParamOp>())
      v = view.getBucket();
    else
      return v;
  }
}
