#include "megac/Plan/PlanIR.h"
#include "megac/Limits.h"
#include "megac/Plan/LoraFlags.h"
#include "megac/Plan/PlanLimits.h"
#include "megac/Plan/RecomputeFlags.h"
#include "megac/Plan/ShardingFlags.h"
#include "tx/TxNames.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstdio>

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
// Sharded data parallelism, recorded only when something is sharded.
constexpr StringLiteral kShardingStrategy = "data_parallel_sharding_strategy";
constexpr StringLiteral kShardDegree = "data_parallel_shard_degree";
constexpr StringLiteral kOverlapParamGather = "overlap_param_gather";
constexpr StringLiteral kReshardAfterForward = "fsdp_reshard_after_forward";
constexpr StringLiteral kOffloadFraction = "optimizer_offload_fraction";
// Activation recomputation, recorded only when asked for.
constexpr StringLiteral kRecomputeGranularity = "recompute_granularity";
constexpr StringLiteral kRecomputeMethod = "recompute_method";
constexpr StringLiteral kRecomputeNumLayers = "recompute_num_layers";
constexpr StringLiteral kRecomputeModuleList = "recompute_modules";
constexpr StringLiteral kDistributeSaved = "distribute_saved_activations";
// 16-bit activations (megac compile --bf16 / --fp16), recorded only when not fp32.
constexpr StringLiteral kPrecision = "activation_precision";
// LoRA (megac compile --lora-rank), recorded only when on: PEFT's names.
constexpr StringLiteral kLoraRank = "lora_rank";
constexpr StringLiteral kLoraAlpha = "lora_alpha";
constexpr StringLiteral kLoraDropout = "lora_dropout";
constexpr StringLiteral kLoraModules = "lora_target_modules";
constexpr StringLiteral kUseRslora = "use_rslora";
constexpr StringLiteral kQloraBlock = "qlora_block_size"; // recorded only with --qlora
constexpr StringRef kPlanKeys[] = {
    kSequenceParallel,    kVirtualStages,        kSchedule,           kLayout,
    kMicrobatches,        kBucketSize,           kOverlapGradReduce,  kVocabDivisibleBy,
    kShardingStrategy,    kShardDegree,          kOverlapParamGather, kReshardAfterForward,
    kOffloadFraction,     kRecomputeGranularity, kRecomputeMethod,    kRecomputeNumLayers,
    kRecomputeModuleList, kDistributeSaved,      kPrecision,          kLoraRank,
    kLoraAlpha,           kLoraDropout,          kLoraModules,        kUseRslora,
    kQloraBlock};

