#include "megac/Frontend/ParallelPlan.h"

#include "llvm/ADT/Twine.h"

using namespace llvm;
using namespace megac;

std::string ParallelPlan::summary() const {
  return "tp " + std::to_string(tp) + " pp " + std::to_string(pp) + " dp " + std::to_string(dp) + (sp ? " sp" : "");
}

std::string ParallelPlan::rankLayout() const {
  std::string text = "global rank -> (dp, pp, tp)\n";
  for (int64_t rank = 0; rank < worldSize(); ++rank) {
    int64_t t = rank % tp, d = (rank / tp) % dp, p = rank / (tp * dp);
    text += "  rank " + std::to_string(rank) + " -> (" + std::to_string(d) + ", " + std::to_string(p) + ", " +
            std::to_string(t) + ")\n";
  }
  return text;
}

static Error fail(const Twine &message) { return createStringError(inconvertibleErrorCode(), message); }

Error megac::validatePlan(const ParallelPlan &plan, const ModelSpec &spec) {
  for (auto [flag, size] : {std::pair<StringRef, int64_t>{"--tensor-model-parallel-size", plan.tp},
                            {"--pipeline-model-parallel-size", plan.pp}, {"--data-parallel-size", plan.dp}})
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
  if (Error e = divisible("ffn_hidden_size", spec.ffnHiddenSize))
    return e;
  if (plan.makeVocabSizeDivisibleBy < 1)
    return fail("--make-vocab-size-divisible-by must be >= 1, got " + Twine(plan.makeVocabSizeDivisibleBy));
  if (plan.sp && plan.tp == 1)
    return fail("--sequence-parallel splits the sequence over the tensor-parallel ranks, so it needs "
                "--tensor-model-parallel-size > 1 (got 1)");
  if (plan.sp && spec.seqLength % plan.tp != 0)
    return fail("seq_length (" + Twine(spec.seqLength) + ") is not divisible by tensor parallel size (" +
                Twine(plan.tp) + "), which --sequence-parallel splits it by");
  if (plan.pp > 1)
    return fail("--pipeline-model-parallel-size " + Twine(plan.pp) + " is not implemented yet (issue [4])");
  return Error::success();
}
