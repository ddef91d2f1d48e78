// Data-parallel gradient synchronisation: every dp rank trained on its share of the global
// batch; summing the gradients over the dp ranks gives each the gradient of the whole batch.
#pragma once

#include "megart/comm.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace megart {

// Megatron's default --ddp-bucket-size, in elements.
constexpr int64_t kDefaultDdpBucketSize = 40'000'000;

// Sums data[0, n) over `dp` in place, in consecutive buckets of at most bucket_elems elements:
// one all-reduce per bucket (not per tensor: few large messages use the network best; a bucket
// bounds the size of one message). Returns the number of all-reduces. Collective over `dp`.
int64_t all_reduce_in_buckets(Communicator &dp, float *data, int64_t n, int64_t bucket_elems);

// The buckets a program compiled with --overlap-grad-reduce starts during the backward of an
// iteration's last microbatch (tx.start_grad_sync), each as soon as its gradients are final;
// finish() waits for all of them before the optimizer reads the gradients.
class GradSync {
public:
  explicit GradSync(Communicator &dp) : dp_(dp) {}
  // Starts the dp sum of n gradients from `data` (Communicator::iall_reduce_sum).
  void start(float *data, int64_t n);
  // Waits for every started bucket; returns how many there were.
  int64_t finish();

private:
  Communicator &dp_;
  std::vector<std::unique_ptr<Request>> pending_;
};

} // namespace megart
