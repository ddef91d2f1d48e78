// A parallel plan (Megatron's names: pipeline, data and tensor parallel sizes, sequence
// parallelism, the pipeline schedule, the gradient buckets). The frontend checks it against the
// spec (megac/Frontend/PlanChecks.h) and records it in the IR (megac/Plan/PlanIR.h).
#pragma once

#include "pipe/schedule/Schedule.h"

#include <cstdint>

#include <optional>
#include <tuple>
#include <string>
#include <vector>

namespace megac {

/// Which training state the data-parallel ranks shard (Megatron-FSDP's
/// --data-parallel-sharding-strategy; ZeRO stages 0 to 3).
enum class ShardingStrategy { NoShard, Optim, OptimGrads, OptimGradsParams };
/// The flag's spelling of each strategy ("no_shard", "optim", "optim_grads", "optim_grads_params").
const char *shardingStrategyName(ShardingStrategy s);
std::optional<ShardingStrategy> parseShardingStrategy(const std::string &name);

/// ZeRO-3 / FSDP: whether parameters are freed after a forward and gathered again for backward
/// (torchtitan's fsdp_reshard_after_forward; "default" = always, except under pipeline
/// parallelism, where it would cost an all-gather per microbatch).
enum class ReshardAfterForward { Default, Always, Never };
const char *reshardAfterForwardName(ReshardAfterForward r);
std::optional<ReshardAfterForward> parseReshardAfterForward(const std::string &name);

/// Activation recomputation (Megatron's --recompute-granularity): none, every layer's internals
/// recomputed from its input in backward (full), or only some modules inside each layer
/// (selective).
enum class RecomputeGranularity { None, Full, Selective };
/// Which layers full recomputation covers (Megatron's --recompute-method): groups of N
/// consecutive layers of each chunk, each stashing only its input (uniform), or the first N
/// layers of each chunk, one at a time, the others not recomputed (block).
enum class RecomputeMethod { Uniform, Block };

struct RecomputePlan {
  RecomputeGranularity granularity = RecomputeGranularity::None;
  RecomputeMethod method = RecomputeMethod::Uniform;
  int64_t numLayers = 0;               // full: N of the method
  std::vector<std::string> modules;    // selective: core_attn, mlp, layernorm (Megatron's names)
  bool distributeSavedActivations = false; // full with tp: each group's input kept split over tp
  auto fields() const { return std::tie(granularity, method, numLayers, modules, distributeSavedActivations); }
  bool operator==(const RecomputePlan &o) const { return fields() == o.fields(); }
};
const char *recomputeGranularityName(RecomputeGranularity g);
std::optional<RecomputeGranularity> parseRecomputeGranularity(const std::string &name);
const char *recomputeMethodName(RecomputeMethod m);
std::optional<RecomputeMethod> parseRecomputeMethod(const std::string &name);

/// What the activations are stored in (megac compile --bf16 / --fp16, Megatron's flags): fp32, or
/// 16-bit by autocast rules (megac-autocast); parameters, their gradients and the optimizer stay
/// fp32 either way.
enum class ActivationPrecision { Fp32, Bf16, Fp16 };
/// "fp32", "bf16", "fp16".
const char *activationPrecisionName(ActivationPrecision p);
std::optional<ActivationPrecision> parseActivationPrecision(const std::string &name);

/// LoRA fine-tuning (PEFT's LoraConfig, `megac compile --lora-rank`): the base model frozen, and
/// on each targeted linear layer of every transformer layer y = W x + (B A x) * scaling, A [r, in],
/// B [out, r], scaling = alpha / r (alpha / sqrt(r) with rsLoRA). rank 0: no LoRA.
struct LoraPlan {
  int64_t rank = 0;
  double alpha = 0;
  double dropout = 0;                 // on the adapter's input, as PEFT's lora_dropout
  std::vector<std::string> modules;   // module paths inside a layer ("attn.c_attn"), the family's order
  bool rslora = false;
  // QLoRA: the frozen linear weights of the layers kept in NF4 with double quantization in blocks
  // of this many elements (bitsandbytes' layout); 0: fp32.
  int64_t nf4Block = 0;
  bool enabled() const { return rank > 0; }
  double scaling() const;
  auto fields() const { return std::tie(rank, alpha, dropout, modules, rslora, nf4Block); }
  bool operator==(const LoraPlan &o) const { return fields() == o.fields(); }
};

struct ParallelPlan {
  // The grid's sizes in Megatron's rank order, slowest first (tp varies fastest).
  int64_t pp = 1, dp = 1, tp = 1;
  // Expert parallelism (Megatron's --expert-model-parallel-size): groups of ep consecutive dp ranks
  // split the experts between them (each holds experts / ep), their tokens exchanged all-to-all;
  // the ranks holding the same experts (dp / ep of them) sum the experts' gradients.
  int64_t ep = 1;
  // Expert tensor parallelism (Megatron's --expert-tensor-parallel-size): 0 (not given) is tp,
  // Megatron's default: each expert's ffn split over the tp ranks like a dense MLP's; 1: every
  // expert whole on every tp rank. expertTensorParallel() gives the size.
  int64_t etp = 0;
  bool sp = false;
  int64_t makeVocabSizeDivisibleBy = 128; // Megatron's flag and default
  // Pipeline parallelism: vpp chunks per pipeline rank (virtual stages), their layer counts in
  // chunk order (empty: the layers split evenly), the schedule (none given = interleaved when
  // vpp > 1, else 1f1b; always set once checked when pp > 1) and the microbatches per dp rank the
  // schedule is compiled for (0 = pp).
  int64_t vpp = 1;
  int64_t layersPerVirtualStage = 0; // Megatron's --num-layers-per-virtual-pipeline-stage
  std::vector<int64_t> pipelineLayout;
  std::optional<pipeline::ScheduleKind> pipelineSchedule;
  int64_t numMicrobatches = 0;
  // Data parallelism: elements per gradient bucket, and whether each bucket's all-reduce starts
  // during backward (Megatron's --ddp-bucket-size and --overlap-grad-reduce).
  int64_t ddpBucketSize = 40000000;
  bool overlapGradReduce = false;
  // Sharded data parallelism: what is sharded, over groups of shardDegree dp ranks (dp =
  // shardDegree x replicas; the state is replicated across the groups: HSDP, or Megatron's
  // --num-distributed-optimizer-instances), whether the parameter all-gathers are prefetched
  // (--overlap-param-gather) and, for optim_grads_params, whether forward frees what it gathered.
  ShardingStrategy sharding = ShardingStrategy::NoShard;
  int64_t shardDegree = 1;
  bool overlapParamGather = false;
  ReshardAfterForward reshardAfterForward = ReshardAfterForward::Default;
  // ZeRO-Offload: the fraction of each rank's shard whose optimizer step runs on the host (its
  // master weights and moments in host memory); 0: none.
  double optimizerOffloadFraction = 0;
  RecomputePlan recompute;
  ActivationPrecision precision = ActivationPrecision::Fp32;
  LoraPlan lora;
  /// Elements of a shard of `shardNumel` stepped on the host.
  int64_t offloadedNumel(int64_t shardNumel) const {
    return static_cast<int64_t>(optimizerOffloadFraction * static_cast<double>(shardNumel));
  }

