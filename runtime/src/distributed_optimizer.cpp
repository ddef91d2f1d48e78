#include "megart/distributed_optimizer.h"

#include "megart/error.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

namespace megart {

void validate_flat_layout(const FlatLayout &l, int shard_size, int expert_shard_size) {
  const size_t n = l.param_offsets.size();
  if (l.param_numels.size() != n || l.weight_decay.size() != n)
    throw Error("flat layout: " + std::to_string(n) + " parameter offsets but " +
                std::to_string(l.param_numels.size()) + " sizes and " +
                std::to_string(l.weight_decay.size()) + " weight-decay flags");
  int64_t end = 0;
  for (size_t b = 0; b < l.buckets.size(); ++b) {
    const FlatBucket &k = l.buckets[b];
    if (k.experts && expert_shard_size < 1)
      throw Error("flat layout: bucket " + std::to_string(b) + " holds experts, but there is no expert-data-parallel "
                  "group to shard it over");
    const int shards = k.experts ? expert_shard_size : shard_size;
    if (k.offset < end || k.numel <= 0 || k.numel % shards != 0 || k.numel > l.numel - k.offset)
      throw Error("flat layout: bucket " + std::to_string(b) + " (offset " + std::to_string(k.offset) +
                  ", " + std::to_string(k.numel) + " elements) overlaps the one before, leaves the " +
                  std::to_string(l.numel) + "-element buffer or does not split into " +
                  std::to_string(shards) + " equal shards");
    end = k.offset + k.numel;
  }
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i)
    order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return l.param_offsets[a] < l.param_offsets[b]; });
  int64_t previous_end = 0;
  for (size_t i : order) {
    const int64_t begin = l.param_offsets[i], stop = begin + l.param_numels[i];
    const auto inside = std::find_if(l.buckets.begin(), l.buckets.end(), [&](const FlatBucket &k) {
      return begin >= k.offset && stop <= k.offset + k.numel;
    });
    if (l.param_numels[i] < 0 || begin < previous_end || inside == l.buckets.end())
      throw Error("flat layout: parameter " + std::to_string(i) + " (elements " + std::to_string(begin) +
                  ".." + std::to_string(stop) + ") overlaps another or lies in no single bucket");
    previous_end = stop;
  }
}

int64_t flat_shard_numel(const FlatLayout &l, int64_t shard_size, int64_t expert_shard_size) {
  int64_t n = 0;
  for (const FlatBucket &k : l.buckets)
    n += k.numel / (k.experts ? expert_shard_size : shard_size);
  return n;
}

DistributedOptimizerState::DistributedOptimizerState(FlatLayout layout, float *params, float *grads,
                                                     Communicator &group, Device &device, bool grads_sharded,
                                                     bool params_sharded, int64_t offloaded_numel,
                                                     Communicator *expert_group)
    : layout_(std::move(layout)), params_(params), grads_(grads), group_(group), expert_group_(expert_group),
      device_(device), grads_sharded_(grads_sharded || params_sharded), params_sharded_(params_sharded) {
  validate_flat_layout(layout_, group.size(), expert_group ? expert_group->size() : 0);
  for (size_t b = 0; b < layout_.buckets.size(); ++b)
    shard_offsets_.push_back(b == 0 ? 0 : shard_offsets_.back() + shard_size(static_cast<int64_t>(b) - 1));
  shard_numel_ = flat_shard_numel(layout_, group.size(), expert_group ? expert_group->size() : 1);
  if (offloaded_numel < 0 || offloaded_numel > shard_numel_)
    throw Error("flat layout: " + std::to_string(offloaded_numel) + " offloaded elements, but a rank's shard has " +
                std::to_string(shard_numel_));
  offloaded_ = offloaded_numel;
  const size_t device_bytes = static_cast<size_t>(shard_numel_ - offloaded_) * sizeof(float);
  exp_avg_ = DeviceBuffer(device, device_bytes, MemoryCategory::OptimizerState);
  exp_avg_sq_ = DeviceBuffer(device, device_bytes, MemoryCategory::OptimizerState);
  if (offloaded_ > 0) {
    const size_t host_bytes = static_cast<size_t>(offloaded_) * sizeof(float);
    for (DeviceBuffer *b : {&host_master_, &host_grads_, &host_exp_avg_, &host_exp_avg_sq_})
      *b = DeviceBuffer(cpu_device(), host_bytes, MemoryCategory::OffloadedOptimizer);
  }
  // This rank's shard of each bucket, cut where parameters begin and end.
  for (size_t b = 0; b < layout_.buckets.size(); ++b) {
    const FlatBucket &k = layout_.buckets[b];
    const int64_t r = group_of(static_cast<int64_t>(b)).rank(), state = shard_offsets_[b];
    const int64_t m = shard_size(static_cast<int64_t>(b)), lo = k.offset + r * m, hi = lo + m;
    const int64_t reduced = bucket_grad_shard(static_cast<int64_t>(b)) - grads_;
    for (int64_t i = 0; i < size(); ++i) {
      const int64_t begin = std::max(lo, layout_.param_offsets[i]);
      const int64_t stop = std::min(hi, layout_.param_offsets[i] + layout_.param_numels[i]);
      if (begin < stop)
        pieces_.push_back({i, begin, params_sharded_ ? reduced + (begin - lo) : begin, reduced + (begin - lo),
                           state + (begin - lo), stop - begin});
    }
  }
  std::sort(pieces_.begin(), pieces_.end(), [](const Piece &a, const Piece &b) { return a.element < b.element; });
  for (const Piece &p : pieces_) {
    shard_grads_.emplace_back(grads_ + p.reduced, p.n);
    const int64_t on_host = std::clamp<int64_t>(offloaded_ - p.state, 0, p.n);
    if (on_host > 0)
      host_pieces_.push_back({p.param, p.element, p.value, p.reduced, p.state, on_host});
    if (on_host < p.n)
      device_pieces_.push_back({p.param, p.element + on_host, p.value + on_host, p.reduced + on_host,
                                p.state + on_host - offloaded_, p.n - on_host});
  }
  auto extend = [](std::vector<CopyRun> &runs, int64_t device, int64_t host, int64_t n) {
    if (!runs.empty() && runs.back().device + runs.back().n == device && runs.back().host + runs.back().n == host)
      runs.back().n += n;
    else
      runs.push_back({device, host, n});
  };
  for (const Piece &p : host_pieces_) {
    extend(grads_down_, p.reduced, p.state, p.n);
    extend(values_up_, p.value, p.state, p.n);
  }
}

