// Megatron's BERT masking for a masked language model: of a sample's tokens, 15% are chosen to
// be predicted; of those, 80% read [MASK], 10% a random token and 10% themselves. Whether and how
// a position is masked is a pure function of (--seed, the sample's place in its split's stream,
// the position), never of the rank or the plan, so every plan masks the same tokens:
//
//   key(stream)     = mix(seed ^ (kMlmSalt + stream))          streams 0 choose, 1 how, 2 which token
//   bits(key, e)    = dropout_bits(key, e), e = sample x seq_length + position   (megart/dropout.h)
//   chosen          = bits(key(0), e) < floor(0.15 x 2^32), and the token is not [CLS], [SEP], [PAD], [MASK]
//   [MASK]          : bits(key(1), e) < floor(0.8 x 2^32); a random token: < floor(0.9 x 2^32); else kept
//   the random token = (bits(key(2), e) x vocab_size) >> 32
//
// A chosen position's label is its token; every other position's is kMlmIgnoredLabel
// (transformers' -100), which the loss leaves out.
#pragma once

#include "megart/tokenizer_record.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace megart {

inline constexpr int32_t kMlmIgnoredLabel = -100;
inline constexpr uint64_t kMlmSalt = 0x6D6C6D5F6D61736Bull; // "mlm_mask"

struct MlmMasking {
  uint64_t seed = 0;
  int32_t mask_id = -1;
  int64_t vocab_size = 0;              // the tokenizer's: random tokens are drawn from [0, vocab_size)
  std::vector<int32_t> never_masked;   // [CLS], [SEP], [PAD], [MASK]
};

// The masking of data made by `tokenizer` (its [MASK] id, vocabulary and special tokens) under
// `seed`; throws megart::Error naming `data` when the tokenizer has no [MASK] token.
MlmMasking mlm_masking(const std::optional<TokenizerRecord> &tokenizer, uint64_t seed, const std::string &data);

// The masked ids and the labels of one sample (`tokens`: its seq_length ids) at place `sample`.
void mask_sample(const MlmMasking &m, int64_t sample, const int32_t *tokens, int64_t seq_length, int32_t *ids,
                 int32_t *labels);

} // namespace megart
