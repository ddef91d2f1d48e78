// NF4 quantization in bitsandbytes' layout (megart/nf4.h). Every step is float32 arithmetic in
// the order bitsandbytes' CPU path takes it, so the bytes and statistics come out the same.
#include "megart/nf4.h"

#include "megart/error.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace megart {
namespace {

// torch.linspace(start, end, steps, dtype=float32): the first half counted up from start, the
// second half down from end, with a float step.
std::vector<float> linspace(float start, float end, int64_t steps) {
  std::vector<float> out(static_cast<size_t>(steps));
  const float step = (end - start) / static_cast<float>(steps - 1);
  const int64_t halfway = steps / 2;
  for (int64_t i = 0; i < steps; ++i)
    out[static_cast<size_t>(i)] =
        i < halfway ? start + step * static_cast<float>(i) : end - step * static_cast<float>(steps - i - 1);
  return out;
}

std::array<float, 256> build_dynamic_map() {
  std::vector<float> data;
  for (int i = 0; i < 7; ++i) { // exponents 10^-6 .. 10^0
    const std::vector<float> bounds = linspace(0.1f, 1.0f, (int64_t{1} << i) + 1);
    const float scale = static_cast<float>(std::pow(10.0, i - 6));
    for (size_t j = 0; j + 1 < bounds.size(); ++j) {
      const float mean = (bounds[j] + bounds[j + 1]) / 2.0f;
      data.push_back(scale * mean);
      data.push_back(-(scale * mean));
    }
  }
  data.push_back(0.0f);
  data.push_back(1.0f);
  std::sort(data.begin(), data.end());
  std::array<float, 256> map{};
  std::copy(data.begin(), data.end(), map.begin());
  return map;
}

// Nearest-code indices of `values`, blockwise: each block of `block` values scaled by (1 / its
// max |v|), clamped to [-1, 1] when `clamp`; the block maxima go to `scales`.
void quantize_blocks(const float *values, int64_t n, int64_t block, const float *table, int table_size, bool clamp,
                     uint8_t *codes, float *scales) {
  for (int64_t b = 0; b * block < n; ++b) {
    const int64_t first = b * block, end = std::min(n, first + block);
    float absmax = 0.0f;
    for (int64_t i = first; i < end; ++i)
      absmax = std::max(absmax, std::fabs(values[i]));
    scales[b] = absmax;
    const float inverse = 1.0f / absmax;
    for (int64_t i = first; i < end; ++i) {
      float v = clamp ? std::clamp(values[i] * inverse, -1.0f, 1.0f) : values[i] / absmax;
      codes[i] = static_cast<uint8_t>(nf4_nearest(table, table_size, v));
    }
  }
}

// out[0, count) = the codes of elements [first, first + count) (bounds checked against numel),
// each times its block's scale, scale_of(block).
template <typename ScaleOf>
void dequantize_elements(float *out, const uint8_t *packed, int64_t numel, int64_t block_size, int64_t first,
                         int64_t count, ScaleOf scale_of) {
  if (first < 0 || count < 0 || first + count > numel)
    throw Error("nf4_dequantize_range: elements [" + std::to_string(first) + ", " + std::to_string(first + count) +
                ") outside the tensor's " + std::to_string(numel));
  const int64_t end = first + count;
  for (int64_t b = first / block_size; b * block_size < end; ++b) {
    const float scale = scale_of(b);
    for (int64_t i = std::max(first, b * block_size); i < std::min(end, (b + 1) * block_size); ++i) {
      const uint8_t byte = packed[i / 2];
      out[i - first] = kNf4Codes[i % 2 == 0 ? byte >> 4 : byte & 0xF] * scale;
    }
  }
}

} // namespace

const std::array<float, 256> &nf4_dynamic_map() {
  static const std::array<float, 256> map = build_dynamic_map();
  return map;
}

int nf4_nearest(const float *table, int n, float v) {
  int best = 0;
  float best_distance = std::fabs(v - table[0]);
  for (int k = 1; k < n; ++k) {
    const float d = std::fabs(v - table[k]);
    if (d < best_distance) {
      best_distance = d;
      best = k;
    }
  }
  return best;
}

float Nf4Tensor::block_absmax(int64_t b) const {
  if (!double_quant)
    return absmax[static_cast<size_t>(b)];
  return nf4_dynamic_map()[absmax_codes[static_cast<size_t>(b)]] *
             absmax_scales[static_cast<size_t>(b / kNf4StatisticsBlock)] +
         offset;
}