void DistributedOptimizerState::refresh_offloaded_master() {
  for (const CopyRun &r : values_up_)
    device_.copy_to_host(host_master_.as<float>() + r.host, params_ + r.device, static_cast<size_t>(r.n) * sizeof(float));
}

void DistributedOptimizerState::zero_moments() {
  device_.zero(exp_avg_.data(), exp_avg_.bytes());
  device_.zero(exp_avg_sq_.data(), exp_avg_sq_.bytes());
  for (DeviceBuffer *b : {&host_exp_avg_, &host_exp_avg_sq_})
    if (b->data())
      cpu_device().zero(b->data(), b->bytes());
}

float *DistributedOptimizerState::bucket_grad_shard(int64_t b) const {
  return grads_ + (grads_sharded_ ? shard_offsets_[b] : layout_.buckets[b].offset);
}

Communicator &DistributedOptimizerState::group_of(int64_t b) const {
  return layout_.buckets[b].experts ? *expert_group_ : group_; // validated: set when a bucket holds experts
}

int64_t DistributedOptimizerState::bucket_of(int64_t i) const {
  const int64_t at = layout_.param_offsets[i];
  for (size_t b = 0; b < layout_.buckets.size(); ++b)
    if (at >= layout_.buckets[b].offset && at < layout_.buckets[b].offset + layout_.buckets[b].numel)
      return static_cast<int64_t>(b);
  throw Error("flat layout: parameter " + std::to_string(i) + " lies in no bucket");
}

void DistributedOptimizerState::step(const AdamWScalars &with_decay, const AdamWScalars &without_decay) {
  wait_all(); // an overlapped gather of the step before may still be sending the shards this one writes
  std::vector<AdamWTensor> tensors;
  tensors.reserve(device_pieces_.size());
  for (const Piece &p : device_pieces_)
    tensors.push_back({params_ + p.value, grads_ + p.reduced, exp_avg_.as<float>() + p.state,
                       exp_avg_sq_.as<float>() + p.state, p.n, layout_.weight_decay[p.param] != 0});
  device_.adamw(tensors, with_decay, without_decay);
  if (host_pieces_.empty())
    return;
  // ZeRO-Offload: the gradients down, AdamW on the host's master weights, the weights back up.
  for (const CopyRun &r : grads_down_)
    device_.copy_to_host(host_grads_.as<float>() + r.host, grads_ + r.device, static_cast<size_t>(r.n) * sizeof(float));
  std::vector<AdamWTensor> host;
  for (const Piece &p : host_pieces_)
    host.push_back({host_master_.as<float>() + p.state, host_grads_.as<float>() + p.state,
                    host_exp_avg_.as<float>() + p.state, host_exp_avg_sq_.as<float>() + p.state, p.n,
                    layout_.weight_decay[p.param] != 0});
  cpu_device().adamw(host, with_decay, without_decay);
  for (const CopyRun &r : values_up_)
    device_.copy_from_host(params_ + r.device, host_master_.as<float>() + r.host,
                           static_cast<size_t>(r.n) * sizeof(float));
}

