// #megac.plan's text: `key = value` under Megatron's flag names, the grid's sizes first, then
// only what a group that is on needs. Parsing checks every key, type and limit as megac compile
// checks its flags; after that the plan is a ParallelPlan that passes read as it is.
#include "megac/Limits.h"
#include "megac/NumberText.h"
#include "megac/Plan/PlanDialect.h"
#include "megac/Plan/LoraFlags.h"
#include "megac/Plan/PlanLimits.h"
#include "megac/Plan/RecomputeFlags.h"
#include "megac/Plan/ShardingFlags.h"
#include "tx/TxNames.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <cstdio>

using namespace mlir;
using namespace megac;

namespace {

constexpr StringLiteral kAttr = names::kPlanAttr;
// The grid's sizes, in its order (Megatron's rank order: pp, dp, tp).
constexpr StringLiteral kPp = "pp", kDp = "dp", kTp = "tp";
// Expert parallelism, written only when on.
constexpr StringLiteral kEp = "expert_model_parallel_size";
// Expert tensor parallelism, written only when given (not given: tp, Megatron's default).
constexpr StringLiteral kEtp = "expert_tensor_parallel_size";
// The rest: Megatron's flag names.
constexpr StringLiteral kSequenceParallel = "sequence_parallel";
constexpr StringLiteral kVocabDivisibleBy = "make_vocab_size_divisible_by";
constexpr StringLiteral kVirtualStages = "num_virtual_stages_per_pipeline_rank";
constexpr StringLiteral kSchedule = "pipeline_schedule";
constexpr StringLiteral kLayout = "pipeline_layout";
constexpr StringLiteral kMicrobatches = "num_microbatches";
constexpr StringLiteral kBucketSize = "ddp_bucket_size";
constexpr StringLiteral kOverlapGradReduce = "overlap_grad_reduce";
// Sharded data parallelism, written only when something is sharded.
constexpr StringLiteral kShardingStrategy = "data_parallel_sharding_strategy";
constexpr StringLiteral kShardDegree = "data_parallel_shard_degree";
constexpr StringLiteral kOverlapParamGather = "overlap_param_gather";
constexpr StringLiteral kReshardAfterForward = "fsdp_reshard_after_forward";
constexpr StringLiteral kOffloadFraction = "optimizer_offload_fraction";
// Activation recomputation, written only when asked for.
constexpr StringLiteral kRecomputeGranularity = "recompute_granularity";
constexpr StringLiteral kRecomputeMethod = "recompute_method";
constexpr StringLiteral kRecomputeNumLayers = "recompute_num_layers";
constexpr StringLiteral kRecomputeModuleList = "recompute_modules";
constexpr StringLiteral kDistributeSaved = "distribute_saved_activations";
// 16-bit activations (megac compile --bf16 / --fp16), written only when not fp32.
constexpr StringLiteral kPrecision = "activation_precision";
// LoRA (megac compile --lora-rank), written only when on: PEFT's names.
constexpr StringLiteral kLoraRank = "lora_rank";
constexpr StringLiteral kLoraAlpha = "lora_alpha";
constexpr StringLiteral kLoraDropout = "lora_dropout";
constexpr StringLiteral kLoraModules = "lora_target_modules";
constexpr StringLiteral kUseRslora = "use_rslora";
constexpr StringLiteral kQloraBlock = "qlora_block_size"; // only with --qlora
constexpr StringRef kKeys[] = {
    kPp, kDp, kTp, kEp, kEtp, kSequenceParallel, kVocabDivisibleBy, kVirtualStages, kSchedule, kLayout, kMicrobatches,
    kBucketSize, kOverlapGradReduce, kShardingStrategy, kShardDegree, kOverlapParamGather, kReshardAfterForward,
    kOffloadFraction, kRecomputeGranularity, kRecomputeMethod, kRecomputeNumLayers, kRecomputeModuleList,
    kDistributeSaved, kPrecision, kLoraRank, kLoraAlpha, kLoraDropout, kLoraModules, kUseRslora, kQloraBlock};

// What limit errors call each field.
const PlanFieldNames &fieldNames() {
  static const std::string prefix = kAttr.str() + "'s ";
  static const std::string pp = prefix + kPp.str(), dp = prefix + kDp.str(), tp = prefix + kTp.str(),
                           ep = prefix + kEp.str(),
                           vpp = prefix + kVirtualStages.str(), layout = prefix + kLayout.str(),
                           microbatches = prefix + kMicrobatches.str(), bucket = prefix + kBucketSize.str(),
                           vocab = prefix + kVocabDivisibleBy.str();
  static const PlanFieldNames result = {pp, dp, tp, ep, vpp, "", layout, microbatches, bucket, vocab};
  return result;
}

/// The plan's entries in the order they print.
SmallVector<NamedAttribute> planEntries(const ParallelPlan &plan, Builder &b) {
  auto strings = [&](const std::vector<std::string> &list) {
    SmallVector<Attribute> result;
    for (const std::string &s : list)
      result.push_back(b.getStringAttr(s));
    return b.getArrayAttr(result);
  };
  SmallVector<NamedAttribute> entries = {
      b.getNamedAttr(kPp, b.getI64IntegerAttr(plan.pp)),
      b.getNamedAttr(kDp, b.getI64IntegerAttr(plan.dp)),
      b.getNamedAttr(kTp, b.getI64IntegerAttr(plan.tp)),
      b.getNamedAttr(kSequenceParallel, b.getBoolAttr(plan.sp)),
      b.getNamedAttr(kVocabDivisibleBy, b.getI64IntegerAttr(plan.makeVocabSizeDivisibleBy))};
  if (plan.etp)
    entries.insert(entries.begin() + 3, b.getNamedAttr(kEtp, b.getI64IntegerAttr(plan.etp)));
  if (plan.ep > 1)
    entries.insert(entries.begin() + 3, b.getNamedAttr(kEp, b.getI64IntegerAttr(plan.ep)));
  if (plan.pp > 1) {
    entries.append({b.getNamedAttr(kVirtualStages, b.getI64IntegerAttr(plan.vpp)),
                    b.getNamedAttr(kSchedule, b.getStringAttr(pipeline::scheduleKindName(*plan.pipelineSchedule))),
                    b.getNamedAttr(kMicrobatches, b.getI64IntegerAttr(plan.numMicrobatches))});
    if (!plan.pipelineLayout.empty()) {
      SmallVector<Attribute> layout;
      for (int64_t layers : plan.pipelineLayout)
        layout.push_back(b.getI64IntegerAttr(layers));
      entries.push_back(b.getNamedAttr(kLayout, b.getArrayAttr(layout)));
    }
  }
  entries.append({b.getNamedAttr(kBucketSize, b.getI64IntegerAttr(plan.ddpBucketSize)),
                  b.getNamedAttr(kOverlapGradReduce, b.getBoolAttr(plan.overlapGradReduce))});
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
  if (r.granularity == RecomputeGranularity::Selective)
    entries.push_back(b.getNamedAttr(kRecomputeModuleList, strings(r.modules)));
  if (plan.precision != ActivationPrecision::Fp32)
    entries.push_back(b.getNamedAttr(kPrecision, b.getStringAttr(activationPrecisionName(plan.precision))));
  if (plan.lora.enabled()) {
    entries.append({b.getNamedAttr(kLoraRank, b.getI64IntegerAttr(plan.lora.rank)),
                    b.getNamedAttr(kLoraAlpha, b.getF64FloatAttr(plan.lora.alpha)),
                    b.getNamedAttr(kLoraDropout, b.getF64FloatAttr(plan.lora.dropout)),
                    b.getNamedAttr(kLoraModules, strings(plan.lora.modules)),
                    b.getNamedAttr(kUseRslora, b.getBoolAttr(plan.lora.rslora))});
    if (plan.lora.nf4Block > 0)
      entries.push_back(b.getNamedAttr(kQloraBlock, b.getI64IntegerAttr(plan.lora.nf4Block)));
  }
  return entries;
}

/// A double as MLIR reads it back exactly: the shortest exact digits, with a decimal point.
std::string floatText(double x) {
  std::string text = shortestExactText(x);
  if (text.find_first_of(".n") == std::string::npos) // no point, not nan / inf
    text.insert(std::min(text.find('e'), text.size()), ".0");
  return text;
}

void printValue(AsmPrinter &p, Attribute value) {
  TypeSwitch<Attribute>(value)
      .Case([&](BoolAttr v) { p << (v.getValue() ? "true" : "false"); })
      .Case([&](IntegerAttr v) { p << v.getInt(); })
      .Case([&](FloatAttr v) { p << floatText(v.getValueAsDouble()); })
      .Case([&](StringAttr v) { p.printString(v.getValue()); })
      .Case([&](ArrayAttr v) {
        p << "[";
        llvm::interleaveComma(v, p, [&](Attribute a) { printValue(p, a); });
        p << "]";
      })
      .Default([&](Attribute v) { p.printAttribute(v); });
}

bool isI64(Attribute value) {
  auto v = dyn_cast<IntegerAttr>(value);
  // i64 as the frontend writes it (getInt() needs a signless integer of at most 64 bits).
  return v && !isa<BoolAttr>(value) && v.getType().isSignlessInteger() && v.getType().getIntOrFloatBitWidth() <= 64;
}

bool isStringList(Attribute value) {
  auto v = dyn_cast<ArrayAttr>(value);
  return v && !v.empty() && llvm::all_of(v, [](Attribute a) { return isa<StringAttr>(a); });
}

/// The plan the entries spell, or an error naming the key, what it must be and what it was.
FailureOr<ParallelPlan> planFromEntries(ArrayRef<NamedAttribute> entries,
                                        function_ref<InFlightDiagnostic()> emitError) {
  auto fail = [&](const Twine &what) {
    emitError() << what;
    return failure();
  };
  ParallelPlan result;
  ShardingFlags sharding; // checked as megac compile checks its flags, once the sizes are known
  RecomputeFlags recompute;
  bool anyLora = false;
  // Every key must be one of ours with the type the frontend writes: a typo or a wrong type in
  // hand-written IR is an error, not a default.
  for (NamedAttribute entry : entries) {
    StringRef key = entry.getName().getValue();
    Attribute value = entry.getValue();
    auto wrong = [&](StringRef expected) {
      std::string text;
      llvm::raw_string_ostream os(text);
      os << value;
      return fail(kAttr + "'s " + key + " must be " + expected + ", got " + text);
    };
    if (key == kLoraRank || key == kQloraBlock || key == kRecomputeNumLayers) {
      if (!isI64(value))
        return wrong("an integer (i64)");
      const int64_t v = cast<IntegerAttr>(value).getInt();
      if (key == kLoraRank && (v < 1 || v > kMaxLoraRank))
        return fail(kAttr + "'s " + key + " is " + Twine(v) + "; it must be between 1 and " + Twine(kMaxLoraRank));
      if (key == kQloraBlock && (v < 2 || v > kMaxNf4Block || v % 2 != 0))
        return fail(kAttr + "'s " + key + " is " + Twine(v) + "; it must be even and between 2 and " +
                    Twine(kMaxNf4Block));
      if (key == kRecomputeNumLayers && (v < 1 || v > limits::kLayers))
        return fail(kAttr + "'s " + key + " is " + Twine(v) + "; it must be between 1 and " + Twine(limits::kLayers));
      (key == kLoraRank ? result.lora.rank : key == kQloraBlock ? result.lora.nf4Block : recompute.numLayers) = v;
      anyLora |= key == kQloraBlock;
    } else if (key == kLoraAlpha || key == kLoraDropout) {
      auto v = dyn_cast<FloatAttr>(value);
      const double x = v && v.getType().isF64() ? v.getValueAsDouble() : NAN;
      if (key == kLoraAlpha ? !(std::isfinite(x) && x > 0) : !(x >= 0 && x < 1))
        return wrong(key == kLoraAlpha ? "a positive number (f64)" : "a rate (f64) in [0, 1)");
      (key == kLoraAlpha ? result.lora.alpha : result.lora.dropout) = x;
      anyLora = true;
    } else if (key == kLoraModules || key == kRecomputeModuleList) {
      if (!isStringList(value))
        return wrong(key == kLoraModules ? "a non-empty array of module paths inside a layer (\"attn.c_attn\")"
                                         : "a non-empty array of strings (core_attn, mlp, layernorm)");
      for (Attribute a : cast<ArrayAttr>(value))
        (key == kLoraModules ? result.lora.modules : recompute.modules).push_back(cast<StringAttr>(a).str());
      anyLora |= key == kLoraModules;
    } else if (key == kSequenceParallel || key == kOverlapGradReduce || key == kOverlapParamGather ||
               key == kDistributeSaved || key == kUseRslora) {
      auto v = dyn_cast<BoolAttr>(value);
      if (!v)
        return wrong("true or false");
      (key == kSequenceParallel     ? result.sp
       : key == kOverlapGradReduce ? result.overlapGradReduce
       : key == kDistributeSaved   ? recompute.distributeSavedActivations
       : key == kUseRslora         ? result.lora.rslora
                                   : sharding.overlapParamGather) = v.getValue();
      anyLora |= key == kUseRslora;
    } else if (key == kRecomputeGranularity || key == kRecomputeMethod || key == kShardingStrategy ||
               key == kReshardAfterForward || key == kSchedule) {
      auto v = dyn_cast<StringAttr>(value);
      if (!v)
        return wrong(key == kRecomputeGranularity ? "a string (full or selective)"
                     : key == kRecomputeMethod    ? "a string (uniform or block)"
                     : key == kShardingStrategy   ? "a string (no_shard, optim, optim_grads or optim_grads_params)"
                     : key == kSchedule           ? "a string (gpipe, 1f1b or interleaved)"
                                                  : "a string (default, always or never)");
      if (key == kSchedule && !(result.pipelineSchedule = pipeline::parseScheduleKind(v.getValue())))
        return wrong("gpipe, 1f1b or interleaved");
      if (key != kSchedule)
        (key == kRecomputeGranularity ? recompute.granularity
         : key == kRecomputeMethod    ? recompute.method
         : key == kShardingStrategy   ? sharding.strategy
                                      : sharding.reshardAfterForward) = v.str();
    } else if (key == kPp || key == kDp || key == kTp || key == kEp || key == kEtp || key == kVocabDivisibleBy ||
               key == kBucketSize ||
               key == kVirtualStages || key == kMicrobatches || key == kShardDegree) {
      if (!isI64(value))
        return wrong("an integer (i64)");
      const int64_t v = cast<IntegerAttr>(value).getInt();
      if ((key == kShardDegree || key == kEtp) && v == 0) // 0 means "not given"
        return fail(kAttr + "'s " + key + " is 0; it must be " +
                    (key == kEtp ? "1 or tp" : "between 1 and dp"));
      (key == kPp                  ? result.pp
       : key == kDp                ? result.dp
       : key == kTp                ? result.tp
       : key == kEp                ? result.ep
       : key == kEtp               ? result.etp
       : key == kVocabDivisibleBy  ? result.makeVocabSizeDivisibleBy
       : key == kBucketSize        ? result.ddpBucketSize
       : key == kVirtualStages     ? result.vpp
       : key == kShardDegree       ? sharding.shardDegree
                                   : result.numMicrobatches) = v;
    } else if (key == kOffloadFraction) {
      auto v = dyn_cast<FloatAttr>(value);
      if (!v || !v.getType().isF64())
        return wrong("a fraction (f64) above 0 and at most 1");
      sharding.optimizerCpuOffload = true;
      sharding.offloadFraction = shortestExactText(v.getValueAsDouble()); // read back exactly by resolveSharding
    } else if (key == kPrecision) {
      auto v = dyn_cast<StringAttr>(value);
      std::optional<ActivationPrecision> p = v ? parseActivationPrecision(v.str()) : std::nullopt;
      if (!p)
        return wrong("a string (fp32, bf16 or fp16)");
      result.precision = *p;
    } else if (key == kLayout) {
      auto v = dyn_cast<ArrayAttr>(value);
      if (!v || !llvm::all_of(v, isI64))
        return wrong("an array of integers: the layers of each chunk");
      for (Attribute a : v)
        result.pipelineLayout.push_back(cast<IntegerAttr>(a).getInt());
    } else {
      return fail(kAttr + " has an unknown key " + key + "; the keys are " + llvm::join(ArrayRef<StringRef>(kKeys), ", "));
    }
  }
  // Sizes before anything multiplies them.
  if (llvm::Error e = checkGridLimits(result, fieldNames()))
    return fail(llvm::toString(std::move(e)));
  if (result.etp != 0 && result.etp != 1 && result.etp != result.tp)
    return fail(kAttr + "'s " + kEtp + " is " + Twine(result.etp) + "; it must be 1 or tp (" + Twine(result.tp) + ")");
  if (result.pp > 1 && (result.vpp < 1 || result.numMicrobatches < 1 || !result.pipelineSchedule))
    return fail("pp is " + Twine(result.pp) + ", so " + kAttr + " needs " + kVirtualStages + " >= 1 (got " +
                Twine(result.vpp) + "), " + kMicrobatches + " >= 1 (got " + Twine(result.numMicrobatches) + ") and a " +
                kSchedule);
  if (result.pp == 1 && (result.pipelineSchedule || result.numMicrobatches || !result.pipelineLayout.empty() ||
                         result.vpp != 1))
    return fail("pp is 1, so " + kAttr + " takes no " + kSchedule + ", " + kMicrobatches + ", " + kLayout + " or " +
                kVirtualStages + " (they describe a pipeline)");
  if (llvm::Error e = checkPlanLimits(result, fieldNames()))
    return fail(llvm::toString(std::move(e)));
  if (sharding.strategy.empty() &&
      (sharding.shardDegree || sharding.overlapParamGather || !sharding.reshardAfterForward.empty()))
    return fail(kAttr + " has sharding options but no " + kShardingStrategy);
  if (llvm::Error e = resolveSharding(result, sharding))
    return fail(kAttr + ": " + llvm::toString(std::move(e)));
  if (llvm::Error e = resolveRecompute(result, recompute))
    return fail(kAttr + ": " + llvm::toString(std::move(e)));
  if ((anyLora || result.lora.enabled()) && (!result.lora.enabled() || result.lora.modules.empty() || result.lora.alpha == 0))
    return fail(kAttr + ": LoRA needs " + kLoraRank + ", " + kLoraAlpha + " and " + kLoraModules + " together");
  const int64_t chunks = result.pp * result.vpp; // both bounded: no overflow
  if (!result.pipelineLayout.empty() && static_cast<int64_t>(result.pipelineLayout.size()) != chunks)
    return fail(kAttr + "'s " + kLayout + " has " + Twine(result.pipelineLayout.size()) + " entries; it needs pp x " +
                kVirtualStages + " = " + Twine(chunks) + " (one per chunk)");
  return result;
}

} // namespace

