// The checks that tie a parallel plan to a model spec, and the defaults the pipeline flags leave.
#include "megac/Frontend/PlanChecks.h"
#include "megac/NumberText.h"
#include "pipe/schedule/Schedule.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/Twine.h"

using namespace llvm;
using namespace megac;

static Error fail(const Twine &message) { return createStringError(inconvertibleErrorCode(), message); }

static std::string joined(ArrayRef<int64_t> values) {
  return join(map_range(values, [](int64_t v) { return std::to_string(v); }), ",");
}

Error megac::resolvePipeline(ParallelPlan &plan, const ModelSpec &spec) {
  const int64_t layers = spec.numLayers;
  if (plan.pp < 1)
    return fail("--pipeline-model-parallel-size must be >= 1, got " + Twine(plan.pp));
  if (plan.vpp < 1)
    return fail("--num-virtual-stages-per-pipeline-rank (--vpp) must be >= 1, got " + Twine(plan.vpp));
  if (plan.layersPerVirtualStage < 0)
    return fail("--num-layers-per-virtual-pipeline-stage must be >= 1, got " + Twine(plan.layersPerVirtualStage));
  if (plan.layersPerVirtualStage > 0) {
    int64_t perRank = plan.layersPerVirtualStage * plan.pp;
    if (layers % perRank != 0)
      return fail("num_layers (" + Twine(layers) + ") is not divisible by --num-layers-per-virtual-pipeline-stage (" +
                  Twine(plan.layersPerVirtualStage) + ") x pipeline size (" + Twine(plan.pp) +
                  "); pick a value whose product with the pipeline size divides num_layers");
    int64_t vpp = layers / perRank;
    if (plan.vpp > 1 && plan.vpp != vpp)
      return fail("--vpp " + Twine(plan.vpp) + " contradicts --num-layers-per-virtual-pipeline-stage " +
                  Twine(plan.layersPerVirtualStage) + " (which gives " + Twine(vpp) + " chunks per rank for " +
                  Twine(layers) + " layers over " + Twine(plan.pp) + " pipeline ranks); give only one of them");
    plan.vpp = vpp;
    plan.layersPerVirtualStage = 0; // folded into vpp, which the plan records
  }
  if (plan.pp == 1 && plan.vpp > 1)
    return fail("--vpp " + Twine(plan.vpp) + " (virtual pipeline stages) needs --pipeline-model-parallel-size > 1");
  if (plan.pp == 1 && !plan.pipelineLayout.empty())
    return fail("--pipeline-layout needs --pipeline-model-parallel-size > 1");
  if (plan.pp == 1 && plan.pipelineSchedule)
    return fail("--pipeline-schedule needs --pipeline-model-parallel-size > 1");
  if (plan.pp == 1)
    return Error::success();

  const int64_t chunks = plan.pp * plan.vpp;
  if (chunks > layers)
    return fail("pipeline size x vpp = " + Twine(plan.pp) + " x " + Twine(plan.vpp) + " = " + Twine(chunks) +
                " chunks, but num_layers is " + Twine(layers) +
                "; every chunk needs at least one layer: "
                "lower --pp or --vpp");
  if (plan.pipelineLayout.empty()) {
    if (layers % chunks != 0)
      return fail("num_layers (" + Twine(layers) + ") is not divisible by pipeline size x vpp (" + Twine(chunks) +
                  "); give --pipeline-layout with " + Twine(chunks) +
                  " comma-separated layer counts (chunk order) "
                  "that sum to " +
                  Twine(layers));
    plan.pipelineLayout.assign(chunks, layers / chunks);
  } else {
    int64_t sum = 0;
    for (int64_t n : plan.pipelineLayout) {
      if (n < 1)
        return fail("--pipeline-layout " + joined(plan.pipelineLayout) + ": every chunk needs at least one layer");
      sum += n;
    }
    if (static_cast<int64_t>(plan.pipelineLayout.size()) != chunks || sum != layers)
      return fail("--pipeline-layout " + joined(plan.pipelineLayout) + " gives " + Twine(plan.pipelineLayout.size()) +
                  " chunks with " + Twine(sum) + " layers; it needs pipeline size x vpp = " + Twine(chunks) +
                  " counts (chunk c runs on pipeline rank c % " + Twine(plan.pp) +
                  ") that sum to num_layers = " + Twine(layers));
  }
  if (!plan.pipelineSchedule)
    plan.pipelineSchedule = plan.vpp > 1 ? pipeline::ScheduleKind::Interleaved : pipeline::ScheduleKind::OneFOneB;
  if (plan.numMicrobatches == 0)
    plan.numMicrobatches = plan.pp;
  if (plan.numMicrobatches < 1)
    return fail("the number of microbatches must be >= 1, got " + Twine(plan.numMicrobatches));
  // Whether the schedule exists (megac-pipeline-schedule builds it, into the IR).
  return pipeline::checkScheduleExists(*plan.pipelineSchedule, static_cast<int>(plan.pp), static_cast<int>(plan.vpp),
                                       static_cast<int>(plan.numMicrobatches));
}