void DistributedOptimizerState::start_all_gather_params() {
  if (params_sharded_)
    throw Error("ZeRO-3 (optim_grads_params): the parameters stay sharded after the step");
  gathers_.resize(layout_.buckets.size());
  for (size_t b = 0; b < layout_.buckets.size(); ++b) {
    Communicator &over = group_of(static_cast<int64_t>(b));
    const int64_t m = shard_size(static_cast<int64_t>(b));
    float *bucket = params_ + layout_.buckets[b].offset;
    gathers_[b] = over.iall_gather(bucket, bucket + over.rank() * m, m);
  }
}

void DistributedOptimizerState::wait(int64_t bucket) {
  if (bucket < 0 || bucket >= static_cast<int64_t>(gathers_.size()) || !gathers_[static_cast<size_t>(bucket)])
    return;
  group_of(bucket).wait(*gathers_[static_cast<size_t>(bucket)]);
  gathers_[static_cast<size_t>(bucket)].reset();
}

void DistributedOptimizerState::wait_all() {
  for (size_t b = 0; b < gathers_.size(); ++b)
    wait(static_cast<int64_t>(b));
}

void DistributedOptimizerState::all_gather_params_into(float *full) const {
  for (size_t b = 0; b < layout_.buckets.size(); ++b)
    group_of(static_cast<int64_t>(b))
        .all_gather(full + layout_.buckets[b].offset, params_ + shard_offsets_[b], shard_size(static_cast<int64_t>(b)));
}

void DistributedOptimizerState::set_param_pieces(int64_t i, const float *host) {
  for (const Piece &p : pieces_)
    if (p.param == i)
      device_.copy_from_host(params_ + p.value, host + (p.element - layout_.param_offsets[i]),
                             static_cast<size_t>(p.n) * sizeof(float));
}

void DistributedOptimizerState::all_gather_moments(float *exp_avg, float *exp_avg_sq) const {
  // With ZeRO-Offload the shard's moments are first put together from host and device (through
  // host memory: the Device copies only between the two), in temporary device buffers.
  DeviceBuffer whole_avg, whole_sq;
  const float *avg = exp_avg_.as<float>(), *sq = exp_avg_sq_.as<float>();
  if (offloaded_ > 0) {
    const size_t bytes = static_cast<size_t>(shard_numel_) * sizeof(float);
    whole_avg = DeviceBuffer(device_, bytes, MemoryCategory::Communication);
    whole_sq = DeviceBuffer(device_, bytes, MemoryCategory::Communication);
    std::vector<float> staged(static_cast<size_t>(shard_numel_));
    for (auto [whole, host, dev] : {std::tuple{&whole_avg, &host_exp_avg_, &exp_avg_},
                                    std::tuple{&whole_sq, &host_exp_avg_sq_, &exp_avg_sq_}}) {
      std::memcpy(staged.data(), host->as<float>(), static_cast<size_t>(offloaded_) * sizeof(float));
      device_.copy_to_host(staged.data() + offloaded_, dev->as<float>(),
                           static_cast<size_t>(shard_numel_ - offloaded_) * sizeof(float));
      device_.copy_from_host(whole->data(), staged.data(), bytes);
    }
    avg = whole_avg.as<float>(), sq = whole_sq.as<float>();
  }
  for (size_t b = 0; b < layout_.buckets.size(); ++b) {
    Communicator &over = group_of(static_cast<int64_t>(b));
    const int64_t m = shard_size(static_cast<int64_t>(b)), offset = layout_.buckets[b].offset;
    over.all_gather(exp_avg + offset, avg + shard_offsets_[b], m);
    over.all_gather(exp_avg_sq + offset, sq + shard_offsets_[b], m);
  }
}

void DistributedOptimizerState::set_moment_pieces(int64_t i, bool squared, const float *host) {
  float *moment = (squared ? exp_avg_sq_ : exp_avg_).as<float>();
  for (const Piece &p : device_pieces_)
    if (p.param == i)
      device_.copy_from_host(moment + p.state, host + (p.element - layout_.param_offsets[i]),
                             static_cast<size_t>(p.n) * sizeof(float));
  float *offloaded = (squared ? host_exp_avg_sq_ : host_exp_avg_).as<float>();
  for (const Piece &p : host_pieces_)
    if (p.param == i)
      std::memcpy(offloaded + p.state, host + (p.element - layout_.param_offsets[i]),
                  static_cast<size_t>(p.n) * sizeof(float));
}

} // namespace megart
