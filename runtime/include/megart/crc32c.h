// CRC32C (Castagnoli): TensorBoard's record framing, and the checksum a LoRA checkpoint keeps of
// the base model its adapters were trained on. The SSE4.2 crc32 instruction when the build has
// it (every x86-64-v2 CPU), a table otherwise: the same values either way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace megart {

// CRC32C of `size` bytes, continuing from `crc` (the CRC of the bytes before; 0 to start).
uint32_t crc32c(const void *data, size_t size, uint32_t crc = 0);

// "crc32c:1a2b3c4d bytes:1234": the CRC32C and size of a file's whole content. Throws naming
// the file when it cannot be read.
std::string file_checksum(const std::string &path);

} // namespace megart
