// The config.json that lets transformers load megac's checkpoints of a model:
// AutoModelForCausalLM.from_pretrained(iteration folder) with nothing written by hand.
#pragma once

#include "megac/Frontend/ModelSpec.h"

#include <string>

namespace megac {

struct HuggingFaceConfig {
  std::string json;    // GPT2LMHeadModel or LlamaForCausalLM; empty when there is none
  std::string whyNone; // when json is empty: which key has no Hugging Face equivalent
};

/// GPT-2 family: GPT2LMHeadModel (LayerNorm, tanh GELU "gelu_new", learned positions, biases,
/// multi-head attention). Llama family: LlamaForCausalLM (RMSNorm, SwiGLU "silu", rope, no
/// biases). Qwen2 family: Qwen2ForCausalLM (Llama's, with biases on q, k and v). A spec that
/// leaves these layouts gets no config, and says why.
HuggingFaceConfig huggingFaceConfig(const ModelSpec &spec);

} // namespace megac
