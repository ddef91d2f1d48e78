#include "megac/Plan/ShardingFlags.h"

#include "llvm/ADT/Twine.h"

#include <cmath>
#include <cstdlib>

using namespace llvm;
using namespace megac;

static Error fail(const Twine &message) { return createStringError(inconvertibleErrorCode(), message); }

/// The strategy the flags ask for: the named one, else the distributed optimizer's (optim), else
/// torchtitan's FSDP (optim_grads_params) when a shard or replicate degree is given.
static Expected<ShardingStrategy> strategyOf(const ShardingFlags &f) {
  if (!f.strategy.empty()) {
    std::optional<ShardingStrategy> s = parseShardingStrategy(f.strategy);
    if (!s)
      return fail("--data-parallel-sharding-strategy " + f.strategy +
                  " is not a strategy; choose no_shard, optim (ZeRO-1), optim_grads (ZeRO-2) or optim_grads_params "
                  "(ZeRO-3 / FSDP)");
    if (*s == ShardingStrategy::NoShard && f.useDistributedOptimizer)
      return fail("--use-distributed-optimizer shards the optimizer state, but --data-parallel-sharding-strategy is "
                  "no_shard; drop one of them");
    return *s;
  }
  if (f.useDistributedOptimizer)
    return ShardingStrategy::Optim;
  if (f.shardDegree != 0 || f.replicateDegree != 0)
    return ShardingStrategy::OptimGradsParams;
  return ShardingStrategy::NoShard;
}

/// The ranks one copy of the sharded state is spread over: dp, or dp / replicas for hybrid sharding.
static Expected<int64_t> shardDegreeOf(const ParallelPlan &plan, const ShardingFlags &f, ShardingStrategy s) {
  const int64_t dp = plan.dp;
  int64_t replicas = f.replicateDegree, shard = f.shardDegree == -1 ? 0 : f.shardDegree;
  if (f.optimizerInstances != 0) {
    if (s != ShardingStrategy::Optim)
      return fail("--num-distributed-optimizer-instances " + Twine(f.optimizerInstances) +
                  " replicates the distributed optimizer (strategy optim); with " + shardingStrategyName(s) +
                  " give --data-parallel-replicate-degree instead");
    if (replicas != 0)
      return fail("--num-distributed-optimizer-instances and --data-parallel-replicate-degree both say how many "
                  "replicas of the sharded state there are; give one of them");
    replicas = f.optimizerInstances;
  }
  const char *replicaFlag =
      f.optimizerInstances != 0 ? "--num-distributed-optimizer-instances" : "--data-parallel-replicate-degree";
  for (auto [flag, value] : {std::pair{replicaFlag, replicas}, {"--data-parallel-shard-degree", shard}})
    if (value < 0 || value > dp)
      return fail(Twine(flag) + " is " + Twine(value) + "; it must be between 1 and --data-parallel-size (" + Twine(dp) +
                  ")" + (StringRef(flag) == "--data-parallel-shard-degree" ? " (or -1: the rest of dp)" : ""));
  if (shard != 0 && replicas != 0 && shard * replicas != dp)
    return fail("--data-parallel-shard-degree " + Twine(shard) + " x " + replicaFlag + " " + Twine(replicas) + " is " +
                Twine(shard * replicas) + ", not --data-parallel-size " + Twine(dp) +
                "; dp ranks are shard x replicate, so give two degrees whose product is " + Twine(dp) +
                " (or only one of them)");
  for (auto [flag, value] : {std::pair{"--data-parallel-shard-degree", shard}, {replicaFlag, replicas}})
    if (value != 0 && dp % value != 0)
      return fail(Twine(flag) + " " + Twine(value) + " does not divide --data-parallel-size " + Twine(dp) +
                  "; dp ranks are shard x replicate, so give a divisor of " + Twine(dp));
  if (shard == 0)
    shard = replicas != 0 ? dp / replicas : dp;
  return shard;
}

