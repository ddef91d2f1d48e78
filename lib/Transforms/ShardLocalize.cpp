// megac-shard-localize: the types of megac-shard-propagate's IR made per rank along the data-
// parallel axis: every dimension split over dp divided by dp (the batch of one rank). Data
// parallelism needs no collective inside a step (its gradient sums are megac-data-parallel's),
// so this is all it takes. Tensor parallelism is still megac-tensor-parallel's, which derives
// its own shardings: the propagated ones are removed here.
#include "megac/Plan/PlanIR.h"
#include "megac/Transforms/Passes.h"
#include "tx/TxNames.h"
#include "tx/TxOps.h"

#include "mlir/IR/Builders.h"

namespace megac {
#define GEN_PASS_DEF_SHARDLOCALIZE
#include "megac/Transforms/Passes.h.inc"
} // namespace megac

using namespace mlir;
using namespace megac;

namespace {

/// `type` with every dimension that `sharding` splits over dp divided by `dp`; null when a
/// dimension does not divide.
RankedTensorType localType(RankedTensorType type, tx::ShardingAttr sharding, int64_t dp) {
  if (!sharding)
    return type;
  SmallVector<int64_t> shape(type.getShape());
  for (auto [d, axes] : llvm::enumerate(sharding.getDims())) {
    if (d >= shape.size())
      return {};
    for (Attribute a : cast<ArrayAttr>(axes))
      if (cast<StringAttr>(a).getValue() == names::kDataAxis) {
        if (shape[d] % dp != 0)
          return {};
        shape[d] /= dp;
      }
  }
  return RankedTensorType::get(shape, type.getElementType(), type.getEncoding());
}

struct ShardLocalizePass : public megac::impl::ShardLocalizeBase<ShardLocalizePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<ParallelPlan> plan = readPlan(module, getArgument());
    if (failed(plan))
      return signalPassFailure();
    bool failedToDivide = false;
    auto localize = [&](Value v, tx::ShardingAttr sharding, Operation *where) {
      auto type = dyn_cast<RankedTensorType>(v.getType());
      if (!type || plan->dp == 1)
        return;
      RankedTensorType local = localType(type, sharding, plan->dp);
      if (!local) {
        where->emitError() << getArgument() << ": a dimension split over dp is not a multiple of dp " << plan->dp;
        failedToDivide = true;
        return;
      }
      v.setType(local);
    };
    for (auto fn : module.getOps<func::FuncOp>()) {
      if (fn.isExternal())
        continue;
      Block &body = fn.getBody().front();
      for (BlockArgument arg : body.getArguments()) {
        localize(arg, fn.getArgAttrOfType<tx::ShardingAttr>(arg.getArgNumber(), names::kShardingAttr), fn);
        fn.removeArgAttr(arg.getArgNumber(), names::kShardingAttr);
      }
      fn.walk([&](Operation *op) {
        if (Attribute recorded = op->getAttr(names::kShardingAttr)) {
          auto perResult = dyn_cast<ArrayAttr>(recorded);
          for (OpResult r : op->getResults())
            localize(r, perResult ? dyn_cast<tx::ShardingAttr>(perResult[r.getResultNumber()])
                                  : dyn_cast<tx::ShardingAttr>(recorded),
                     op);
          op->removeAttr(names::kShardingAttr);
        }
        op->removeAttr(names::kKeptShardingAttr); // megac-data-parallel keeps it so, from the plan
      });
      SmallVector<Type> results;
      for (unsigned i = 0; i < fn.getNumResults(); ++i) {
        fn.removeResultAttr(i, StringAttr::get(&getContext(), names::kShardingAttr));
        results.push_back(body.getTerminator()->getOperand(i).getType());
      }
      fn.setFunctionType(FunctionType::get(&getContext(), body.getArgumentTypes(), results));
    }
    if (failedToDivide)
      signalPassFailure();
  }
};

} // namespace
