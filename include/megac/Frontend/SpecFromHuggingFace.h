// The spec of a Hugging Face model folder: its config.json read back into megac's keys, the
// inverse of HuggingFaceConfig.h for the two families megac computes (GPT2LMHeadModel,
// LlamaForCausalLM). Only the keys a config.json decides are mapped; whether every other field
// of the file is one megac computes is the runtime's check (megart/checkpoint_match.h), which
// compares the file with the config this spec gives.
#pragma once

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>

namespace megac {

/// The spec YAML of the model `configJson` (the text of `path`, a config.json) describes.
/// Dropout is 0: the rates are a training choice, and a program that generates drops nothing.
/// Fails naming the file, the field, its value and what megac needs: another architecture
/// (by its model_type and architectures), a size that is missing or not a positive integer.
llvm::Expected<std::string> specFromHuggingFaceConfig(llvm::StringRef configJson, llvm::StringRef path);

} // namespace megac