// What limit errors call each field: the grid's axes and the plan's keys.
const PlanFieldNames &irNames() {
  static const std::string plan = names::kPlanAttr.str() + "'s ";
  static const std::string vpp = plan + kVirtualStages.str(), layout = plan + kLayout.str(),
                           microbatches = plan + kMicrobatches.str(), bucket = plan + kBucketSize.str(),
                           vocab = plan + kVocabDivisibleBy.str();
  static const PlanFieldNames result = {"@grid's pp axis (axis 0)", "@grid's dp axis (axis 1)", "@grid's tp axis (axis 2)",
                                        vpp, "", layout, microbatches, bucket, vocab};
  return result;
}

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
  if (plan.sharding != ShardingStrategy::NoShard)
    entries.append({b.getNamedAttr(kShardingStrategy, b.getStringAttr(shardingStrategyName(plan.sharding))),
                    b.getNamedAttr(kShardDegree, b.getI64IntegerAttr(plan.shardDegree)),
                    b.getNamedAttr(kOverlapParamGather, b.getBoolAttr(plan.overlapParamGather))});
  if (plan.sharding == ShardingStrategy::OptimGradsParams)
    entries.push_back(
        b.getNamedAttr(kReshardAfterForward, b.getStringAttr(reshardAfterForwardName(plan.reshardAfterForward))));
  if (plan.optimizerOffloadFraction > 0)
    entries.push_back(b.getNamedAttr(kOffloadFraction, b.getF64FloatAttr(plan.optimizerOffloadFraction)));
  const RecomputePlan &r = plan.recompute;
  if (r.granularity != RecomputeGranularity::None)
    entries.push_back(b.getNamedAttr(kRecomputeGranularity, b.getStringAttr(recomputeGranularityName(r.granularity))));
  if (r.granularity == RecomputeGranularity::Full)
    entries.append({b.getNamedAttr(kRecomputeMethod, b.getStringAttr(recomputeMethodName(r.method))),
                    b.getNamedAttr(kRecomputeNumLayers, b.getI64IntegerAttr(r.numLayers)),
                    b.getNamedAttr(kDistributeSaved, b.getBoolAttr(r.distributeSavedActivations))});
  if (r.granularity == RecomputeGranularity::Selective) {
    SmallVector<Attribute> modules;
    for (const std::string &m : r.modules)
      modules.push_back(b.getStringAttr(m));
    entries.push_back(b.getNamedAttr(kRecomputeModuleList, b.getArrayAttr(modules)));
  }
  if (plan.precision != ActivationPrecision::Fp32)
    entries.push_back(b.getNamedAttr(kPrecision, b.getStringAttr(activationPrecisionName(plan.precision))));
  if (plan.lora.enabled()) {
    SmallVector<Attribute> modules;
    for (const std::string &m : plan.lora.modules)
      modules.push_back(b.getStringAttr(m));
    entries.append({b.getNamedAttr(kLoraRank, b.getI64IntegerAttr(plan.lora.rank)),
                    b.getNamedAttr(kLoraAlpha, b.getF64FloatAttr(plan.lora.alpha)),
                    b.getNamedAttr(kLoraDropout, b.getF64FloatAttr(plan.lora.dropout)),
                    b.getNamedAttr(kLoraModules, b.getArrayAttr(modules)),
                    b.getNamedAttr(kUseRslora, b.getBoolAttr(plan.lora.rslora))});
    if (plan.lora.nf4Block > 0)
      entries.push_back(b.getNamedAttr(kQloraBlock, b.getI64IntegerAttr(plan.lora.nf4Block)));
  }
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
    if (!name || name.getValue() != gridAxisName(axis))
      return fail("@" + names::kGrid.str() + "'s axis " + Twine(i) + " must be \"" + gridAxisName(axis) +
                  "\" of size >= 1 (Megatron's rank order: pp, dp, tp)");
    if (ShapedType::isDynamic(shape[i]))
      return fail("@" + names::kGrid.str() + "'s " + gridAxisName(axis) + " axis (axis " + Twine(i) +
                  ") is dynamic ('?'); give its size (the plan's " + gridAxisName(axis) + ")");
  }
  ParallelPlan result;
  result.pp = shape[0], result.dp = shape[1], result.tp = shape[2];
  ShardingFlags sharding; // checked as megac compile checks its flags, once the grid is known
  RecomputeFlags recompute;
  // Every key must be one of ours with the type the frontend writes: a typo or a wrong type in
  // hand-written IR is an error, not a default.
  for (NamedAttribute entry : plan) {
    StringRef key = entry.getName().getValue();
    Attribute value = entry.getValue();
    auto wrong = [&](StringRef expected) {
      std::string text;
      llvm::raw_string_ostream os(text);
      os << value;
      return fail(names::kPlanAttr.str() + "'s " + key + " must be " + expected + ", got " + text);
    };
    if (key == kLoraRank) {
      auto v = dyn_cast<IntegerAttr>(value);
      if (!v || isa<BoolAttr>(value) || !v.getType().isSignlessInteger() || v.getType().getIntOrFloatBitWidth() > 64)
        return wrong("an integer (i64)");
      if (v.getInt() < 1 || v.getInt() > kMaxLoraRank)
        return fail(names::kPlanAttr.str() + "'s " + key + " is " + Twine(v.getInt()) + "; it must be between 1 and " +
                    Twine(kMaxLoraRank));
      result.lora.rank = v.getInt();
    } else if (key == kQloraBlock) {
      auto v = dyn_cast<IntegerAttr>(value);
      if (!v || isa<BoolAttr>(value) || !v.getType().isSignlessInteger() || v.getType().getIntOrFloatBitWidth() > 64)
        return wrong("an integer (i64)");
      if (v.getInt() < 2 || v.getInt() > kMaxNf4Block || v.getInt() % 2 != 0)
        return fail(names::kPlanAttr.str() + "'s " + key + " is " + Twine(v.getInt()) +
                    "; it must be even and between 2 and " + Twine(kMaxNf4Block));
      result.lora.nf4Block = v.getInt();
    } else if (key == kLoraAlpha || key == kLoraDropout) {
      auto v = dyn_cast<FloatAttr>(value);
      if (!v || !v.getType().isF64())
        return wrong(key == kLoraAlpha ? "a positive number (f64)" : "a rate (f64) in [0, 1)");
      double x = v.getValueAsDouble();
      if (key == kLoraAlpha ? !(std::isfinite(x) && x > 0) : !(x >= 0 && x < 1))
        return wrong(key == kLoraAlpha ? "a positive number (f64)" : "a rate (f64) in [0, 1)");
      (key == kLoraAlpha ? result.lora.alpha : result.lora.dropout) = x;
    } else if (key == kLoraModules) {
      auto v = dyn_cast<ArrayAttr>(value);
      if (!v || v.empty() || !llvm::all_of(v, [](Attribute a) { return isa<StringAttr>(a); }))
        return wrong("a non-empty array of module paths inside a layer (\"attn.c_attn\")");
      for (Attribute a : v)
        result.lora.modules.push_back(cast<StringAttr>(a).str());
    } else if (key == kUseRslora) {
      auto v = dyn_cast<BoolAttr>(value);
      if (!v)
        return wrong("true or false");
      result.lora.rslora = v.getValue();
    } else if (key == kSequenceParallel || key == kOverlapGradReduce || key == kOverlapParamGather ||
        key == kDistributeSaved) {
      auto v = dyn_cast<BoolAttr>(value);
      if (!v)
        return wrong("true or false");
      (key == kSequenceParallel     ? result.sp
       : key == kOverlapGradReduce ? result.overlapGradReduce
       : key == kDistributeSaved   ? recompute.distributeSavedActivations
                                   : sharding.overlapParamGather) = v.getValue();
    } else if (key == kRecomputeGranularity || key == kRecomputeMethod) {
      auto v = dyn_cast<StringAttr>(value);
      if (!v)
        return wrong(key == kRecomputeGranularity ? "a string (full or selective)" : "a string (uniform or block)");
      (key == kRecomputeGranularity ? recompute.granularity : recompute.method) = v.str();
    } else if (key == kRecomputeModuleList) {
      auto v = dyn_cast<ArrayAttr>(value);
      if (!v || v.empty() || !llvm::all_of(v, [](Attribute a) { return isa<StringAttr>(a); }))
        return wrong("a non-empty array of strings (core_attn, mlp, layernorm)");
      for (Attribute a : v)
        recompute.modules.push_back(cast<StringAttr>(a).str());
    } else if (key == kRecomputeNumLayers) {
      auto v = dyn_cast<IntegerAttr>(value);
      if (!v || isa<BoolAttr>(value) || !v.getType().isSignlessInteger() || v.getType().getIntOrFloatBitWidth() > 64)
        return wrong("an integer (i64)");
      if (v.getInt() < 1 || v.getInt() > limits::kLayers)
        return fail(names::kPlanAttr.str() + "'s " + key + " is " + Twine(v.getInt()) + "; it must be between 1 and " +
                    Twine(limits::kLayers));
      recompute.numLayers = v.getInt();
    } else if (key == kShardingStrategy || key == kReshardAfterForward) {
      auto v = dyn_cast<StringAttr>(value);
      if (!v)
        return wrong(key == kShardingStrategy ? "a string (no_shard, optim, optim_grads or optim_grads_params)"
                                              : "a string (default, always or never)");
      (key == kShardingStrategy ? sharding.strategy : sharding.reshardAfterForward) = v.str();
    } else if (key == kVocabDivisibleBy || key == kBucketSize || key == kVirtualStages || key == kMicrobatches ||
               key == kShardDegree) {
      auto v = dyn_cast<IntegerAttr>(value);
      // i64 as the frontend writes it (getInt() needs a signless integer of at most 64 bits).
      if (!v || isa<BoolAttr>(value) || !v.getType().isSignlessInteger() || v.getType().getIntOrFloatBitWidth() > 64)
        return wrong("an integer (i64)");
      if (key == kShardDegree && v.getInt() == 0) // 0 means "not given" to resolveSharding
        return fail(names::kPlanAttr.str() + "'s " + key + " is 0; it must be between 1 and the dp axis's size");
      int64_t &field = key == kVocabDivisibleBy ? result.makeVocabSizeDivisibleBy
                       : key == kBucketSize     ? result.ddpBucketSize
                       : key == kVirtualStages  ? result.vpp
                       : key == kShardDegree    ? sharding.shardDegree
                                                : result.numMicrobatches;
      field = v.getInt();
    } else if (key == kOffloadFraction) {
      auto v = dyn_cast<FloatAttr>(value);
      if (!v || !v.getType().isF64())
        return wrong("a fraction (f64) above 0 and at most 1");
      sharding.optimizerCpuOffload = true;
      char text[32]; // read back as the same double by resolveSharding
      std::snprintf(text, sizeof text, "%.17g", v.getValueAsDouble());
      sharding.offloadFraction = text;
    } else if (key == kPrecision) {
      auto v = dyn_cast<StringAttr>(value);
      std::optional<ActivationPrecision> p = v ? parseActivationPrecision(v.str()) : std::nullopt;
      if (!p)
        return wrong("a string (fp32, bf16 or fp16)");
      result.precision = *p;
    } else if (key == kSchedule) {
      auto v = dyn_cast<StringAttr>(value);
      if (!v)
        return wrong("a string (gpipe, 1f1b or interleaved)");
      result.pipelineSchedule = v.str();
    } else if (key == kLayout) {
      auto v = dyn_cast<DenseI64ArrayAttr>(value);
      if (!v)
        return wrong("an array<i64: ...> of layers per chunk");
      result.pipelineLayout.assign(v.asArrayRef().begin(), v.asArrayRef().end());
    } else {
      return fail(names::kPlanAttr.str() + " has an unknown key " + key + "; the keys are " +
                  llvm::join(ArrayRef<StringRef>(kPlanKeys), ", "));
    }
  }
  // Sizes before anything multiplies them.
  if (llvm::Error e = checkGridLimits(result, irNames()))
    return fail(llvm::toString(std::move(e)));
  if (result.pp > 1 && (result.vpp < 1 || result.numMicrobatches < 1 || result.pipelineSchedule.empty()))
    return fail("pp is " + Twine(result.pp) + ", so the plan needs " + kVirtualStages.str() + " >= 1 (got " +
                Twine(result.vpp) + "), " + kMicrobatches.str() + " >= 1 (got " + Twine(result.numMicrobatches) +
                ") and a " + kSchedule.str());
  if (llvm::Error e = checkPlanLimits(result, irNames()))
    return fail(llvm::toString(std::move(e)));
  if (sharding.strategy.empty() && (sharding.shardDegree || sharding.overlapParamGather ||
                                    !sharding.reshardAfterForward.empty()))
    return fail(names::kPlanAttr.str() + " has sharding options but no " + kShardingStrategy.str());
  if (llvm::Error e = resolveSharding(result, sharding))
    return fail(names::kPlanAttr.str() + ": " + llvm::toString(std::move(e)));
  if (llvm::Error e = resolveRecompute(result, recompute))
    return fail(names::kPlanAttr.str() + ": " + llvm::toString(std::move(e)));
  const bool anyLora = plan.get(kLoraAlpha) || plan.get(kLoraDropout) || plan.get(kLoraModules) || plan.get(kUseRslora) ||
                       plan.get(kQloraBlock);
  if (anyLora && (!result.lora.enabled() || result.lora.modules.empty() || result.lora.alpha == 0))
    return fail(names::kPlanAttr.str() + ": LoRA needs " + kLoraRank.str() + ", " + kLoraAlpha.str() + " and " +
                kLoraModules.str() + " together");
  if (result.lora.enabled() && (result.lora.modules.empty() || result.lora.alpha == 0))
    return fail(names::kPlanAttr.str() + "'s " + kLoraRank.str() + " needs " + kLoraAlpha.str() + " and " +
                kLoraModules.str());
  const int64_t chunks = result.pp * result.vpp; // both bounded: no overflow
  if (!result.pipelineLayout.empty() && static_cast<int64_t>(result.pipelineLayout.size()) != chunks)
    return fail(kLayout.str() + " has " + Twine(result.pipelineLayout.size()) + " entries; it needs pp x " +
                kVirtualStages.str() + " = " + Twine(chunks) + " (one per chunk)");
  return result;
}