Error megac::resolveSharding(ParallelPlan &plan, const ShardingFlags &f) {
  Expected<ShardingStrategy> strategy = strategyOf(f);
  if (!strategy)
    return strategy.takeError();
  const bool sharded = *strategy != ShardingStrategy::NoShard;
  if (!sharded && (f.shardDegree != 0 || f.replicateDegree != 0 || f.optimizerInstances != 0))
    return fail("--data-parallel-sharding-strategy no_shard shards nothing, so a shard or replicate degree (or "
                "--num-distributed-optimizer-instances) has no meaning; choose a strategy or drop the degree");
  Expected<int64_t> shard = sharded ? shardDegreeOf(plan, f, *strategy) : Expected<int64_t>(1);
  if (!shard)
    return shard.takeError();
  const std::string asked = f.useDistributedOptimizer && f.strategy.empty()
                                ? std::string("--use-distributed-optimizer")
                                : "--data-parallel-sharding-strategy " + std::string(shardingStrategyName(*strategy));
  if (sharded && plan.dp == 1)
    return fail(asked + " shards the training state over the data-parallel ranks, but --data-parallel-size is 1; "
                        "give --dp 2 or more, or drop it");
  if (sharded && *shard == 1)
    return fail(asked + " with a shard degree of 1 shards nothing (every dp rank is its own replica); give "
                        "--data-parallel-shard-degree 2 or more");
  if (f.overlapParamGather && !sharded)
    return fail("--overlap-param-gather prefetches the all-gathers of sharded parameters, and nothing is sharded; "
                "add --use-distributed-optimizer (or a --data-parallel-sharding-strategy) or drop it");
  if (f.overlapParamGather && !plan.overlapGradReduce)
    return fail("--overlap-param-gather needs --overlap-grad-reduce as well (as in Megatron); add it");
  ReshardAfterForward reshard = ReshardAfterForward::Default;
  if (!f.reshardAfterForward.empty()) {
    std::optional<ReshardAfterForward> r = parseReshardAfterForward(f.reshardAfterForward);
    if (!r)
      return fail("--fsdp-reshard-after-forward " + f.reshardAfterForward +
                  " is not a choice; give default (always, but never under pipeline parallelism), always or never");
    if (*strategy != ShardingStrategy::OptimGradsParams)
      return fail("--fsdp-reshard-after-forward says whether gathered parameters are freed after forward; only "
                  "--data-parallel-sharding-strategy optim_grads_params gathers them (the strategy is " +
                  Twine(shardingStrategyName(*strategy)) + ")");
    reshard = *r;
  }
  double offload = 0;
  if (!f.offloadFraction.empty() && !f.optimizerCpuOffload)
    return fail("--optimizer-offload-fraction " + f.offloadFraction +
                " says how much of the optimizer --optimizer-cpu-offload moves to the host; add "
                "--optimizer-cpu-offload or drop it");
  if (f.optimizerCpuOffload) {
    if (!sharded)
      return fail("--optimizer-cpu-offload steps the distributed optimizer's shards on the host, and nothing is "
                  "sharded; add --use-distributed-optimizer (or a --data-parallel-sharding-strategy)");
    offload = 1;
    if (!f.offloadFraction.empty()) {
      char *end = nullptr;
      offload = std::strtod(f.offloadFraction.c_str(), &end);
      if (end == f.offloadFraction.c_str() || *end != '\0' || !std::isfinite(offload) || offload <= 0 || offload > 1)
        return fail("--optimizer-offload-fraction " + f.offloadFraction +
                    " is not a fraction; give a number above 0 and at most 1 (the share of each shard stepped on "
                    "the host)");
    }
  }
  plan.optimizerOffloadFraction = offload;
  plan.sharding = *strategy;
  plan.shardDegree = *shard;
  plan.overlapParamGather = f.overlapParamGather;
  plan.reshardAfterForward = reshard;
  return Error::success();
}
