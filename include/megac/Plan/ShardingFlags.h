// The plan flags of sharded data parallelism, as given, and how they resolve into a plan:
// Megatron's --use-distributed-optimizer and --num-distributed-optimizer-instances,
// Megatron-FSDP's --data-parallel-sharding-strategy, torchtitan's --data-parallel-shard-degree /
// --data-parallel-replicate-degree and --fsdp-reshard-after-forward, --overlap-param-gather, and
// ZeRO-Offload's --optimizer-cpu-offload / --optimizer-offload-fraction (Megatron's).
#pragma once

#include "megac/Plan/ParallelPlan.h"

#include "llvm/Support/Error.h"

#include <string>

namespace megac {

struct ShardingFlags {
  std::string strategy;           // "" = not given
  bool useDistributedOptimizer = false;
  int64_t optimizerInstances = 0; // 0 = not given
  int64_t shardDegree = 0;        // 0 = not given (torchtitan's -1, "the rest", is accepted too)
  int64_t replicateDegree = 0;    // 0 = not given
  bool overlapParamGather = false;
  std::string reshardAfterForward; // "" = not given
  bool optimizerCpuOffload = false;
  std::string offloadFraction;     // "" = not given (1, as Megatron)
};

/// Sets plan.sharding, shardDegree, overlapParamGather and reshardAfterForward from `flags`
/// (plan.dp, pp and overlapGradReduce already set), or says which flag to change and how.
llvm::Error resolveSharding(ParallelPlan &plan, const ShardingFlags &flags);

} // namespace megac
