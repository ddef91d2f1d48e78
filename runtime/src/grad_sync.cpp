#include "megart/grad_sync.h"

#include "megart/error.h"

#include <algorithm>
#include <string>

namespace megart {

void GradSync::reduce_in_bf16(float *grads, int64_t n) {
  grads_ = grads;
  grads_numel_ = n;
  bf16_ = DeviceBuffer(device_, static_cast<size_t>(n) * sizeof(uint16_t), MemoryCategory::Communication);
}

uint16_t *GradSync::bf16_copy(const float *data, int64_t n) const {
  const int64_t offset = data - grads_;
  if (offset < 0 || n < 0 || offset + n > grads_numel_)
    throw Error("gradient bucket of " + std::to_string(n) + " elements at element " +
                std::to_string(offset) + " lies outside the " + std::to_string(grads_numel_) +
                " gradients being reduced in bf16 (a compiled program that does not match this "
                "runtime: regenerate it with megac compile)");
  return bf16_.as<uint16_t>() + offset;
}

void GradSync::start(float *data, int64_t n, Communicator *group) {
  Communicator &over = group ? *group : dp_;
  if (!bf16_.data()) {
    started_.push_back({over.iall_reduce_sum(data, n), &over, data, n});
    return;
  }
  uint16_t *bits = bf16_copy(data, n);
  device_.to_bf16(bits, data, n);
  started_.push_back({over.iall_reduce_sum_bf16(bits, n), &over, data, n});
}

void GradSync::start_reduce_scatter(float *bucket, int64_t shard_numel, Communicator *group) {
  if (!shard_)
    throw Error("compiled program: its step starts gradient reduce-scatters, but it has no flat_layout "
                "(regenerate the program with megac compile)");
  Communicator &over = group ? *group : *shard_;
  started_.push_back({over.ireduce_scatter_sum(bucket, bucket, shard_numel), &over, bucket, shard_numel, true});
}

int64_t GradSync::finish() {
  const auto started = static_cast<int64_t>(started_.size());
  for (Started &s : started_) {
    if (s.scattered) {
      s.over->wait(*s.request);
      if (replicas_)
        replicas_->all_reduce_sum(s.data, s.n);
      continue;
    }
    s.over->wait(*s.request);
    if (bf16_.data())
      device_.from_bf16(s.data, bf16_copy(s.data, s.n), s.n);
  }
  started_.clear();
  return started;
}

} // namespace megart
