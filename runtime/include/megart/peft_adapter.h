// PEFT adapter folders (adapter_config.json + adapter_model.safetensors) both ways: the base
// model a LoRA checkpoint's adapter_config.json names, so that PEFT's
// AutoPeftModelForCausalLM.from_pretrained(folder) finds it; and for a folder PEFT saved, the
// base it names and the modules its tensors adapt.
#pragma once

#include <string>
#include <vector>

namespace megart {

// base_model_name_or_path for a run on the base model `base_weights` (absolute paths of its
// weight files; empty: a random base): the folder holding them when transformers can load it
// (it has a config.json), else the first weight file itself; "" for a random base.
std::string peft_base_model_path(const std::vector<std::string> &base_weights);

// `adapter_config_json` (PEFT's LoraConfig as JSON) with base_model_name_or_path set to `base`,
// null when empty.
std::string adapter_config_with_base(const std::string &adapter_config_json, const std::string &base);

// The base model that a PEFT adapter folder's adapter_config.json (`adapter_config_path`) names
// in base_model_name_or_path, as a local path (a relative one is read from the working
// directory, as transformers reads it). Throws naming the field, its value and the fix
// (--pretrained-checkpoint BASE) when it names none, or no local file or folder (a Hub name:
// megac downloads nothing).
std::string peft_named_base(const std::string &adapter_config_path);

// A PEFT adapter folder's tensors, DIR/adapter_model.safetensors. Throws "WHAT: the folder has
// adapter_config.json but no adapter_model.safetensors" and the fix (PEFT's pickle format named
// as such) when it has none: OUT/train's --load, and megac generate before it compiles.
std::string peft_adapter_tensors(const std::string &dir, const std::string &what);

// The modules an adapter file's tensors adapt, sorted and unique, as paths inside a transformer
// layer ("attn.c_attn" of base_model.model.transformer.h.0.attn.c_attn.lora_A.weight); a module
// outside the layers keeps its whole path ("lm_head"). Tensors that are not lora_A / lora_B
// weights are left out (the store's load names them).
std::vector<std::string> adapted_modules(const std::vector<std::string> &tensor_names);

} // namespace megart
