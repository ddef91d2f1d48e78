#include "megart/comm.h"

#include <cstring>

namespace megart {

void SelfCommunicator::all_gather(float *out, const float *in, int64_t n) {
  if (out != in)
    std::memmove(out, in, sizeof(float) * n);
}

void SelfCommunicator::reduce_scatter_sum(float *out, const float *in, int64_t n) {
  if (out != in)
    std::memmove(out, in, sizeof(float) * n);
}

} // namespace megart
