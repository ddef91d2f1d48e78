#include "megart/byte_tokenizer.h"

#include "megart/error.h"

namespace megart::byte_tokenizer {

std::vector<int32_t> encode(std::string_view text) {
  std::vector<int32_t> tokens;
  tokens.reserve(text.size());
  for (char c : text)
    tokens.push_back(static_cast<unsigned char>(c));
  return tokens;
}

std::string decode(const int32_t *tokens, std::size_t count, std::string_view eod_text) {
  std::string text;
  text.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    int32_t t = tokens[i];
    if (t == kEndOfDocument) {
      text += eod_text;
    } else if (t >= 0 && t < 256) {
      text += static_cast<char>(static_cast<unsigned char>(t));
    } else {
      throw Error("byte tokenizer: token " + std::to_string(i) + " is id " + std::to_string(t) +
                  ", but the byte vocabulary has ids 0..256 (256 = end of document); the data "
                  "was probably made with another tokenizer");
    }
  }
  return text;
}

std::string decode(const std::vector<int32_t> &tokens, std::string_view eod_text) {
  return decode(tokens.data(), tokens.size(), eod_text);
}

} // namespace megart::byte_tokenizer
