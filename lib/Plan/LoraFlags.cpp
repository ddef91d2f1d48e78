#include "megac/Plan/LoraFlags.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstdio>

using namespace llvm;
using namespace megac;

static Error fail(const Twine &message) { return createStringError(inconvertibleErrorCode(), message); }

static std::string number(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", v);
  return text;
}

double LoraPlan::scaling() const {
  return rslora ? alpha / std::sqrt(static_cast<double>(rank)) : alpha / static_cast<double>(rank);
}

std::vector<std::string> megac::loraCandidateModules(StringRef family) {
  if (family == "gpt2")
    return {"attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj"};
  if (family == "bert" || family == "megatron_bert")
    return {"attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense",
            "intermediate.dense", "output.dense"};
  return {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
          "mlp.gate_proj",    "mlp.up_proj",      "mlp.down_proj"};
}

/// PEFT's TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING for the families megac builds.
static std::vector<std::string> peftDefaultTargets(StringRef family) {
  if (family == "gpt2")
    return {"c_attn"};
  if (family == "bert" || family == "megatron_bert")
    return {"query", "value"};
  return {"q_proj", "v_proj"};
}

static bool matches(StringRef module, StringRef target) {
  return module == target || module.ends_with(("." + target).str());
}

Error megac::resolveLora(ParallelPlan &plan, const LoraFlags &f, StringRef family) {
  if (f.qloraBlockSize && !f.qlora)
    return fail("--qlora-block-size " + Twine(*f.qloraBlockSize) + " sizes QLoRA's NF4 blocks, but --qlora is not "
                "given; add --qlora or drop --qlora-block-size");
  const int64_t block = f.qloraBlockSize.value_or(64);
  if (f.qlora && (block < 2 || block > kMaxNf4Block || block % 2 != 0))
    return fail("--qlora-block-size " + Twine(block) + " must be even and between 2 and " + Twine(kMaxNf4Block) +
                " (bitsandbytes' default and QLoRA's: 64)");
  const bool given = f.alpha || f.dropout != 0 || !f.targets.empty() || f.rslora || f.qlora;
  if (f.rank == 0) {
    if (given)
      return fail("--lora-alpha, --lora-dropout, --lora-target-modules, --use-rslora and --qlora configure LoRA, "
                  "which --lora-rank turns on; give --lora-rank (PEFT's r, e.g. 8)");
    return Error::success();
  }
  if (f.rank < 1 || f.rank > kMaxLoraRank)
    return fail("--lora-rank " + Twine(f.rank) + " is not a rank; give one between 1 and " + Twine(kMaxLoraRank) +
                " (PEFT's r, e.g. 8)");
  if (plan.ep > 1) // the frozen experts would be split over ep, which the frozen store does not do
    return fail("--expert-model-parallel-size " + Twine(plan.ep) + " with --lora-rank is not built yet (issue [19]); "
                "fine-tune the experts with LoRA without expert parallelism");
  const double alpha = f.alpha.value_or(static_cast<double>(f.rank));
  if (!std::isfinite(alpha) || alpha <= 0)
    return fail("--lora-alpha " + number(alpha) + " must be a positive number (the adapters are scaled by alpha / "
                "rank; default: the rank)");
  if (!(f.dropout >= 0 && f.dropout < 1))
    return fail("--lora-dropout " + number(f.dropout) + " must be at least 0 and below 1 (PEFT's lora_dropout)");
  const std::vector<std::string> candidates = loraCandidateModules(family);
  std::vector<std::string> targets = f.targets.empty() ? peftDefaultTargets(family) : f.targets;
  LoraPlan lora{f.rank, alpha, f.dropout, {}, f.rslora, f.qlora ? block : 0};
  const bool allLinear = targets.size() == 1 && targets[0] == "all-linear";
  for (const std::string &t : targets) {
    if (t == "all-linear" && !allLinear)
      return fail("--lora-target-modules " + join(f.targets, ",") +
                  ": all-linear stands alone (it is every linear layer but the output layer)");
    if (!allLinear && none_of(candidates, [&](const std::string &m) { return matches(m, t); }))
      return fail("--lora-target-modules: " + t + " is no linear layer of a " + family +
                  " layer; its modules are " + join(candidates, ", ") +
                  " (give their names, e.g. " + candidates.front().substr(candidates.front().rfind('.') + 1) +
                  ", or all-linear)");
  }
  for (const std::string &m : candidates)
    if (allLinear || any_of(targets, [&](const std::string &t) { return matches(m, t); }))
      lora.modules.push_back(m);
  plan.lora = std::move(lora);
  return Error::success();
}

std::string megac::peftAdapterConfig(const LoraPlan &lora, StringRef family) {
  json::Array modules;
  for (const std::string &m : lora.modules)
    modules.push_back(m);
  json::Object config{{"peft_type", "LORA"},
                      {"task_type", "CAUSAL_LM"},
                      {"base_model_name_or_path", nullptr},
                      {"r", lora.rank},
                      {"lora_alpha", lora.alpha},
                      {"lora_dropout", lora.dropout},
                      {"target_modules", std::move(modules)},
                      // GPT-2's Conv1D stores its weight [in, out]: PEFT marks it so.
                      {"fan_in_fan_out", family == "gpt2"},
                      {"bias", "none"},
                      {"use_rslora", lora.rslora},
                      {"use_dora", false},
                      {"init_lora_weights", true},
                      {"inference_mode", true},
                      {"modules_to_save", nullptr}};
  std::string text;
  raw_string_ostream os(text);
  os << formatv("{0:2}", json::Value(std::move(config))) << "\n";
  return text;
}
