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

/// What the spec is for: training (`megac compile FOLDER`) keeps the config's dropout rates, as
/// transformers trains with them; generating drops nothing, so its spec has dropout 0.
enum class SpecUse { Train, Generate };

/// The spec YAML of the model `configJson` (the text of `path`, a config.json) describes.
/// Fails naming the file, the field, its value and what megac needs: another architecture
/// (by its model_type and architectures, with those megac implements), a field that changes the
/// maths in a way megac does not compute (rope_scaling, attention biases, ...), a size that is
/// missing or not a positive integer.
llvm::Expected<std::string> specFromHuggingFaceConfig(llvm::StringRef configJson, llvm::StringRef path,
                                                      SpecUse use = SpecUse::Generate);

} // namespace megac
