// Megatron's distributed optimizer (ZeRO-1; --data-parallel-sharding-strategy optim) on one rank
// of a shard group: parameters and gradients in one flat buffer each, laid out by the compiler
// (megac's FlatBufferLayout: parameters in reverse order, buckets padded so that each splits into
// equal shards); AdamW's moments only for this rank's shard of every bucket. The flat buffers
// belong to the caller (ParamStore allocates them for a program with a flat layout); this state
// owns the moments and knows the shard pieces. An iteration: backward adds into the flat
// gradients; the program's compiled sync leaves in each bucket the sum over the group of this
// rank's shard; step() updates the shard's parameters; the program's compiled gather (or
// start_all_gather_params() with overlap) gives every rank every bucket's updated parameters again.
// With expert parallelism the buckets of the rank's experts (FlatBucket::experts) are sharded over
// the dp ranks holding the same experts (the expert group), the others over the shard group.
#pragma once

#include "megart/comm.h"
#include "megart/device.h"
#include "megart/optimizer.h"
#include "megart/program.h" // FlatBucket

#include <cstdint>
#include <memory>
#include <vector>

namespace megart {

// Where every parameter sits in the flat buffers: the compiler's layout, as tables.
struct FlatLayout {
  std::vector<int64_t> param_offsets;
  std::vector<int64_t> param_numels;
  std::vector<char> weight_decay;  // per parameter: AdamW's decay applies (not to biases / norms)
  std::vector<FlatBucket> buckets; // disjoint, in buffer order, together covering every parameter
  int64_t numel = 0;               // the whole buffer, padding included
};

// Throws megart::Error naming the first inconsistency: a parameter outside the buffer or in two
// buckets or none, overlapping parameters, a bucket not divisible into `shard_size` shards (an
// expert bucket: `expert_shard_size`; 0: the layout may have none).
void validate_flat_layout(const FlatLayout &layout, int shard_size, int expert_shard_size = 0);

// One rank's shards of every bucket together (the moments' elements; ZeRO-2/3's shard buffers):
// each bucket split over `shard_size` ranks, an expert bucket over `expert_shard_size`.
int64_t flat_shard_numel(const FlatLayout &layout, int64_t shard_size, int64_t expert_shard_size);

class DistributedOptimizerState final : public ParamGathers {
public:
  // `params` and `grads`: the flat buffers (layout.numel floats each, on `device`), which must
  // outlive this state; with `grads_sharded` (ZeRO-2) `grads` holds only this rank's shard of
  // each bucket (shard_numel() floats, bucket b's at shard_offset(b)), reduced by the compiled
  // backward. `group`: the ranks one copy of the state is sharded over (the dp group, or with
  // --num-distributed-optimizer-instances a part of it); `expert_group` (required when a bucket
  // holds experts): the dp ranks holding the same experts. Validates the layout and allocates the
  // zeroed moments (shard_numel() floats each, OptimizerState).
  // With `params_sharded` (ZeRO-3, implies grads_sharded) `params` holds only this rank's shards
  // too, laid out as the gradient shards. ZeRO-Offload: the first `offloaded_numel` elements of
  // this rank's shard (in shard order) are stepped on the host: their master weights, moments and
  // a copy of their gradients live in host memory (OffloadedOptimizer), the device keeps moments
  // for the rest only.
  DistributedOptimizerState(FlatLayout layout, float *params, float *grads, Communicator &group,
                            Device &device, bool grads_sharded = false, bool params_sharded = false,
                            int64_t offloaded_numel = 0, Communicator *expert_group = nullptr);

  // Parameter i in the flat buffer (ZeRO-1/2: with params_sharded there is no whole parameter).
  float *param(int64_t i) const { return params_ + layout_.param_offsets[i]; }
  // Parameter i's whole gradient in the flat buffer (ZeRO-1 only: with grads_sharded there is none).
  float *grad(int64_t i) const { return grads_ + layout_.param_offsets[i]; }
  bool grads_sharded() const { return grads_sharded_; }
  bool params_sharded() const { return params_sharded_; }
  // This rank's reduced shard of bucket b (shard_size(b) floats): where the reduce-scatter
  // left it (ZeRO-1: the bucket's first elements; ZeRO-2: its place in the shard buffer).
  float *bucket_grad_shard(int64_t b) const;
  // The ranks bucket b is sharded over, the size of its shard and where that lies among this
  // rank's shards (the moments', ZeRO-2's gradients', ZeRO-3's parameters').
  Communicator &group_of(int64_t b) const;
  int64_t shard_size(int64_t b) const { return layout_.buckets[b].numel / group_of(b).size(); }
  int64_t shard_offset(int64_t b) const { return shard_offsets_[b]; }
  // The bucket holding parameter i.
  int64_t bucket_of(int64_t i) const;
  int64_t size() const { return static_cast<int64_t>(layout_.param_offsets.size()); }
  const FlatLayout &layout() const { return layout_; }
  // The shard group (every bucket's but the experts').
  Communicator &group() const { return group_; }
  // Elements of each moment array: this rank's shard of every bucket.
  int64_t shard_numel() const { return shard_numel_; }

