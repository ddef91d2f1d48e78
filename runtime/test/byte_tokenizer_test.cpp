#include "megart/byte_tokenizer.h"
#include "megart/error.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace bt = megart::byte_tokenizer;

TEST(Tokenizer, ByteVocabulary) {
  EXPECT_EQ(megart::kByteVocabSize, 257);
  EXPECT_EQ(megart::kEndOfDocument, 256);
}

TEST(Tokenizer, EncodesBytesIncludingHighAndZero) {
  const std::string text("A\0\xff\xc3\xa9", 5);
  EXPECT_EQ(bt::encode(text), (std::vector<int32_t>{65, 0, 255, 0xc3, 0xa9}));
  EXPECT_TRUE(bt::encode("").empty());
}

TEST(Tokenizer, RoundTripAndEndOfDocument) {
  const std::string text = "hello, w\xc3\xb6rld\n";
  std::vector<int32_t> tokens = bt::encode(text);
  EXPECT_EQ(bt::decode(tokens), text);
  tokens.push_back(megart::kEndOfDocument);
  EXPECT_EQ(bt::decode(tokens), text);
  EXPECT_EQ(bt::decode(tokens, "<|eod|>"), text + "<|eod|>");
}

TEST(Tokenizer, RejectsIdsOutsideVocabulary) {
  try {
    bt::decode(std::vector<int32_t>{1, 2, 257});
    FAIL() << "expected megart::Error";
  } catch (const megart::Error &e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("token 2 is id 257"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("0..256"));
  }
  EXPECT_THROW(bt::decode(std::vector<int32_t>{-1}), megart::Error);
}
