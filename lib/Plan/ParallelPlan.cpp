#include "megac/Plan/ParallelPlan.h"
#include "megart/grid_layout.h"

#include <cstdio>

using namespace megac;

std::string ParallelPlan::summary() const {
  std::string text = "pp " + std::to_string(pp);
  if (vpp > 1)
    text += " vpp " + std::to_string(vpp);
  text += " dp " + std::to_string(dp) + " tp " + std::to_string(tp) + (sp ? " sp" : "");
  if (ep > 1)
    text += " ep " + std::to_string(ep);
  if (etp)
    text += " etp " + std::to_string(etp);
  if (pp > 1)
    text += " (" + (pipelineSchedule ? pipeline::scheduleKindName(*pipelineSchedule).str() : "?") + ", " +
            std::to_string(numMicrobatches) + " microbatches)";
  if (sharding != ShardingStrategy::NoShard) {
    text += std::string(" sharding ") + shardingStrategyName(sharding);
    if (shardDegree != dp)
      text += " over " + std::to_string(shardDegree) + " x " + std::to_string(dp / shardDegree) + " replicas";
  }
  if (recompute.granularity == RecomputeGranularity::Full)
    text += std::string(" recompute full ") + recomputeMethodName(recompute.method) + " " +
            std::to_string(recompute.numLayers) + (recompute.distributeSavedActivations ? " distributed" : "");
  else if (recompute.granularity == RecomputeGranularity::Selective) {
    text += " recompute selective";
    for (const std::string &m : recompute.modules)
      text += " " + m;
  }
  if (precision != ActivationPrecision::Fp32)
    text += std::string(" ") + activationPrecisionName(precision);
  if (lora.enabled()) {
    char alpha[32];
    std::snprintf(alpha, sizeof alpha, "%g", lora.alpha);
    text += " lora r " + std::to_string(lora.rank) + " alpha " + alpha + (lora.rslora ? " rslora" : "");
    if (lora.nf4Block > 0)
      text += " qlora nf4 " + std::to_string(lora.nf4Block);
  }
  return text;
}

namespace {
constexpr std::pair<megac::ShardingStrategy, const char *> kStrategies[] = {
    {megac::ShardingStrategy::NoShard, "no_shard"},
    {megac::ShardingStrategy::Optim, "optim"},
    {megac::ShardingStrategy::OptimGrads, "optim_grads"},
    {megac::ShardingStrategy::OptimGradsParams, "optim_grads_params"}};
constexpr std::pair<megac::ActivationPrecision, const char *> kPrecisions[] = {
    {megac::ActivationPrecision::Fp32, "fp32"},
    {megac::ActivationPrecision::Bf16, "bf16"},
    {megac::ActivationPrecision::Fp16, "fp16"}};
constexpr std::pair<megac::ReshardAfterForward, const char *> kReshardChoices[] = {
    {megac::ReshardAfterForward::Default, "default"},
    {megac::ReshardAfterForward::Always, "always"},
    {megac::ReshardAfterForward::Never, "never"}};
constexpr std::pair<megac::RecomputeGranularity, const char *> kGranularities[] = {
    {megac::RecomputeGranularity::None, "none"},
    {megac::RecomputeGranularity::Full, "full"},
    {megac::RecomputeGranularity::Selective, "selective"}};
constexpr std::pair<megac::RecomputeMethod, const char *> kMethods[] = {{megac::RecomputeMethod::Uniform, "uniform"},
                                                                         {megac::RecomputeMethod::Block, "block"}};

template <typename E, size_t N> const char *nameOf(const std::pair<E, const char *> (&table)[N], E value) {
  for (auto [v, name] : table)
    if (v == value)
      return name;
  return "?";
}
template <typename E, size_t N>
std::optional<E> valueOf(const std::pair<E, const char *> (&table)[N], const std::string &name) {
  for (auto [v, n] : table)
    if (name == n)
      return v;
  return std::nullopt;
}
} // namespace

const char *megac::shardingStrategyName(ShardingStrategy s) { return nameOf(kStrategies, s); }
std::optional<ShardingStrategy> megac::parseShardingStrategy(const std::string &name) {
  return valueOf(kStrategies, name);
}
const char *megac::reshardAfterForwardName(ReshardAfterForward r) { return nameOf(kReshardChoices, r); }
std::optional<ReshardAfterForward> megac::parseReshardAfterForward(const std::string &name) {
  return valueOf(kReshardChoices, name);
}

const char *megac::recomputeGranularityName(RecomputeGranularity g) { return nameOf(kGranularities, g); }
std::optional<RecomputeGranularity> megac::parseRecomputeGranularity(const std::string &name) {
  return valueOf(kGranularities, name);
}
const char *megac::recomputeMethodName(RecomputeMethod m) { return nameOf(kMethods, m); }
std::optional<RecomputeMethod> megac::parseRecomputeMethod(const std::string &name) { return valueOf(kMethods, name); }

std::string ParallelPlan::rankLayout() const {
  megart::GridShape shape;
  shape.pp = pp, shape.dp = dp, shape.tp = tp, shape.ep = ep;
  return megart::format_rank_layout(shape);
}

const char *megac::activationPrecisionName(ActivationPrecision p) { return nameOf(kPrecisions, p); }
std::optional<ActivationPrecision> megac::parseActivationPrecision(const std::string &name) {
  return valueOf(kPrecisions, name);
}

size_t megac::hash_value(const ParallelPlan &plan) {
  size_t h = 0;
  for (int64_t v : {plan.pp, plan.dp, plan.tp, plan.ep, plan.vpp, plan.numMicrobatches, plan.lora.rank})
    h = h * 1000003u + static_cast<size_t>(v);
  return h * 31u + (plan.sp ? 1 : 0) + 2 * static_cast<size_t>(plan.sharding);
}
