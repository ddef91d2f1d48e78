#include "megart/grad_sync.h"

#include "megart/error.h"

#include <algorithm>
#include <string>

namespace megart {

void GradSync::start(float *data, int64_t n) {
  if (!bf16_) {
    started_.push_back({dp_.iall_reduce_sum(data, n), data, n});
    return;
  }
  const size_t slot = started_.size(), bytes = static_cast<size_t>(n) * sizeof(uint16_t);
  if (scratch_.size() <= slot)
    scratch_.resize(slot + 1);
  if (scratch_[slot].bytes() < bytes)
    scratch_[slot] = DeviceBuffer(device_, bytes);
  uint16_t *bits = scratch_[slot].as<uint16_t>();
  device_.to_bf16(bits, data, n);
  started_.push_back({dp_.iall_reduce_sum_bf16(bits, n), data, n});
}

int64_t GradSync::start_in_buckets(float *data, int64_t n, int64_t bucket_elems) {
  if (bucket_elems < 1)
    throw Error("--ddp-bucket-size is " + std::to_string(bucket_elems) +
                "; it must be at least 1 element");
  int64_t buckets = 0;
  for (int64_t first = 0; first < n; first += bucket_elems, ++buckets)
    start(data + first, std::min(bucket_elems, n - first));
  return buckets;
}

int64_t GradSync::finish() {
  const auto started = static_cast<int64_t>(started_.size());
  for (size_t i = 0; i < started_.size(); ++i) {
    Started &s = started_[i];
    if (!s.request->test()) // a completed request never needs (nor, on MPI, accepts) a wait
      dp_.wait(*s.request);
    if (bf16_)
      device_.from_bf16(s.data, scratch_[i].as<uint16_t>(), s.n);
  }
  started_.clear();
  return started;
}

} // namespace megart