  /// Whether optim_grads_params frees the gathered parameters after each forward.
  bool reshardsAfterForward() const {
    return sharding == ShardingStrategy::OptimGradsParams &&
           (reshardAfterForward == ReshardAfterForward::Always ||
            (reshardAfterForward == ReshardAfterForward::Default && pp == 1));
  }

  /// optim_grads_params without resharding after forward: a chunk's forward and backward run
  /// apart (pp = 1 too: one chunk), so the parameters stay gathered from one step's all-gather to
  /// the next, as torchtitan's FSDP keeps them with pp; each rank holds optim_grads' state.
  bool keepsParamsGathered() const {
    return sharding == ShardingStrategy::OptimGradsParams && !reshardsAfterForward();
  }
  /// What the ranks keep sharded while training: the strategy, or optim_grads where the
  /// parameters stay gathered (keepsParamsGathered).
  ShardingStrategy shardedState() const { return keepsParamsGathered() ? ShardingStrategy::OptimGrads : sharding; }
  /// Whether a tied weight's copies (under pp) sum their gradients' shards, reduce-scattered in
  /// backward (ZeRO-2/3, and the distributed optimizer with --overlap-grad-reduce), rather than the
  /// whole gradients before the data-parallel sync.
  bool tiedGradsOnShards() const {
    const ShardingStrategy held = shardedState();
    return held == ShardingStrategy::OptimGrads || held == ShardingStrategy::OptimGradsParams ||
           (overlapGradReduce && held == ShardingStrategy::Optim);
  }

  /// The vocabulary rounded up to a multiple of makeVocabSizeDivisibleBy x tp (Megatron).
  int64_t paddedVocab(int64_t vocab) const {
    int64_t multiple = makeVocabSizeDivisibleBy * tp;
    return (vocab + multiple - 1) / multiple * multiple;
  }

  int64_t worldSize() const { return tp * pp * dp; }
  int64_t expertTensorParallel() const { return etp ? etp : tp; }
  // Every field, for equality (#megac.plan is uniqued by it): a new field goes here too.
  auto fields() const {
    return std::tie(pp, dp, tp, ep, etp, sp, makeVocabSizeDivisibleBy, vpp, layersPerVirtualStage, pipelineLayout,
                    pipelineSchedule, numMicrobatches, ddpBucketSize, overlapGradReduce, sharding, shardDegree,
                    overlapParamGather, reshardAfterForward, optimizerOffloadFraction, recompute, precision, lora);
  }
  bool operator==(const ParallelPlan &o) const { return fields() == o.fields(); }
  std::string summary() const;
  /// One line per global rank: Megatron's order, tp fastest, then dp, then pp (the runtime's
  /// table, megart/grid_layout.h).
  std::string rankLayout() const;
};
/// For uniquing #megac.plan: the sizes suffice to spread plans over buckets; equality decides.
size_t hash_value(const ParallelPlan &plan);

} // namespace megac
