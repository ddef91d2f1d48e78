// Quantizes a raw float32 file to NF4 (megart/nf4.h) and writes what test/e2e/nf4_bitsandbytes.py
// holds against bitsandbytes, each as a raw little-endian file beside OUT_PREFIX:
//   megart-nf4 IN.f32 BLOCK_SIZE DOUBLE_QUANT(0|1) OUT_PREFIX
//   OUT_PREFIX.packed (uint8), .absmax (float32; with double quantization: .absmax_codes (uint8),
//   .absmax_scales (float32), .offset (float32)), .dequantized (float32), .dynamic_map (float32 x 256)
#include "megart/error.h"
#include "megart/nf4.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace {

template <typename T> void write(const std::string &path, const T *data, size_t count) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char *>(data), static_cast<std::streamsize>(count * sizeof(T)));
  if (!out)
    throw megart::Error("cannot write " + path);
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: megart-nf4 IN.f32 BLOCK_SIZE DOUBLE_QUANT(0|1) OUT_PREFIX\n");
    return 2;
  }
  try {
    std::ifstream in(argv[1], std::ios::binary | std::ios::ate);
    const std::streamoff size = in ? static_cast<std::streamoff>(in.tellg()) : -1;
    if (size < 0 || size % static_cast<std::streamoff>(sizeof(float)) != 0)
      throw megart::Error(std::string(argv[1]) + ": not a readable file of float32 values");
    std::vector<float> x(static_cast<size_t>(size) / sizeof(float));
    in.seekg(0);
    if (!in.read(reinterpret_cast<char *>(x.data()), size))
      throw megart::Error(std::string(argv[1]) + ": cannot read");
    const megart::Nf4Tensor t = megart::nf4_quantize(x.data(), static_cast<int64_t>(x.size()), std::atoll(argv[2]),
                                                     std::string(argv[3]) == "1");
    const std::string out = argv[4];
    write(out + ".packed", t.packed.data(), t.packed.size());
    if (t.double_quant) {
      write(out + ".absmax_codes", t.absmax_codes.data(), t.absmax_codes.size());
      write(out + ".absmax_scales", t.absmax_scales.data(), t.absmax_scales.size());
      write(out + ".offset", &t.offset, 1);
    } else {
      write(out + ".absmax", t.absmax.data(), t.absmax.size());
    }
    std::vector<float> dequantized(x.size());
    megart::nf4_dequantize(dequantized.data(), t);
    write(out + ".dequantized", dequantized.data(), dequantized.size());
    write(out + ".dynamic_map", megart::nf4_dynamic_map().data(), 256);
    std::printf("%lld bytes for %zu weights: %.4f bits per weight\n", static_cast<long long>(t.bytes()), x.size(),
                8.0 * static_cast<double>(t.bytes()) / static_cast<double>(x.size()));
  } catch (const megart::Error &e) {
    std::fprintf(stderr, "megart-nf4: %s\n", e.what());
    return 1;
  }
  return 0;
}
