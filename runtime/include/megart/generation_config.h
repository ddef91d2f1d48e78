// The token ids a Hugging Face model folder states beside its weights, from the tokenizer a
// checkpoint carries: config.json's bos_token_id / eos_token_id (pad_token_id), and
// generation_config.json as transformers' GenerationConfig.save_pretrained writes it for a
// model's config. Without them transformers falls back on the family's defaults (GPT-2's
// 50256, Llama's 1 and 2), which are not this tokenizer's ids.
#pragma once

#include "megart/tokenizer_record.h"

#include <string>

namespace megart {

// The transformers release whose file format these follow (the project's pinned one).
inline constexpr const char *kTransformersVersion = "4.40.2";

// `hf_config_json` (the program's config.json) with bos_token_id and eos_token_id set to the
// tokenizer's, null where it has none (as transformers writes a None that differs from the
// family's default), and pad_token_id where it has one.
std::string config_with_token_ids(const std::string &hf_config_json, const TokenizerRecord &tokenizer);

// generation_config.json for a model of that config: the ids the tokenizer has,
// "_from_model_config": true and transformers_version, keys sorted (GenerationConfig's diff
// against its defaults, which are None).
std::string generation_config_json(const TokenizerRecord &tokenizer);

} // namespace megart
