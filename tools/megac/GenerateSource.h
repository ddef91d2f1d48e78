// What `megac generate CHECKPOINT` generates from, found before anything is compiled:
//   - a megac checkpoint: a --save folder (its latest iteration) or one iteration's folder;
//     the spec its train_state.json records;
//   - a Hugging Face model folder (config.json + model.safetensors or its sharded index), such
//     as OUT/train merge-lora's output: the spec its config.json gives (SpecFromHuggingFace.h);
//   - LoRA adapters: a megac LoRA checkpoint (its base model's spec, which train_state.json
//     records) or a folder PEFT saved (the spec of the base its adapter_config.json names),
//     merged into their base before generating.
// Each kind also names the folder whose tokenizer encodes the prompt.
#pragma once

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>

namespace megac {

struct GenerateSource {
  std::string kind;            // for messages: "a megac checkpoint", "a Hugging Face model folder", ...
  std::string folder;          // what OUT/train generate (or merge-lora, for adapters) loads
  std::string specText;        // the model's spec
  std::string specOrigin;      // the file the spec comes from, for messages
  std::string hfConfig;        // a Hugging Face folder's config.json (checked against the spec), or ""
  std::string tokenizerFolder; // the folder whose tokenizer encodes and decodes
  bool adapters = false;       // LoRA adapters: merged into their base first
};

/// Finds what `path` holds; `pretrained` (--pretrained-checkpoint), when given, is the base model
/// of adapters PEFT saved. Fails naming the path, what it holds and what megac generate takes.
llvm::Expected<GenerateSource> findGenerateSource(llvm::StringRef path, llvm::StringRef pretrained = "");

} // namespace megac
