// --merge-lora: a LoRA checkpoint's adapters folded into its base model's weights, written as a
// Hugging Face folder that transformers loads alone (PEFT's merge_and_unload, on files).
#pragma once

#include <string>
#include <vector>

namespace megart {

struct MergeReport {
  int64_t tensors = 0; // written
  int64_t merged = 0;  // of them, with an adapter folded in
};

// W' = W + scaling x (B A) for every adapted module of `adapter_folder` (a megac LoRA checkpoint:
// adapter_model.safetensors, adapter_config.json, its config.json and tokenizer files), W from
// `base_files` (the base model's safetensors); GPT-2's Conv1D weights ([in, out],
// fan_in_fan_out) take the transpose. Writes `out_dir`/model.safetensors (F32) beside copies of
// the folder's config.json and tokenizer files (for a folder PEFT saved, which has no
// config.json, the base folder's model files it lacks); `out_dir` must not exist or be empty. Throws
// megart::Error naming the file and what does not fit (an adapter without its base weight, a
// shape that does not match, a bad adapter_config.json).
MergeReport merge_lora(const std::string &adapter_folder, const std::vector<std::string> &base_files,
                       const std::string &out_dir);

} // namespace megart

#include "megart/program.h"

#include <ostream>

namespace megart {

// OUT/train merge-lora --load LORA_CKPT --save DIR [--pretrained-checkpoint BASE]: merge_lora of
// the checkpoint (its latest iteration, or an iteration folder) with the base model its
// train_state.json names (or BASE); or of a folder PEFT saved, checked against `program`'s LoRA
// settings, with the base its adapter_config.json names (or BASE). Prints what it wrote.
// Returns the process exit code.
int merge_lora_main(int argc, const char *const *argv, const ProgramDesc &program, std::ostream &out,
                    std::ostream &err);

} // namespace megart
