// The tokenizer a dataset was made with: PREFIX.tokenizer.json, written by megac data
// (tools/megac/megac_tokenizer.py's header: tokenizer_type, vocab_size, eod, special_tokens,
// files). Training
// checks the model's vocabulary against it, and every checkpoint carries it on: the record as
// megac_tokenizer.json and the tokenizer's own files in Hugging Face's layout, so that
// transformers' AutoTokenizer loads the checkpoint folder as it loads the model.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace megart {

// A token the tokenizer gives a role (begin or end of sequence, padding): its id, and its text
// where the tokenizer has one (the byte tokenizer's end of document, 256, has none).
struct SpecialToken {
  int64_t id = -1;
  std::string content;
};

struct TokenizerRecord {
  std::string path; // PREFIX.tokenizer.json
  std::string json; // as written
  std::string type; // "GPT2BPETokenizer", ...
  int64_t vocab_size = 0;
  std::map<std::string, std::string> files; // role ("vocab_file", ...) -> absolute path
  // The tokens the tokenizer declares (megac data records them in "special_tokens"; a record of
  // an older megac gives its end of document, "eod", as the eos, and GPT-2's <|endoftext|> as
  // its bos too). Empty: the tokenizer has none, and none is made up.
  std::optional<SpecialToken> bos, eos, pad;
  // A WordPiece vocabulary's [CLS], [SEP] and [MASK] (megac data records them for BERT).
  std::optional<SpecialToken> cls, sep, mask;
};

// PREFIX.tokenizer.json, or none when the dataset has none (made by another tool). Throws
// megart::Error naming the file when it is malformed.
std::optional<TokenizerRecord> read_tokenizer_record(const std::string &prefix);

// The files a checkpoint folder gets for `record`: name -> content. Reads the tokenizer's files
// (throws megart::Error naming one that is gone or over 256 MiB).
std::vector<std::pair<std::string, std::string>> tokenizer_checkpoint_files(const TokenizerRecord &record);

} // namespace megart
