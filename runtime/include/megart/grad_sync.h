// Data-parallel gradient synchronisation: every dp rank trained on its share of the global
// batch; summing the gradients over the dp ranks gives each the gradient of the whole batch.
#pragma once

#include "megart/comm.h"

#include <cstdint>

namespace megart {

// Megatron's default --ddp-bucket-size, in elements.
constexpr int64_t kDefaultDdpBucketSize = 40'000'000;

// Sums data[0, n) over `dp` in place, in consecutive buckets of at most bucket_elems elements:
// one all-reduce per bucket (not per tensor: few large messages use the network best; a bucket
// bounds the size of one message). Returns the number of all-reduces. Collective over `dp`.
int64_t all_reduce_in_buckets(Communicator &dp, float *data, int64_t n, int64_t bucket_elems);

} // namespace megart
