#include "megart/mlm_masking.h"

#include "megart/dropout.h"
#include "megart/error.h"
#include "megart/splitmix.h"

#include <algorithm>

namespace megart {
namespace {

uint64_t stream_key(uint64_t seed, uint64_t stream) { return splitmix64_mix(seed ^ (kMlmSalt + stream)); }

// floor(p x 2^32) for p in [0, 1), as dropout's threshold: of the positions, those chosen; of
// the chosen, those read as [MASK] and, below the second, as a random token.
constexpr uint64_t threshold(double p) { return static_cast<uint64_t>(p * 4294967296.0); }
constexpr uint64_t kChosen = threshold(0.15), kMasked = threshold(0.8), kRandom = threshold(0.9);

} // namespace

MlmMasking mlm_masking(const std::optional<TokenizerRecord> &tokenizer, uint64_t seed, const std::string &data) {
  if (!tokenizer || !tokenizer->mask)
    throw Error("a masked language model (BERT) masks tokens with the tokenizer's [MASK], but the data " + data +
                (tokenizer ? " was made by " + tokenizer->type + ", which has none (" + tokenizer->path + ")"
                           : " has no tokenizer record (PREFIX.tokenizer.json)") +
                "; make it with megac data --tokenizer-type BertWordPieceLowerCase (or BertWordPieceCase) "
                "--vocab-file vocab.txt");
  MlmMasking m;
  m.seed = seed;
  m.mask_id = static_cast<int32_t>(tokenizer->mask->id);
  m.vocab_size = tokenizer->vocab_size;
  for (const std::optional<SpecialToken> &t : {tokenizer->cls, tokenizer->sep, tokenizer->pad, tokenizer->mask})
    if (t)
      m.never_masked.push_back(static_cast<int32_t>(t->id));
  return m;
}

void mask_sample(const MlmMasking &m, int64_t sample, const int32_t *tokens, int64_t seq_length, int32_t *ids,
                 int32_t *labels) {
  const uint64_t choose = stream_key(m.seed, 0), how = stream_key(m.seed, 1), which = stream_key(m.seed, 2);
  for (int64_t p = 0; p < seq_length; ++p) {
    const int32_t token = tokens[p];
    const uint64_t e = static_cast<uint64_t>(sample) * static_cast<uint64_t>(seq_length) + static_cast<uint64_t>(p);
    ids[p] = token;
    labels[p] = kMlmIgnoredLabel;
    if (dropout_bits(choose, e) >= kChosen ||
        std::find(m.never_masked.begin(), m.never_masked.end(), token) != m.never_masked.end())
      continue;
    labels[p] = token;
    const uint64_t kind = dropout_bits(how, e);
    if (kind < kMasked)
      ids[p] = m.mask_id;
    else if (kind < kRandom)
      ids[p] = static_cast<int32_t>((static_cast<uint64_t>(dropout_bits(which, e)) *
                                     static_cast<uint64_t>(m.vocab_size)) >> 32);
  }
}

} // namespace megart