  void zero_moments();
  // This rank's reduced gradients (the program's compiled sync reduce-scatters each bucket, this
  // rank's shard landing at the bucket's first element), one piece per (bucket shard, parameter) overlap, padding left
  // out: what the gradient norm sums and clipping scales. Valid after the reduce-scatter.
  const MutableTensorList &shard_grads() const { return shard_grads_; }
  // The piece's parameter: shard_grads()[k] belongs to parameter piece_param(k).
  int64_t piece_param(int64_t k) const { return pieces_[k].param; }
  // AdamW on this rank's shard (the factors as Optimizer computes them).
  void step(const AdamWScalars &with_decay, const AdamWScalars &without_decay);
  // Every bucket's updated shards to every rank of the group (not with params_sharded: throws),
  // started here and each bucket finished by wait(bucket) (ParamGathers: the compiled forward's,
  // with --overlap-param-gather) or wait_all(); the compiled gather does it without overlap.
  void start_all_gather_params();
  void wait(int64_t bucket) override;
  void wait_all();
  // ZeRO-3: collective over the group, every bucket's parameters whole into `full` (layout.numel
  // floats on the device, laid out as the layout says).
  void all_gather_params_into(float *full) const;
  // ZeRO-3: local, keeps this rank's pieces of parameter i's whole value `host` (param_numels[i]
  // floats in host memory).
  void set_param_pieces(int64_t i, const float *host);
  // ZeRO-Offload: the host master weights from the parameters on the device (after they were
  // initialised or loaded).
  void refresh_offloaded_master();

  // Checkpoints hold whole moments. Collective over the group: both moments, whole, into
  // `exp_avg` and `exp_avg_sq` (layout.numel floats each, on the device), laid out like the
  // parameters: parameter i's moments start at param_offsets[i]; padding is left as it is.
  void all_gather_moments(float *exp_avg, float *exp_avg_sq) const;
  // Local: keeps this rank's pieces of parameter i's whole moment `host` (param_numels[i]
  // floats in host memory) in exp_avg (or, `squared`, exp_avg_sq).
  void set_moment_pieces(int64_t i, bool squared, const float *host);

private:
  struct Piece {
    int64_t param;         // which parameter
    int64_t element;       // its first element in the flat layout
    int64_t value;         // where its parameter values sit (the flat buffer, or ZeRO-3's shards)
    int64_t reduced;       // where its reduced gradient sits after the reduce-scatter
    int64_t state;         // its first element in the moments
    int64_t n;
  };
  FlatLayout layout_;
  float *params_, *grads_;
  Communicator &group_;
  Communicator *expert_group_;
  std::vector<int64_t> shard_offsets_; // per bucket
  Device &device_;
  bool grads_sharded_, params_sharded_;
  int64_t shard_numel_ = 0, offloaded_ = 0;
  DeviceBuffer exp_avg_, exp_avg_sq_; // the device's part: shard elements offloaded_ ..
  // ZeRO-Offload, host memory, shard elements 0 .. offloaded_.
  DeviceBuffer host_master_, host_grads_, host_exp_avg_, host_exp_avg_sq_;
  std::vector<Piece> pieces_;
  // The pieces cut where the offloaded part of the shard ends: stepped on the host (state <
  // offloaded_), or on the device.
  std::vector<Piece> host_pieces_, device_pieces_;
  // The host pieces' copies merged where neighbours are contiguous on both sides (one copy per
  // run, not per piece, every step): gradients down (reduced -> state), values up (state -> value).
  struct CopyRun {
    int64_t device, host, n;
  };
  std::vector<CopyRun> grads_down_, values_up_;
  std::vector<std::unique_ptr<Request>> gathers_; // per bucket, in flight (start_all_gather_params)
  MutableTensorList shard_grads_;
};

} // namespace megart
