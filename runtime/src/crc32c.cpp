#include "megart/crc32c.h"

#include "megart/error.h"

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#if defined(__SSE4_2__)
#include <nmmintrin.h>
#endif

namespace megart {

uint32_t crc32c(const void *data, size_t size, uint32_t crc) {
  const auto *p = static_cast<const unsigned char *>(data);
  uint32_t c = ~crc;
#if defined(__SSE4_2__)
  uint64_t c64 = c;
  for (; size >= 8; size -= 8, p += 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    c64 = _mm_crc32_u64(c64, word);
  }
  c = static_cast<uint32_t>(c64);
  for (; size > 0; --size, ++p)
    c = _mm_crc32_u8(c, *p);
#else
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t v = i;
      for (int k = 0; k < 8; ++k)
        v = (v & 1) ? (v >> 1) ^ 0x82f63b78u : v >> 1; // the Castagnoli polynomial, reflected
      t[i] = v;
    }
    return t;
  }();
  for (; size > 0; --size, ++p)
    c = table[(c ^ *p) & 0xff] ^ (c >> 8);
#endif
  return ~c;
}

std::string file_checksum(const std::string &path) {
  std::unique_ptr<std::FILE, int (*)(std::FILE *)> file(std::fopen(path.c_str(), "rb"), std::fclose);
  if (!file)
    throw Error(path + ": cannot open to check it: " + std::strerror(errno));
  std::vector<unsigned char> buffer(size_t(1) << 22);
  uint32_t crc = 0;
  uint64_t bytes = 0;
  for (size_t n; (n = std::fread(buffer.data(), 1, buffer.size(), file.get())) > 0; bytes += n)
    crc = crc32c(buffer.data(), n, crc);
  if (std::ferror(file.get()))
    throw Error(path + ": read error while checking it: " + std::strerror(errno));
  char text[64];
  std::snprintf(text, sizeof text, "crc32c:%08x bytes:%llu", crc, static_cast<unsigned long long>(bytes));
  return text;
}

} // namespace megart
