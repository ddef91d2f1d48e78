#include "megac/Plan/PlanLimits.h"
#include "megac/Limits.h"
#include "pipe/schedule/Schedule.h"

#include "llvm/ADT/Twine.h"
#include "llvm/Support/CheckedArithmetic.h"

using namespace llvm;
using namespace megac;

const PlanFieldNames megac::kPlanFlagNames = {
    "--pipeline-model-parallel-size",
    "--data-parallel-size",
    "--tensor-model-parallel-size",
    "--expert-model-parallel-size (--ep)",
    "--num-virtual-stages-per-pipeline-rank (--vpp)",
    "--num-layers-per-virtual-pipeline-stage",
    "--pipeline-layout",
    "the number of microbatches (--global-batch-size / (--micro-batch-size x --data-parallel-size))",
    "--ddp-bucket-size",
    "--make-vocab-size-divisible-by"};

Error megac::sizeOutOfRange(const Twine &name, int64_t value, int64_t low, int64_t limit, StringRef why,
                            StringRef fix) {
  std::string message = (name + " is " + Twine(value) + "; it must be between " + Twine(low) + " and " + Twine(limit))
                            .str();
  if (!why.empty())
    message += " (" + why.str() + ")";
  if (!fix.empty())
    message += "; " + fix.str();
  return createStringError(inconvertibleErrorCode(), message);
}

static Error fail(const Twine &message) { return createStringError(inconvertibleErrorCode(), message); }

/// "2,3,3", or the first entries and how many there are.
static std::string shortList(ArrayRef<int64_t> values) {
  constexpr size_t kShown = 16;
  std::string text;
  for (size_t i = 0; i < values.size() && i < kShown; ++i)
    text += (i ? "," : "") + std::to_string(values[i]);
  if (values.size() > kShown)
    text += ",... (" + std::to_string(values.size()) + " entries)";
  return text;
}

Error megac::checkGridLimits(const ParallelPlan &plan, const PlanFieldNames &names) {
  using namespace limits;
  for (auto [name, size] : {std::pair{names.pp, plan.pp}, {names.dp, plan.dp}, {names.tp, plan.tp}})
    if (size < 1 || size > kWorldSize)
      return sizeOutOfRange(name, size, 1, kWorldSize, "megac's largest world is 2^20 ranks");
  std::optional<int64_t> world = checkedMul(plan.pp, plan.dp);
  world = world ? checkedMul(*world, plan.tp) : world;
  if (!world || *world > kWorldSize)
    return fail("pp " + Twine(plan.pp) + " x dp " + Twine(plan.dp) + " x tp " + Twine(plan.tp) + " is more than the " +
                Twine(kWorldSize) + " ranks (2^20) megac supports; lower " + names.pp + ", " + names.dp + " or " +
                names.tp);
  // Expert parallelism is carved out of dp (Megatron's expert rank order: ep inside dp).
  if (plan.ep < 1 || plan.ep > plan.dp || plan.dp % plan.ep != 0)
    return fail(names.ep + " is " + Twine(plan.ep) + "; it must divide " + names.dp + " (" + Twine(plan.dp) +
                "): the expert-parallel ranks are groups of data-parallel ranks; use a divisor of " + Twine(plan.dp) +
                " or raise " + names.dp);
  return Error::success();
}

Error megac::checkPlanLimits(const ParallelPlan &plan, const PlanFieldNames &names) {
  using namespace limits;
  if (Error e = checkGridLimits(plan, names))
    return e;
  if (plan.vpp < 1 || plan.vpp > kVirtualStages)
    return sizeOutOfRange(names.vpp, plan.vpp, 1, kVirtualStages, "chunks per pipeline rank");
  if (plan.layersPerVirtualStage < 0 || plan.layersPerVirtualStage > kLayers)
    return sizeOutOfRange(names.layersPerVirtualStage, plan.layersPerVirtualStage, 1, kLayers,
                          "at most megac's largest num_layers");
  if (plan.pipelineLayout.size() > static_cast<size_t>(kWorldSize * kVirtualStages))
    return fail(names.layout + " has " + Twine(plan.pipelineLayout.size()) +
                " entries; it needs one per chunk (pipeline size x vpp)");
  for (int64_t layers : plan.pipelineLayout) {
    if (layers < 1)
      return fail(names.layout + " " + shortList(plan.pipelineLayout) + ": every chunk needs at least one layer");
    if (layers > kLayers)
      return fail(names.layout + " " + shortList(plan.pipelineLayout) + ": a chunk of " + Twine(layers) +
                  " layers is more than the " + Twine(kLayers) + " layers megac compiles");
  }
  if (plan.numMicrobatches < 0 || plan.numMicrobatches > kMicrobatches)
    return sizeOutOfRange(names.microbatches, plan.numMicrobatches, 1, kMicrobatches,
                          "per iteration and data-parallel rank");
  // pp x vpp x microbatches, each bounded above (the product < 2^47): the schedule's size.
  if (plan.pp > 1 && plan.numMicrobatches > 0 &&
      plan.pp * plan.vpp * plan.numMicrobatches > pipeline::kMaxScheduleSlots)
    return fail("pp " + Twine(plan.pp) + " x vpp " + Twine(plan.vpp) + " x " + Twine(plan.numMicrobatches) +
                " microbatches = " + Twine(plan.pp * plan.vpp * plan.numMicrobatches) +
                " (chunk, microbatch) pairs is more than the " + Twine(pipeline::kMaxScheduleSlots) +
                " a pipeline schedule may have; lower " + names.microbatches + ", " + names.vpp + " or " + names.pp);
  if (plan.ddpBucketSize < 1 || plan.ddpBucketSize > kBucketSize)
    return sizeOutOfRange(names.bucketSize, plan.ddpBucketSize, 1, kBucketSize, "elements per gradient bucket");
  if (plan.makeVocabSizeDivisibleBy < 1 || plan.makeVocabSizeDivisibleBy > kVocabDivisor)
    return sizeOutOfRange(names.vocabDivisor, plan.makeVocabSizeDivisibleBy, 1, kVocabDivisor);
  return Error::success();
}
