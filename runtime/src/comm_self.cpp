#include "megart/comm.h"

#include <cstring>

namespace megart {

namespace {
// One rank: gathering and reduce-scattering are copies (none in place).
template <typename T> void copy(T *out, const T *in, int64_t n) {
  if (out != in)
    std::memmove(out, in, sizeof(T) * n);
}
} // namespace

void SelfCommunicator::all_gather(float *out, const float *in, int64_t n) { copy(out, in, n); }
void SelfCommunicator::all_to_all_v(const float *in, const int64_t *send_counts, float *out, const int64_t *) {
  copy(out, in, send_counts[0]);
}
void SelfCommunicator::all_to_all(const int32_t *in, int32_t *out, int64_t n) { copy(out, in, n); }
void SelfCommunicator::all_gather(bf16_t *out, const bf16_t *in, int64_t n) { copy(out, in, n); }
void SelfCommunicator::all_gather(fp16_t *out, const fp16_t *in, int64_t n) { copy(out, in, n); }
void SelfCommunicator::reduce_scatter_sum(float *out, const float *in, int64_t n) { copy(out, in, n); }
void SelfCommunicator::reduce_scatter_sum(bf16_t *out, const bf16_t *in, int64_t n) { copy(out, in, n); }
void SelfCommunicator::reduce_scatter_sum(fp16_t *out, const fp16_t *in, int64_t n) { copy(out, in, n); }

} // namespace megart