Attribute PlanAttr::parse(AsmParser &parser, Type) {
  const SMLoc loc = parser.getCurrentLocation();
  NamedAttrList entries;
  auto parseEntry = [&]() -> ParseResult {
    std::string key;
    const SMLoc keyLoc = parser.getCurrentLocation();
    Attribute value;
    if (parser.parseKeywordOrString(&key) || parser.parseEqual() || parser.parseAttribute(value))
      return failure();
    if (entries.get(key))
      return parser.emitError(keyLoc) << kAttr << " gives " << key << " twice";
    entries.append(key, value);
    return success();
  };
  if (parser.parseCommaSeparatedList(AsmParser::Delimiter::LessGreater, parseEntry))
    return {};
  FailureOr<ParallelPlan> plan = planFromEntries(entries, [&] { return parser.emitError(loc); });
  if (failed(plan))
    return {};
  return PlanAttr::get(parser.getContext(), *plan);
}

void PlanAttr::print(AsmPrinter &p) const {
  Builder b(getContext());
  p << "<";
  llvm::interleaveComma(planEntries(getPlan(), b), p, [&](NamedAttribute entry) {
    p << entry.getName().getValue() << " = ";
    printValue(p, entry.getValue());
  });
  p << ">";
}

LogicalResult PlanAttr::verify(function_ref<InFlightDiagnostic()> emitError, ParallelPlan plan) {
  llvm::Error e = checkGridLimits(plan, fieldNames());
  if (!e)
    e = checkPlanLimits(plan, fieldNames());
  if (!e)
    return success();
  emitError() << llvm::toString(std::move(e));
  return failure();
}
