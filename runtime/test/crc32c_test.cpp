// CRC32C: the standard check value, the hardware and table paths' agreement (the build uses one
// of them: the check value pins both), chaining, and a file's checksum.
#include "megart/crc32c.h"
#include "megart/error.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

TEST(Crc32c, CheckValueOfTheStandard) {
  const std::string digits = "123456789"; // RFC 3720's check value for CRC32C
  EXPECT_EQ(megart::crc32c(digits.data(), digits.size()), 0xe3069283u);
  EXPECT_EQ(megart::crc32c("", 0), 0u);
}

TEST(Crc32c, ChainsAcrossPieces) {
  std::string text(1000, 'x');
  for (size_t i = 0; i < text.size(); ++i)
    text[i] = static_cast<char>(i * 31 + 7);
  const uint32_t whole = megart::crc32c(text.data(), text.size());
  for (size_t cut : {0, 1, 7, 8, 9, 500, 999, 1000})
    EXPECT_EQ(megart::crc32c(text.data() + cut, text.size() - cut, megart::crc32c(text.data(), cut)), whole) << cut;
}

TEST(Crc32c, FileChecksumNamesSizeAndCrc) {
  const std::filesystem::path path = std::filesystem::temp_directory_path() / "megart-crc32c-test.bin";
  std::ofstream(path, std::ios::binary) << "123456789";
  EXPECT_EQ(megart::file_checksum(path.string()), "crc32c:e3069283 bytes:9");
  std::ofstream(path, std::ios::binary) << "123456780";
  EXPECT_NE(megart::file_checksum(path.string()), "crc32c:e3069283 bytes:9");
  std::filesystem::remove(path);
  EXPECT_THROW(megart::file_checksum(path.string()), megart::Error);
}
