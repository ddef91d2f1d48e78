// What a checkpoint or a Hugging Face folder says about its model, checked against the compiled
// program before any tensor is read: tensor names and shapes alone would load a model with
// another norm epsilon, rope base, activation or adapter scale and train it silently.
//   - config.json (a Hugging Face folder, a megac checkpoint, a LoRA run's base) against the
//     config the compiler wrote for the program: every field that changes the mathematics must
//     agree; documentary fields (transformers_version, torch_dtype, token ids...) and dropout
//     rates (a training choice) are not compared; a field megac does not implement is named.
//   - the spec a checkpoint records (train_state.json "spec") against the program's, key by key,
//     on resume: a resumed run continues the same model.
//   - adapter_config.json (PEFT's) against the program's LoRA settings and against the record
//     train_state.json keeps of them.
// Each throws megart::Error naming the file, every field that differs with both values, and
// the fix.
#pragma once

#include <set>
#include <string>
#include <vector>

namespace megart {

// `config_path` (a config.json) against `program_config` (the program's hf_config_json).
// `what` names the source for messages, e.g. "--load /data/llama"; `fix` ends the message
// (default: compile a spec that matches the file, or load a checkpoint of this model).
void check_hf_config(const std::string &config_path, const std::string &program_config, const std::string &what,
                     const std::string &fix = "");

// The spec text a checkpoint recorded against the program's (flat "key: value" YAML; comments,
// blank lines, line endings and quoting do not count).
void check_spec(const std::string &checkpoint_spec, const std::string &program_spec, const std::string &what);

// `adapter_config` (the JSON text of an adapter_config.json, read from `path`, megac's or one
// PEFT saved) against `expected` (the program's adapter_config_json or the checkpoint's record
// of it): rank, alpha, dropout, targets, rsLoRA and the rest of what changes the adapters'
// mathematics; a setting megac does not implement (DoRA, a bias, per-module ranks, ...) is
// named as such. `adapted`: the modules the adapter file's tensors adapt (peft_adapter.h's
// adapted_modules), which decide target_modules written another way than the program's (PEFT
// keeps the names it was given). `against_program`: each line says which compile flag fits the
// file (else the file is compared with its own run's record).
// LoraConfig's keys that do not change what the adapters compute once their tensors are loaded
// (the one list for check_adapter_config and OUT/train merge-lora): where the base came from and
// bookkeeping; settings read only with a compared one (layers_pattern with layers_to_transform,
// qalora_group_size with use_qalora); exclude_modules, which only narrows the targets (the
// tensors say which modules are adapted); Megatron-wrapped models' megatron_*;
// init_lora_weights, checked apart.
const std::set<std::string> &documentary_adapter_fields();

void check_adapter_config(const std::string &adapter_config, const std::string &path, const std::string &expected,
                          const std::string &expected_what, const std::vector<std::string> &adapted = {},
                          bool against_program = false);

} // namespace megart
