#include "megac/Plan/RecomputeFlags.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/Twine.h"

using namespace llvm;
using namespace megac;

const char *const megac::kRecomputeModules[3] = {"core_attn", "mlp", "layernorm"};

// Megatron's modules that need layers megac's models do not have (mixture of experts, MLA).
static constexpr StringLiteral kAbsentModules[] = {"moe_act", "moe", "shared_experts", "mla_up_proj"};

static Error fail(const Twine &message) { return createStringError(inconvertibleErrorCode(), message); }

static Expected<RecomputeGranularity> granularityOf(const RecomputeFlags &f) {
  if (f.recomputeActivations) {
    if (!f.granularity.empty() && f.granularity != "selective")
      return fail("--recompute-activations means --recompute-granularity selective, but --recompute-granularity is " +
                  f.granularity + "; give one of them");
    return RecomputeGranularity::Selective;
  }
  if (f.granularity.empty())
    return RecomputeGranularity::None;
  std::optional<RecomputeGranularity> g = parseRecomputeGranularity(f.granularity);
  if (!g || *g == RecomputeGranularity::None)
    return fail("--recompute-granularity " + f.granularity +
                " is not a granularity; choose full (recompute each layer from its input) or selective (recompute "
                "parts of each layer, --recompute-modules)");
  return *g;
}

Error megac::resolveRecompute(ParallelPlan &plan, const RecomputeFlags &f) {
  Expected<RecomputeGranularity> granularity = granularityOf(f);
  if (!granularity)
    return granularity.takeError();
  RecomputePlan r;
  r.granularity = *granularity;
  const bool full = r.granularity == RecomputeGranularity::Full;
  const bool selective = r.granularity == RecomputeGranularity::Selective;
  if (!full && !f.method.empty())
    return fail("--recompute-method " + f.method + " chooses the layers full recomputation covers, but " +
                (selective ? Twine("the granularity is selective (a method is not supported with it, as in Megatron)")
                           : Twine("no --recompute-granularity is given")) +
                "; give --recompute-granularity full or drop --recompute-method");
  if (!full && f.numLayers != 0)
    return fail("--recompute-num-layers " + Twine(f.numLayers) + " counts layers of full recomputation, but " +
                (selective ? "the granularity is selective" : "no --recompute-granularity is given") +
                "; give --recompute-granularity full or drop --recompute-num-layers");
  if (!selective && !f.modules.empty())
    return fail("--recompute-modules " + join(f.modules, " ") + " chooses what selective recomputation covers, but " +
                (full ? "the granularity is full (every module is recomputed)" : "no --recompute-granularity is given") +
                "; give --recompute-granularity selective or drop --recompute-modules");
  if (full) {
    if (f.method.empty())
      return fail("--recompute-granularity full needs --recompute-method uniform (groups of --recompute-num-layers "
                  "layers, each stashing its input) or block (the first --recompute-num-layers layers of each "
                  "pipeline chunk), as in Megatron");
    std::optional<RecomputeMethod> m = parseRecomputeMethod(f.method);
    if (!m)
      return fail("--recompute-method " + f.method + " is not a method; choose uniform or block");
    r.method = *m;
    if (f.numLayers == 0)
      return fail("--recompute-granularity full needs --recompute-num-layers N (1 or more: the layers per group with "
                  "uniform, recomputed per chunk with block), as in Megatron");
    if (f.numLayers < 0)
      return fail("--recompute-num-layers is " + Twine(f.numLayers) + "; give 1 or more");
    r.numLayers = f.numLayers;
  }
  if (selective) {
    r.modules = f.modules.empty() ? std::vector<std::string>{"core_attn"} : f.modules;
    for (const std::string &m : r.modules) {
      if (is_contained(kAbsentModules, StringRef(m)))
        return fail("--recompute-modules " + m + " recomputes a mixture-of-experts or MLA module, and megac's models "
                    "(gpt2, llama) have none; choose from core_attn, mlp, layernorm");
      if (!is_contained(kRecomputeModules, StringRef(m)))
        return fail("--recompute-modules " + m + " is not a module; choose from core_attn, mlp, layernorm");
      if (count(r.modules, m) > 1)
        return fail("--recompute-modules names " + m + " twice; name each module once");
    }
  }
  if (f.distributeSavedActivations) {
    if (!full)
      return fail("--distribute-saved-activations splits the inputs full recomputation saves over the tensor-parallel "
                  "ranks; it needs --recompute-granularity full");
    if (plan.tp == 1)
      return fail("--distribute-saved-activations splits the saved layer inputs over the tensor-parallel ranks, and "
                  "--tensor-model-parallel-size is 1; give --tp 2 or more or drop it");
    if (plan.sp)
      return fail("--distribute-saved-activations cannot be used with --sequence-parallel (the saved inputs are "
                  "already split over the sequence), as in Megatron; drop one of them");
    r.distributeSavedActivations = true;
  }
  plan.recompute = std::move(r);
  return Error::success();
}

Error megac::checkRecomputeLayers(const ParallelPlan &plan, int64_t numLayers) {
  const RecomputePlan &r = plan.recompute;
  if (r.granularity != RecomputeGranularity::Full)
    return Error::success();
  int64_t largest = numLayers;
  if (!plan.pipelineLayout.empty())
    largest = *std::max_element(plan.pipelineLayout.begin(), plan.pipelineLayout.end());
  if (r.numLayers > largest)
    return fail("--recompute-num-layers " + Twine(r.numLayers) + " is more than the " + Twine(largest) +
                " layers of the largest " + (plan.pipelineLayout.empty() ? "model" : "pipeline chunk") +
                "; give a number from 1 to " + Twine(largest) + " (groups never cross a chunk)");
  return Error::success();
}
