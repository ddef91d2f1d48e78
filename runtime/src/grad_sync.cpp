#include "megart/grad_sync.h"

#include "megart/error.h"

#include <algorithm>
#include <string>

namespace megart {

int64_t all_reduce_in_buckets(Communicator &dp, float *data, int64_t n, int64_t bucket_elems) {
  if (bucket_elems < 1)
    throw Error("--ddp-bucket-size is " + std::to_string(bucket_elems) +
                "; it must be at least 1 element");
  int64_t calls = 0;
  for (int64_t start = 0; start < n; start += bucket_elems, ++calls)
    dp.all_reduce_sum(data + start, std::min(bucket_elems, n - start));
  return calls;
}

void GradSync::start(float *data, int64_t n) { pending_.push_back(dp_.iall_reduce_sum(data, n)); }

int64_t GradSync::finish() {
  const auto started = static_cast<int64_t>(pending_.size());
  for (std::unique_ptr<Request> &r : pending_)
    if (!r->test()) // a completed request never needs (nor, on MPI, accepts) a wait
      dp_.wait(*r);
  pending_.clear();
  return started;
}

} // namespace megart