StringRef megac::dpGridAxisName(DpGridAxis axis) { return axis == DpGridAxis::Replicate ? "dp_replicate" : "dp_shard"; }

static FlatSymbolRefAttr dpGrid(ModuleOp module, const ParallelPlan &plan) {
  MLIRContext *ctx = module.getContext();
  if (!module.lookupSymbol(names::kDpGrid)) {
    OpBuilder b(ctx);
    auto grid = module.lookupSymbol<shard::GridOp>(names::kGrid);
    if (grid)
      b.setInsertionPointAfter(grid);
    else
      b.setInsertionPointToStart(module.getBody());
    auto dp = shard::GridOp::create(b, module.getLoc(), b.getStringAttr(names::kDpGrid),
                                    b.getDenseI64ArrayAttr({plan.dp / plan.shardDegree, plan.shardDegree}));
    dp->setAttr(names::kAxesAttr, b.getArrayAttr({b.getStringAttr(dpGridAxisName(DpGridAxis::Replicate)),
                                                  b.getStringAttr(dpGridAxisName(DpGridAxis::Shard))}));
  }
  return FlatSymbolRefAttr::get(ctx, names::kDpGrid);
}

CollectiveAxes megac::shardGroupAxes(ModuleOp module, const ParallelPlan &plan) {
  Builder b(module.getContext());
  if (plan.shardDegree == plan.dp)
    return {FlatSymbolRefAttr::get(module.getContext(), names::kGrid),
            b.getDenseI16ArrayAttr({static_cast<int16_t>(GridAxis::Dp)})};
  return {dpGrid(module, plan), b.getDenseI16ArrayAttr({static_cast<int16_t>(DpGridAxis::Shard)})};
}

CollectiveAxes megac::replicaGroupAxes(ModuleOp module, const ParallelPlan &plan) {
  Builder b(module.getContext());
  return {dpGrid(module, plan), b.getDenseI16ArrayAttr({static_cast<int16_t>(DpGridAxis::Replicate)})};
}

int64_t megac::collectiveSize(const ParallelPlan &plan, StringRef grid, ArrayRef<int16_t> axes) {
  if (axes.size() != 1)
    return 1;
  if (grid == names::kDpGrid)
    return axes[0] == static_cast<int16_t>(DpGridAxis::Shard) ? plan.shardDegree : plan.dp / plan.shardDegree;
  if (grid != names::kGrid)
    return 1;
  switch (static_cast<GridAxis>(axes[0])) {
  case GridAxis::Pp: return plan.pp;
  case GridAxis::Dp: return plan.dp;
  case GridAxis::Tp: return plan.tp;
  }
  return 1;
}
