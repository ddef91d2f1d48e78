// The LoRA flags, with PEFT's names and defaults (LoraConfig's r, lora_alpha, lora_dropout,
// target_modules, use_rslora), and how they resolve into the plan's LoraPlan.
#pragma once

#include "megac/Plan/ParallelPlan.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <vector>

namespace megac {

struct LoraFlags {
  int64_t rank = 0;                    // --lora-rank (0: no LoRA)
  std::optional<double> alpha;         // --lora-alpha (default: the rank)
  double dropout = 0;                  // --lora-dropout
  std::vector<std::string> targets;    // --lora-target-modules (empty: PEFT's default)
  bool rslora = false;                 // --use-rslora
  bool qlora = false;                  // --qlora: the base's linear weights in NF4
  std::optional<int64_t> qloraBlockSize; // --qlora-block-size (default 64)
};

/// The largest NF4 block (bitsandbytes' blocksizes reach 4096).
inline constexpr int64_t kMaxNf4Block = 4096;

/// The largest LoRA rank megac takes (PEFT's ranks are 4 to 256).
inline constexpr int64_t kMaxLoraRank = 1 << 16;

/// The linear layers of one transformer layer of `family`, as Hugging Face names their modules
/// inside a layer (attn.c_attn, ..., mlp.down_proj), in the order the layer runs them. The
/// output layer (lm_head) is not among them, as PEFT's all-linear leaves it out.
std::vector<std::string> loraCandidateModules(llvm::StringRef family);

/// Sets plan.lora from `flags` for a model of `family`, or says which flag to change: a target
/// matches a module whose path is it or ends in "." + it (PEFT's suffix match); all-linear is
/// every candidate; without targets PEFT's default for the architecture (gpt2: c_attn; llama:
/// q_proj, v_proj).
llvm::Error resolveLora(ParallelPlan &plan, const LoraFlags &flags, llvm::StringRef family);

/// PEFT's adapter_config.json for `lora` on a model of `family` (LoraConfig's keys; the target
/// modules as paths inside a layer, which PEFT matches as suffixes).
std::string peftAdapterConfig(const LoraPlan &lora, llvm::StringRef family);

} // namespace megac
