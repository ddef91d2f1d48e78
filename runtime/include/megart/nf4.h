// 4-bit NormalFloat (NF4, QLoRA's storage of frozen base weights) in bitsandbytes' layout, so a
// quantized tensor is byte for byte what bitsandbytes' quantize_4bit(quant_type="nf4") makes:
//  - blocks of `block_size` consecutive elements (64 by default); absmax = max |x| per block;
//  - each element scaled by (1 / absmax) in float, clamped to [-1, 1], stored as the index of the
//    nearest of the 16 NF4 codes (ties: the lower index);
//  - two indices per byte, element 2i in the high nibble, 2i + 1 in the low one;
//  - double quantization (compress_statistics): offset = mean(absmax); absmax - offset in blocks
//    of 256, each scaled by its own max |.|, stored as the index of the nearest value of the
//    signed 8-bit dynamic map (nf4_dynamic_map); dequantized absmax = map[q] x scale + offset.
// Without double quantization 4 + 32/64 = 4.5 bits per weight; with it 4 + 8/64 + 32/(64 x 256)
// = 4.127 bits (plus the one offset).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace megart {

// The 16 NF4 values (bitsandbytes' table, float32).
inline constexpr float kNf4Codes[16] = {
    -1.0f, -0.6961928009986877f, -0.5250730514526367f, -0.39491748809814453f, -0.28444138169288635f,
    -0.18477343022823334f, -0.09105003625154495f, 0.0f, 0.07958029955625534f, 0.16093020141124725f,
    0.24611230194568634f, 0.33791524171829224f, 0.44070982933044434f, 0.5626170039176941f,
    0.7229568362236023f, 1.0f};

inline constexpr int64_t kNf4DefaultBlock = 64;
inline constexpr int64_t kNf4StatisticsBlock = 256; // double quantization's block of absmax values

// bitsandbytes' signed 8-bit dynamic map (create_dynamic_map(signed=True, max_exponent_bits=7,
// total_bits=8)), ascending: for exponents e = -6 .. 0, the midpoints of 2^(e+6) + 1 points
// evenly spaced over [0.1, 1] (float32, as torch.linspace) times 10^e, with both signs; then 0 and 1.
const std::array<float, 256> &nf4_dynamic_map();

struct Nf4Tensor {
  int64_t numel = 0;
  int64_t block_size = kNf4DefaultBlock;
  std::vector<uint8_t> packed; // (numel + 1) / 2 bytes
  // Without double quantization: absmax per block.
  std::vector<float> absmax;
  // With double quantization: absmax per block as 8-bit codes of (absmax - offset), with one
  // scale per kNf4StatisticsBlock blocks.
  bool double_quant = false;
  std::vector<uint8_t> absmax_codes;
  std::vector<float> absmax_scales;
  float offset = 0.0f;

  int64_t blocks() const { return (numel + block_size - 1) / block_size; }
  // The scale of block b as dequantization uses it.
  float block_absmax(int64_t b) const;
  // Bytes of the quantized tensor (packed codes and statistics).
  int64_t bytes() const;
};

// Index of the nearest code (ties: the lower index) of `table[0, n)` to v, in float arithmetic.
int nf4_nearest(const float *table, int n, float v);

// Quantizes x[0, numel): bitsandbytes' quantize_4bit(x, blocksize=block_size, quant_type="nf4",
// compress_statistics=double_quant). Throws megart::Error for numel < 1, an odd numel (the codes
// pack in pairs), block_size < 2 or odd, or a non-finite input.
Nf4Tensor nf4_quantize(const float *x, int64_t numel, int64_t block_size, bool double_quant);

// out[0, numel) = NF4 code x the block's absmax (dequantize_4bit).
void nf4_dequantize(float *out, const Nf4Tensor &t);
// The same for elements [first, first + count) only, into out[0, count).
void nf4_dequantize_range(float *out, const Nf4Tensor &t, int64_t first, int64_t count);

// A double-quantized NF4 tensor in one buffer, as the frozen store keeps QLoRA's base weights
// (ParamDesc::nf4_block): the block scales of the statistics (float, one per 256 blocks), the
// offset (float), the packed codes (numel / 2 bytes), one 8-bit absmax code per block. Its bytes,
// nf4_weight_bytes, are what the compiler predicts and the runtime allocates.
struct Nf4Weight {
  int64_t numel = 0;
  int64_t block_size = kNf4DefaultBlock;
  const float *absmax_scales = nullptr;
  float offset = 0.0f;
  const uint8_t *packed = nullptr;
  const uint8_t *absmax_codes = nullptr;
};

// Bytes of a double-quantized NF4 tensor of `numel` (even) elements in blocks of `block_size`:
// numel / 2 + blocks + 4 x ceil(blocks / 256) + 4 (about 4.127 bits per weight at block 64).
// Header-only: the compiler's memory plan computes it too.
inline int64_t nf4_weight_bytes(int64_t numel, int64_t block_size) {
  const int64_t blocks = (numel + block_size - 1) / block_size;
  const int64_t scales = (blocks + kNf4StatisticsBlock - 1) / kNf4StatisticsBlock;
  return numel / 2 + blocks + static_cast<int64_t>(sizeof(float)) * (scales + 1);
}
// Writes double-quantized `t` into buffer[nf4_weight_bytes(t.numel, t.block_size)] (host memory,
// float-aligned) and returns the view of it. Throws unless t is double-quantized.
Nf4Weight nf4_store(const Nf4Tensor &t, void *buffer);
// out[0, numel) = the dequantized values, as nf4_dequantize of the tensor stored.
void nf4_dequantize(float *out, const Nf4Weight &w);
// The same for elements [first, first + count) only, into out[0, count).
void nf4_dequantize_range(float *out, const Nf4Weight &w, int64_t first, int64_t count);

namespace cpu {
// C[m, n] = alpha A[m, k] op(W) + beta C with W a double-quantized NF4 weight (QLoRA's frozen
// base), stored [n, k] when transpose_b (a Linear weight [out, in] in the forward) else [k, n]
// (the backward's dX = dY W). W is dequantized a tile of 2^18 values at a time into fp32
// scratch as the product reads it, never whole, and rounded per gemm_precision() as gemm rounds
// a float operand. A tile covers whole columns of C (all of k for each), so every element of C is
// one fp32 sum over all of k, as in nf4_dequantize then gemm. C and A: float or a 16-bit type, as
// in gemm. Throws megart::Error unless w holds n x k elements and m, n, k fit cblas.
template <typename C, typename Ta>
void gemm_nf4(C *c, const Ta *a, const Nf4Weight &w, int64_t m, int64_t n, int64_t k, bool transpose_b,
              float alpha = 1.0f, float beta = 0.0f);
} // namespace cpu

} // namespace megart
