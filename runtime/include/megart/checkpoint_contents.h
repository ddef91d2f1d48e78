// What a run's checkpoint folders hold besides the tensors: config.json with the tokenizer's
// bos/eos ids, generation_config.json, the tokenizer's files, and a LoRA program's
// adapter_config.json naming the base model the run loaded.
#pragma once

#include "megart/program.h"
#include "megart/tokenizer_record.h"
#include "megart/train_checkpoint.h"

#include <cstdint>
#include <string>
#include <vector>

namespace megart {

// `tokenizer`: the data's (null: the dataset records none, and the folder states no token ids).
// `base_weights`: a LoRA run's base model files (absolute; empty: a random base).
CheckpointOptions checkpoint_contents(const ProgramDesc &program, int64_t keep_latest, const TokenizerRecord *tokenizer,
                                      const std::vector<std::string> &base_weights);

} // namespace megart
