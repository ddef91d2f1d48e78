// megac-expert-parallel: the experts split over the expert-parallel ranks, and each layer's rows
// in expert order exchanged all-to-all between its tx.moe_scatter and tx.moe_gather. With an
// expert tensor parallel size of 1 the experts' weights lose their tensor-parallel placement
// (each tp rank holds its experts whole); otherwise megac-tensor-parallel splits them as the
// frontend placed them (each expert's ffn, Megatron's default).
#include "megac/Plan/PlanIR.h"
#include "megac/Transforms/Passes.h"
#include "tx/TxLocations.h"
#include "tx/TxOps.h"
#include "tx/TxParamTable.h"
#include "tx/TxVerifyUtils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"

#include <algorithm>

namespace megac {
#define GEN_PASS_DEF_EXPERTPARALLEL
#include "megac/Transforms/Passes.h.inc"
} // namespace megac

using namespace mlir;
using namespace megac;
using tx::verify::shapeOf;
using tx::verify::shapeString;

namespace {

constexpr StringLiteral kPass = "megac-expert-parallel";

RankedTensorType withRows(Type type, int64_t rows) {
  auto t = cast<RankedTensorType>(type);
  SmallVector<int64_t> shape(t.getShape());
  shape[0] = rows;
  return RankedTensorType::get(shape, t.getElementType());
}

struct ExpertParallelPass : public megac::impl::ExpertParallelBase<ExpertParallelPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<ParallelPlan> plan = readPlan(module, getArgument());
    if (failed(plan))
      return signalPassFailure();
    if (plan->expertTensorParallel() == 1)
      module.walk([](tx::ParamOp p) {
        if (p.getRole() == tx::ParamRole::ExpertWeight)
          p.removeParallelDimAttr();
      });
    if (plan->ep == 1)
      return;
    if (failed(splitExpertWeights(module, plan->ep)))
      return signalPassFailure();
    retypeCallees(module);
    SmallVector<tx::MoeScatterOp> scatters;
    module.walk([&](tx::MoeScatterOp s) { scatters.push_back(s); });
    for (tx::MoeScatterOp s : scatters)
      if (failed(exchangeRows(s, plan->ep, plan->dp)))
        return signalPassFailure();
  }

  /// Each expert weight [E, ...] becomes ep rank 0's block of E / ep experts of the stacked tensor.
  LogicalResult splitExpertWeights(ModuleOp module, int64_t ep) {
    WalkResult walk = module.walk([&](tx::ParamOp p) {
      if (p.getRole() != tx::ParamRole::ExpertWeight)
        return WalkResult::advance();
      ArrayRef<int64_t> shape = p.getType().getShape();
      if (p.getFrozen()) {
        p.emitOpError() << kPass << ": expert weight " << p.getName()
                        << " is frozen (LoRA's base); splitting frozen experts over ep is not built yet";
        return WalkResult::interrupt();
      }
      if (p.getOffsets() || shape[0] % ep != 0) {
        p.emitOpError() << kPass << ": expert weight " << p.getName() << " " << shapeString(shape)
                        << " cannot be split into " << ep << " blocks of whole experts";
        return WalkResult::interrupt();
      }
      OpBuilder b(p);
      p.setOffsetsAttr(b.getDenseI64ArrayAttr(SmallVector<int64_t>(shape.size(), 0)));
      p.setFullShapeAttr(b.getDenseI64ArrayAttr(shape));
      p.getResult().setType(withRows(p.getType(), shape[0] / ep));
      return WalkResult::advance();
    });
    return failure(walk.wasInterrupted());
  }

  /// A function called with the experts' blocks takes them: its argument types follow the calls'
  /// (every call of a layer's function passes the same types).
  void retypeCallees(ModuleOp module) {
    SymbolTable symbols(module);
    module.walk([&](func::CallOp call) {
      auto callee = symbols.lookup<func::FuncOp>(call.getCallee());
      if (!callee || callee.isExternal())
        return;
      Block &entry = callee.getBody().front();
      for (auto [arg, operand] : llvm::zip_equal(entry.getArguments(), call.getOperands()))
        arg.setType(operand.getType());
      callee.setFunctionType(FunctionType::get(&getContext(), entry.getArgumentTypes(), callee.getResultTypes()));
    });
  }

  /// After `scatter`: the counts exchanged and the rows dispatched to their experts' ranks; the
  /// grouped GEMMs and the ops between them on the received rows; before each tx.moe_gather the
  /// results combined back into this rank's expert order.
  LogicalResult exchangeRows(tx::MoeScatterOp scatter, int64_t ep, int64_t dp) {
    Value rows = scatter.getResult();
    Value counts;
    for (Operation *user : rows.getUsers())
      if (auto g = dyn_cast<tx::GroupedMatmulOp>(user))
        counts = g.getCounts();
    if (!counts)
      return success(); // not an expert layer's rows (no grouped GEMM reads them)
    // The frontend's batch is every dp rank's (megac-shard-localize makes it one rank's); the
    // received rows are one rank's already: sized by its own tokens, and whole for localize.
    ArrayRef<int64_t> choices = shapeOf(scatter.getRows());
    if (choices[0] % dp != 0)
      return scatter.emitOpError() << kPass << ": " << choices[0] << " tokens do not split over " << dp
                                   << " data-parallel ranks";
    const int64_t experts = shapeOf(counts)[0], local = experts / ep, tokens = choices[0] / dp;
    // A token's top-k experts are distinct: one rank gets at most min(k, local) of its rows.
    const int64_t capacity = tokens * std::min(choices[1], local), received = ep * capacity;
    OpBuilder b(scatter->getContext());
    b.setInsertionPointAfter(scatter);
    auto ranks = b.getI64IntegerAttr(ep);
    Value exchanged = tx::MoeExchangeCountsOp::create(b, tx::derivedLoc(counts, "received_counts", kPass),
                                                      counts.getType(), counts, ranks);
    auto dispatch = tx::MoeDispatchOp::create(b, tx::derivedLoc(rows, tx::valueName(rows) + "_dispatched", kPass),
                                              withRows(rows.getType(), received), rows, counts, exchanged, ranks);
    rows.replaceAllUsesExcept(dispatch, dispatch);
    // The expert region: every op from the dispatched rows up to the gathers.
    SetVector<Operation *> region;
    SmallVector<Value> frontier = {dispatch};
    while (!frontier.empty()) {
      Value v = frontier.pop_back_val();
      for (OpOperand &use : llvm::make_early_inc_range(v.getUses())) {
        Operation *user = use.getOwner();
        if (auto gather = dyn_cast<tx::MoeGatherOp>(user)) {
          if (use.getOperandNumber() != gather.getInputMutable().getOperandNumber())
            return gather.emitOpError() << kPass << ": the experts' rows reach a gather as other than its input";
          b.setInsertionPoint(gather);
          Value back = tx::MoeCombineOp::create(b, tx::derivedLoc(v, tx::valueName(v) + "_combined", kPass),
                                                withRows(v.getType(), shapeOf(rows)[0]), v, counts, exchanged,
                                                ranks);
          use.set(back);
          continue;
        }
        if (!region.insert(user))
          continue;
        if (auto g = dyn_cast<tx::GroupedMatmulOp>(user)) {
          if (g.getCounts() != counts)
            return g.emitOpError() << kPass << ": a grouped GEMM of one layer's rows with other counts";
          g.getCountsMutable().assign(exchanged);
        } else if (user->getNumResults() == 0 || user->getNumRegions() != 0 ||
                   llvm::any_of(user->getResultTypes(), [&](Type t) {
                     auto r = dyn_cast<RankedTensorType>(t);
                     return !r || r.getRank() == 0 || r.getShape()[0] != shapeOf(rows)[0];
                   })) {
          return user->emitOpError() << kPass << ": between the experts' dispatch and combine only row-wise ops "
                                     << "(one output row per row in expert order) can run on the received rows";
        }
        for (Value r : user->getResults()) {
          r.setType(withRows(r.getType(), received));
          frontier.push_back(r);
        }
      }
    }
    return success();
  }
};

} // namespace
