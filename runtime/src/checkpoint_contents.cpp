#include "megart/checkpoint_contents.h"

#include "megart/generation_config.h"

namespace megart {

CheckpointOptions checkpoint_contents(const ProgramDesc &program, int64_t keep_latest, const TokenizerRecord *tokenizer,
                                      const std::vector<std::string> &base_weights) {
  CheckpointOptions options;
  options.keep_latest = keep_latest;
  options.hf_config_json = program.hf_config_json ? program.hf_config_json : "";
  if (tokenizer) {
    options.extra_files = tokenizer_checkpoint_files(*tokenizer);
    if (!options.hf_config_json.empty()) {
      options.hf_config_json = config_with_token_ids(options.hf_config_json, *tokenizer);
      options.extra_files.emplace_back("generation_config.json", generation_config_json(*tokenizer));
    }
  }
  options.adapter_config_json = program.adapter_config_json ? program.adapter_config_json : "";
  (void)base_weights;
  return options;
}

} // namespace megart