int64_t Nf4Tensor::bytes() const {
  return static_cast<int64_t>(packed.size() + sizeof(float) * absmax.size() + absmax_codes.size() +
                              sizeof(float) * absmax_scales.size() + (double_quant ? sizeof(float) : 0));
}

Nf4Tensor nf4_quantize(const float *x, int64_t numel, int64_t block_size, bool double_quant) {
  if (numel < 1 || numel % 2 != 0)
    throw Error("nf4_quantize: " + std::to_string(numel) +
                " elements; NF4 packs two codes per byte, so give an even, positive count");
  if (block_size < 2 || block_size % 2 != 0)
    throw Error("nf4_quantize: block size " + std::to_string(block_size) + " must be even and at least 2 (64: QLoRA's)");
  for (int64_t i = 0; i < numel; ++i)
    if (!std::isfinite(x[i]))
      throw Error("nf4_quantize: element " + std::to_string(i) + " is not finite");
  Nf4Tensor t;
  t.numel = numel;
  t.block_size = block_size;
  t.double_quant = double_quant;
  std::vector<uint8_t> codes(static_cast<size_t>(numel));
  t.absmax.resize(static_cast<size_t>(t.blocks()));
  quantize_blocks(x, numel, block_size, kNf4Codes, 16, /*clamp=*/true, codes.data(), t.absmax.data());
  t.packed.resize(static_cast<size_t>(numel / 2));
  for (int64_t i = 0; i < numel / 2; ++i)
    t.packed[static_cast<size_t>(i)] = static_cast<uint8_t>(codes[2 * i] << 4 | codes[2 * i + 1]);
  if (double_quant) {
    // The mean in double, rounded once (bitsandbytes takes torch's float32 mean).
    double sum = 0.0;
    for (float a : t.absmax)
      sum += a;
    t.offset = static_cast<float>(sum / static_cast<double>(t.absmax.size()));
    std::vector<float> centred(t.absmax.size());
    for (size_t b = 0; b < centred.size(); ++b)
      centred[b] = t.absmax[b] - t.offset;
    const int64_t n = static_cast<int64_t>(centred.size());
    t.absmax_codes.resize(centred.size());
    t.absmax_scales.resize(static_cast<size_t>((n + kNf4StatisticsBlock - 1) / kNf4StatisticsBlock));
    quantize_blocks(centred.data(), n, kNf4StatisticsBlock, nf4_dynamic_map().data(), 256, /*clamp=*/false,
                    t.absmax_codes.data(), t.absmax_scales.data());
    t.absmax.clear();
  }
  return t;
}

void nf4_dequantize_range(float *out, const Nf4Tensor &t, int64_t first, int64_t count) {
  dequantize_elements(out, t.packed.data(), t.numel, t.block_size, first, count,
                      [&](int64_t b) { return t.block_absmax(b); });
}

void nf4_dequantize(float *out, const Nf4Tensor &t) { nf4_dequantize_range(out, t, 0, t.numel); }

Nf4Weight nf4_store(const Nf4Tensor &t, void *buffer) {
  if (!t.double_quant)
    throw Error("nf4_store: the tensor is not double-quantized");
  auto *floats = static_cast<float *>(buffer);
  std::copy(t.absmax_scales.begin(), t.absmax_scales.end(), floats);
  floats[t.absmax_scales.size()] = t.offset;
  auto *bytes = reinterpret_cast<uint8_t *>(floats + t.absmax_scales.size() + 1);
  std::copy(t.packed.begin(), t.packed.end(), bytes);
  std::copy(t.absmax_codes.begin(), t.absmax_codes.end(), bytes + t.packed.size());
  return {t.numel, t.block_size, floats, t.offset, bytes, bytes + t.packed.size()};
}

void nf4_dequantize_range(float *out, const Nf4Weight &w, int64_t first, int64_t count) {
  const std::array<float, 256> &map = nf4_dynamic_map();
  // The block's absmax as Nf4Tensor::block_absmax computes it, in the same float steps.
  dequantize_elements(out, w.packed, w.numel, w.block_size, first, count, [&](int64_t b) {
    return map[w.absmax_codes[b]] * w.absmax_scales[b / kNf4StatisticsBlock] + w.offset;
  });
}

void nf4_dequantize(float *out, const Nf4Weight &w) {
  const int64_t blocks = (w.numel + w.block_size - 1) / w.block_size;
#pragma omp parallel for schedule(static) if (w.numel > (1 << 16))
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t first = b * w.block_size;
    nf4_dequantize_range(out + first, w, first, std::min(w.block_size, w.numel - first));
  }
}

} // namespace megart
