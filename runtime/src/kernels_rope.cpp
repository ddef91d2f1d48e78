// Rotary position embedding, rotate_half convention (HF Llama). A template over the activation
// storage type (kernels.h): loads widen, stores round once; the tables are fp32.
#include "megart/error.h"
#include "megart/kernels.h"

#include <cmath>
#include <string>
#include <vector>

namespace megart::cpu {

template <typename A>
void rope_forward(A* y, const A* x, int64_t batch, int64_t seq, int64_t heads, int64_t head_dim,
                  float theta, int64_t position_offset, bool inverse, float position_divisor) {
  if (head_dim % 2 != 0)
    throw Error("rope: head_dim (" + std::to_string(head_dim) + ") must be even");
  const int64_t half = head_dim / 2;

  // cos/sin table [seq, half], rounded like HF's float32 computation (see kernels.h).
  std::vector<float> cos_t(static_cast<size_t>(seq * half)), sin_t(cos_t.size());
  std::vector<float> inv_freq(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(head_dim);
    const float power = static_cast<float>(std::pow(static_cast<double>(theta), exponent));
    inv_freq[i] = 1.0f / power;
  }
  const float sign = inverse ? -1.0f : 1.0f;
#pragma omp parallel for schedule(static) if (seq * half > 4096)
  for (int64_t s = 0; s < seq; ++s) {
    // p / f in float32, as transformers' linear scaling divides its float positions.
    const float pos = static_cast<float>(s + position_offset) / position_divisor;
    for (int64_t i = 0; i < half; ++i) {
      const double angle = static_cast<double>(pos * inv_freq[i]);
      cos_t[s * half + i] = static_cast<float>(std::cos(angle));
      sin_t[s * half + i] = sign * static_cast<float>(std::sin(angle));
    }
  }

  // Each (batch, position) row of heads * head_dim values is independent.
#pragma omp parallel for schedule(static) if (batch * seq * heads * head_dim > (1 << 14))
  for (int64_t bs = 0; bs < batch * seq; ++bs) {
    const int64_t s = bs % seq;
    const float* c = cos_t.data() + s * half;
    const float* sn = sin_t.data() + s * half;
    for (int64_t h = 0; h < heads; ++h) {
      const A* xr = x + (bs * heads + h) * head_dim;
      A* yr = y + (bs * heads + h) * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        const float x1 = to_float(xr[i]), x2 = to_float(xr[i + half]);
        yr[i] = from_float<A>(x1 * c[i] - x2 * sn[i]);
        yr[i + half] = from_float<A>(x2 * c[i] + x1 * sn[i]);
      }
    }
  }
}

void rope_forward(float* y, const float* x, int64_t batch, int64_t seq, int64_t heads,
                  int64_t head_dim, float theta, int64_t position_offset, bool inverse, float position_divisor) {
  rope_forward<float>(y, x, batch, seq, heads, head_dim, theta, position_offset, inverse, position_divisor);
}

template void rope_forward<bf16_t>(bf16_t*, const bf16_t*, int64_t, int64_t, int64_t, int64_t,
                                   float, int64_t, bool, float);
template void rope_forward<fp16_t>(fp16_t*, const fp16_t*, int64_t, int64_t, int64_t, int64_t,
                                   float, int64_t, bool, float);

} // namespace megart::cpu
