// The sequence length megac generate compiles a model's program for. A program's activations,
// logits and KV cache grow with its seq_length, while a config.json's max_position_embeddings
// says how far the model can read, not what one generation needs: Llama 3's 131072 positions
// would size 67 GB of logits alone. A model made for more than kGenerateWindow positions is
// compiled for the prompt and its new tokens rounded up to a power of two, at least
// kGenerateWindow: a few programs in the cache whatever the prompts, each reused.
#pragma once

#include <cstdint>

namespace megac {

constexpr int64_t kGenerateWindow = 4096; // Llama 2's positions: such models compile as before

/// The positions to compile for `tokens` (prompt + new, at most `modelPositions`).
int64_t generateWindow(int64_t modelPositions, int64_t tokens);

} // namespace megac
