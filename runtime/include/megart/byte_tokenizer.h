// Built-in byte-level tokenizer: every byte is its own token (0..255) and 256 marks the end
// of a document. Needs no vocabulary file, so tests and small examples run anywhere.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace megart {

constexpr int32_t kByteVocabSize = 257;
constexpr int32_t kEndOfDocument = 256;

// In their own namespace: other tokenizers (BPE) will have an encode/decode too.
namespace byte_tokenizer {

// One token per byte; no end-of-document token is appended.
std::vector<int32_t> encode(std::string_view text);

// Bytes back from tokens; each end-of-document token becomes `eod_text`. Ids outside
// 0..256 throw, naming the position and the id.
std::string decode(const int32_t *tokens, std::size_t count, std::string_view eod_text = "");
std::string decode(const std::vector<int32_t> &tokens, std::string_view eod_text = "");

} // namespace byte_tokenizer

} // namespace megart