/// What of a mixture of experts this megac computes so far (issue [19] builds the rest): float32.
/// Expert parallelism: experts to split, evenly, and what it composes with so far.
static Error expertParallelFits(const ParallelPlan &plan, const ModelSpec &spec) {
  const Twine flag = "--expert-model-parallel-size " + Twine(plan.ep);
  if (!spec.isMixtureOfExperts())
    return fail(flag + ": the model has no experts (num_experts is 0) to split; leave it out");
  if (spec.numExperts % plan.ep != 0)
    return fail("num_experts (" + Twine(spec.numExperts) + ") is not divisible by --expert-model-parallel-size (" +
                Twine(plan.ep) + "); choose an --expert-model-parallel-size that divides it");
  // 16-bit rows travel between the ep ranks as fp32 words (two elements each).
  if (plan.precision != ActivationPrecision::Fp32 && spec.hiddenSize % 2 != 0)
    return fail(flag + " with --" + activationPrecisionName(plan.precision) + " and hidden_size " +
                Twine(spec.hiddenSize) + ": the experts' 16-bit rows are exchanged as pairs of elements, so "
                "hidden_size must be even; use an even hidden_size, or fp32");
  // The experts' state shards over the dp ranks holding the same experts; with hybrid sharding the
  // dense state would shard over a part of dp and the experts' over another: not built.
  if (plan.sharding != ShardingStrategy::NoShard && plan.shardDegree != plan.dp)
    return fail(flag + " with hybrid sharding (shard groups of " + Twine(plan.shardDegree) + " of the " +
                Twine(plan.dp) + " dp ranks) is not built yet; shard over every dp rank (drop "
                "--num-distributed-optimizer-instances / --data-parallel-replicate-degree / "
                "--data-parallel-shard-degree) or leave out --ep");
  return Error::success();
}

Error megac::validatePlan(const ParallelPlan &plan, const ModelSpec &spec) {
  for (auto [flag, size] : {std::pair<StringRef, int64_t>{"--tensor-model-parallel-size", plan.tp},
                            {"--pipeline-model-parallel-size", plan.pp},
                            {"--data-parallel-size", plan.dp}})
    if (size < 1)
      return fail(flag + " must be >= 1, got " + Twine(size));
  auto divisible = [&](StringRef key, int64_t value) -> Error {
    if (value % plan.tp == 0)
      return Error::success();
    return fail(key + " (" + Twine(value) + ") is not divisible by tensor parallel size (" + Twine(plan.tp) +
                "); choose a --tensor-model-parallel-size that divides it");
  };
  if (Error e = divisible("num_attention_heads", spec.numAttentionHeads))
    return e;
  if (Error e = divisible("num_query_groups", spec.numQueryGroups))
    return e;
  if (!spec.isMixtureOfExperts())
    if (Error e = divisible("ffn_hidden_size", spec.ffnHiddenSize))
      return e;
  if (plan.ep > 1)
    if (Error e = expertParallelFits(plan, spec))
      return e;
  // The layers carry the routers' load and z-loss in fp32 beside the residual stream, which
  // 16-bit activations make bf16 / fp16: the pipeline sends one buffer of one element type.
  const bool carries = spec.isMixtureOfExperts() &&
                       ((spec.moeAuxLossCoeff > 0.0 && spec.moeRouterLoadBalancingType != "none") ||
                        spec.moeZLossCoeff > 0.0);
  if (carries && plan.pp > 1 && plan.precision != ActivationPrecision::Fp32)
    return fail(Twine("--") + activationPrecisionName(plan.precision) +
                " with --pipeline-model-parallel-size " + Twine(plan.pp) +
                " and a load-balancing or z-loss (moe_aux_loss_coeff / moe_z_loss_coeff above 0) is not built yet: "
                "the layers carry the routers' load in fp32 beside a 16-bit residual stream, which the pipeline "
                "cannot send as one buffer; leave out one of the three");
  if (plan.etp != 0) {
    const Twine flag = "--expert-tensor-parallel-size " + Twine(plan.etp);
    if (!spec.isMixtureOfExperts())
      return fail(flag + ": the model has no experts (num_experts is 0) to split; leave it out");
    // Megatron also folds a smaller one into ep; megac builds the experts whole or split as the
    // dense layers are.
    if (plan.etp != 1 && plan.etp != plan.tp)
      return fail(flag + " with --tensor-model-parallel-size " + Twine(plan.tp) +
                  ": megac builds 1 (every expert whole on each tensor-parallel rank) or the tensor-parallel size (each "
                  "expert's ffn split over the tensor-parallel ranks, Megatron's default); give 1 or " + Twine(plan.tp) +
                  ", or leave it out");
  }
  if (plan.makeVocabSizeDivisibleBy < 1)
    return fail("--make-vocab-size-divisible-by must be >= 1, got " + Twine(plan.makeVocabSizeDivisibleBy));
  if (plan.sp && plan.tp == 1)
    return fail("--sequence-parallel splits the sequence over the tensor-parallel ranks, so it needs "
                "--tensor-model-parallel-size > 1 (got 1)");
  if (plan.sp && spec.seqLength % plan.tp != 0)
    return fail("seq_length (" + Twine(spec.seqLength) + ") is not divisible by tensor parallel size (" +
                Twine(plan.tp) + "), which --sequence-parallel splits it by");
  return Error::success();
}
