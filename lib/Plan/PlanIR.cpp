#include "megac/Plan/PlanIR.h"
#include "tx/TxNames.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/Support/CheckedArithmetic.h"

using namespace mlir;
using namespace megac;

namespace {

constexpr GridAxis kAxes[] = {GridAxis::Pp, GridAxis::Dp, GridAxis::Tp};

// Keys of the plan dictionary: Megatron's flag names.
constexpr StringLiteral kSequenceParallel = "sequence_parallel";
constexpr StringLiteral kVirtualStages = "num_virtual_stages_per_pipeline_rank";
constexpr StringLiteral kSchedule = "pipeline_schedule";
constexpr StringLiteral kLayout = "pipeline_layout";
constexpr StringLiteral kMicrobatches = "num_microbatches";
constexpr StringLiteral kBucketSize = "ddp_bucket_size";
constexpr StringLiteral kOverlapGradReduce = "overlap_grad_reduce";
constexpr StringLiteral kVocabDivisibleBy = "make_vocab_size_divisible_by";

} // namespace

StringRef megac::gridAxisName(GridAxis axis) {
  switch (axis) {
  case GridAxis::Pp:
    return names::kPipelineAxis;
  case GridAxis::Dp:
    return names::kDataAxis;
  case GridAxis::Tp:
    return names::kTensorAxis;
  }
  llvm_unreachable("a grid axis");
}

void megac::recordPlan(ModuleOp module, const ParallelPlan &plan) {
  OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
  auto grid = shard::GridOp::create(b, module.getLoc(), b.getStringAttr(names::kGrid),
                                    b.getDenseI64ArrayAttr({plan.pp, plan.dp, plan.tp}));
  SmallVector<Attribute> axes;
  for (GridAxis axis : kAxes)
    axes.push_back(b.getStringAttr(gridAxisName(axis)));
  grid->setAttr(names::kAxesAttr, b.getArrayAttr(axes));
  SmallVector<NamedAttribute> entries = {
      b.getNamedAttr(kSequenceParallel, b.getBoolAttr(plan.sp)),
      b.getNamedAttr(kVocabDivisibleBy, b.getI64IntegerAttr(plan.makeVocabSizeDivisibleBy)),
      b.getNamedAttr(kBucketSize, b.getI64IntegerAttr(plan.ddpBucketSize)),
      b.getNamedAttr(kOverlapGradReduce, b.getBoolAttr(plan.overlapGradReduce))};
  if (plan.pp > 1)
    entries.append({b.getNamedAttr(kVirtualStages, b.getI64IntegerAttr(plan.vpp)),
                    b.getNamedAttr(kSchedule, b.getStringAttr(plan.pipelineSchedule)),
                    b.getNamedAttr(kLayout, b.getDenseI64ArrayAttr(plan.pipelineLayout)),
                    b.getNamedAttr(kMicrobatches, b.getI64IntegerAttr(plan.numMicrobatches))});
  grid->setAttr(names::kPlanAttr, b.getDictionaryAttr(entries));
}

FailureOr<ParallelPlan> megac::readPlan(ModuleOp module, StringRef pass) {
  auto fail = [&](const Twine &what) {
    module.emitError() << pass << ": " << what;
    return failure();
  };
  auto grid = module.lookupSymbol<shard::GridOp>(names::kGrid);
  if (!grid)
    return fail("the module has no shard.grid @" + names::kGrid.str() +
                "; the frontend records the plan there (megac compile --dump-ir's first file has it)");
  ArrayRef<int64_t> shape = grid.getShape();
  auto axes = grid->getAttrOfType<ArrayAttr>(names::kAxesAttr);
  auto plan = grid->getAttrOfType<DictionaryAttr>(names::kPlanAttr);
  if (!axes || !plan || shape.size() != std::size(kAxes) || axes.size() != shape.size())
    return fail("@" + names::kGrid.str() + " must have 3 axes and the attributes " + names::kAxesAttr.str() + " and " +
                names::kPlanAttr.str());
  for (auto [i, axis] : llvm::enumerate(kAxes)) {
    auto name = dyn_cast<StringAttr>(axes[i]);
    if (!name || name.getValue() != gridAxisName(axis) || shape[i] < 1)
      return fail("@" + names::kGrid.str() + "'s axis " + Twine(i) + " must be \"" + gridAxisName(axis) +
                  "\" of size >= 1 (Megatron's rank order: pp, dp, tp)");
  }
  ParallelPlan result;
  result.pp = shape[0], result.dp = shape[1], result.tp = shape[2];
  auto integer = [&](StringRef key, int64_t &out) {
    if (auto v = plan.getAs<IntegerAttr>(key))
      out = v.getInt();
  };
  auto boolean = [&](StringRef key, bool &out) {
    if (auto v = plan.getAs<BoolAttr>(key))
      out = v.getValue();
  };
  boolean(kSequenceParallel, result.sp);
  boolean(kOverlapGradReduce, result.overlapGradReduce);
  integer(kVocabDivisibleBy, result.makeVocabSizeDivisibleBy);
  integer(kBucketSize, result.ddpBucketSize);
  integer(kVirtualStages, result.vpp);
  integer(kMicrobatches, result.numMicrobatches);
  if (auto schedule = plan.getAs<StringAttr>(kSchedule))
    result.pipelineSchedule = schedule.str();
  if (auto layout = plan.getAs<DenseI64ArrayAttr>(kLayout))
    result.pipelineLayout.assign(layout.asArrayRef().begin(), layout.asArrayRef().end());
  if (result.pp > 1 && (result.vpp < 1 || result.numMicrobatches < 1 || result.pipelineSchedule.empty()))
    return fail("pp is " + Twine(result.pp) + ", so the plan needs " + kVirtualStages.str() + " >= 1 (got " +
                Twine(result.vpp) + "), " + kMicrobatches.str() + " >= 1 (got " + Twine(result.numMicrobatches) +
                ") and a " + kSchedule.str());
  std::optional<int64_t> chunks = llvm::checkedMul(result.pp, result.vpp);
  if (!chunks)
    return fail("pp x " + kVirtualStages.str() + " = " + Twine(result.pp) + " x " + Twine(result.vpp) +
                " overflows; give sizes a machine can run");
  if (!result.pipelineLayout.empty() && static_cast<int64_t>(result.pipelineLayout.size()) != *chunks)
    return fail(kLayout.str() + " has " + Twine(result.pipelineLayout.size()) + " entries; it needs pp x " +
                kVirtualStages.str() + " = " + Twine(*chunks) + " (one per chunk)");
  if (result.ddpBucketSize < 1)
    return fail(kBucketSize.str() + " must be >= 1, got " + Twine(result.ddpBucketSize));
  return result;
}
