// Data-parallel gradient synchronisation: every dp rank trained on its share of the global
// batch; summing the gradients over the dp ranks gives each the gradient of the whole batch.
#pragma once

#include "megart/comm.h"
#include "megart/device.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace megart {

// Megatron's default --ddp-bucket-size, in elements.
constexpr int64_t kDefaultDdpBucketSize = 40'000'000;

// The dp sums of one iteration's gradient buckets. The compiled program starts each bucket:
// inside backward, as soon as its gradients are final (--overlap-grad-reduce,
// tx.start_grad_sync), or after the last microbatch (its sync_gradients function); finish()
// waits for all of them before the optimizer reads the gradients.
//
// In fp32 a bucket is summed in place. After reduce_in_bf16 (--grad-reduce-in-bf16) it is
// rounded to bf16 into a copy, summed there in bf16 (half the bytes on the wire, each partial sum
// rounded to bf16, as Megatron's bf16 gradient buffers are reduced), and finish() writes the sum
// back as fp32. The microbatches' gradients still accumulate in fp32.
class GradSync {
public:
  GradSync(Communicator &dp, Device &device) : dp_(dp), device_(device) {}
  // Sums the buckets of grads[0, n) (every bucket lies there) in bf16 from now on; allocates
  // their bf16 copy (2n bytes) here, not while sums run.
  void reduce_in_bf16(float *grads, int64_t n);
  // Starts the dp sum of n gradients at `data` (Communicator::iall_reduce_sum(_bf16)); with
  // `group`, the sum over its ranks instead (expert parallelism: the experts' gradients over the
  // dp ranks holding the same experts, StepContext::expert_dp).
  void start(float *data, int64_t n, Communicator *group = nullptr);
  // The distributed optimizer with --overlap-grad-reduce: reduce-scatters go over `shard` and,
  // with hybrid sharding, finish() then sums each shard across `replicas` (null: none).
  void shard_over(Communicator &shard, Communicator *replicas) {
    shard_ = &shard;
    replicas_ = replicas;
  }
  // Starts the in-place reduce-scatter of a flat bucket over the shard group (with `group`: over
  // its ranks, an expert bucket's expert_dp): this rank's shard_numel-element shard of the sum
  // lands at `bucket` (Communicator::ireduce_scatter_sum).
  void start_reduce_scatter(float *bucket, int64_t shard_numel, Communicator *group = nullptr);
  // Waits for every started bucket (and, in bf16, writes the sums back); returns how many
  // there were.
  int64_t finish();

private:
  struct Started {
    std::unique_ptr<Request> request;
    Communicator *over; // whose request it is
    float *data;
    int64_t n;
    bool scattered = false; // a reduce-scatter (data: the shard), else an all-reduce
  };
  uint16_t *bf16_copy(const float *data, int64_t n) const;

  Communicator &dp_;
  Device &device_;
  Communicator *shard_ = nullptr, *replicas_ = nullptr;
  std::vector<Started> started_;
  // reduce_in_bf16: the gradients and their bf16 copy, element i of one at element i of the other.
  float *grads_ = nullptr;
  int64_t grads_numel_ = 0;
  DeviceBuffer bf16_;
};

} // namespace megart
