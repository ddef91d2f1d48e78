// OUT/train generate: text generation from a checkpoint with the compiled model (one rank,
// fp32). With the program's decode_step (CPU) each position runs once, attending to each layer's
// KV cache; --no-kv-cache (or a program without decode_step) reruns logits_step, the forward over
// the whole window, for each token.
//
//   OUT/train generate --load DIR --prompt-ids 84,104,101 [--max-new-tokens 32]
//       [--temperature 1] [--top-k 0] [--top-p 1] [--seed 1234] [--eod ID[,ID...]] [--no-kv-cache]
//
// Greedy with --top-k 1 (or --temperature 0); otherwise sampled: logits / temperature, the
// top k, then the smallest set of probability >= top p, drawn with a generator seeded by --seed.
// Prints one JSON line: {"prompt_ids": [...], "ids": [...new ids...], "kv_cache": true|false}.
#pragma once

#include "megart/program.h"

#include <cstdint>
#include <ostream>
#include <vector>

namespace megart {

struct SamplingOptions {
  double temperature = 1.0;
  int64_t top_k = 0;  // 0: every token
  double top_p = 1.0; // 1: every token
};

// The next token from one position's logits over `vocab_size` ids (padding rows past it are
// never drawn); `uniform` is a draw in [0, 1) (unused when greedy).
int32_t next_token(const float *logits, int64_t vocab_size, const SamplingOptions &options, double uniform);

int generate_main(int argc, const char *const *argv, const ProgramDesc &program, std::ostream &out,
                  std::ostream &err);

} // namespace megart
