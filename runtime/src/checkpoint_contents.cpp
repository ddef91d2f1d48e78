#include "megart/checkpoint_contents.h"

#include "megart/generation_config.h"
#include "megart/peft_adapter.h"

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
  // PEFT's AutoPeftModelForCausalLM loads the base from here.
  if (program.adapter_config_json)
    options.adapter_config_json =
        adapter_config_with_base(program.adapter_config_json, peft_base_model_path(base_weights));
  return options;
}

} // namespace megart
