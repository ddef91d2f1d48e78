#include "megart/generation_config.h"

#include "megart/json.h"

namespace megart {

namespace {

JsonValue id_or_null(const std::optional<SpecialToken> &token) {
  return token ? json_integer(token->id) : json_null();
}

} // namespace

std::string config_with_token_ids(const std::string &hf_config_json, const TokenizerRecord &tokenizer) {
  JsonValue config = parse_json(hf_config_json, "the program's config.json");
  set_member(config, "bos_token_id", id_or_null(tokenizer.bos));
  set_member(config, "eos_token_id", id_or_null(tokenizer.eos));
  if (tokenizer.pad)
    set_member(config, "pad_token_id", json_integer(tokenizer.pad->id));
  return format_json(config) + "\n";
}

std::string generation_config_json(const TokenizerRecord &tokenizer) {
  JsonValue config = parse_json("{}", "generation_config");
  set_member(config, "_from_model_config", json_bool(true));
  if (tokenizer.bos)
    set_member(config, "bos_token_id", json_integer(tokenizer.bos->id));
  if (tokenizer.eos)
    set_member(config, "eos_token_id", json_integer(tokenizer.eos->id));
  if (tokenizer.pad)
    set_member(config, "pad_token_id", json_integer(tokenizer.pad->id));
  set_member(config, "transformers_version", json_string(kTransformersVersion));
  return format_json(config) + "\n";
}

} // namespace megart
