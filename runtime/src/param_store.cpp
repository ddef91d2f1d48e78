#include "megart/param_store.h"

#include "megart/error.h"
#include "megart/param_init.h"
#include "megart/safetensors.h"
#include "megart/stacked_tensors.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>
#include <set>

namespace megart {

namespace {

// The program's flat layout of these parameters as the distributed optimizer's tables, checked
// against the parameter table and the shard group.
FlatLayout flat_layout_of(const FlatLayoutDesc &flat, const std::vector<ParamDesc> &descs,
                          const Communicator *group, const Communicator *expert_group) {
  auto bad = [](const std::string &problem) {
    throw Error("compiled program: flat_layout (the distributed optimizer's buffers): " + problem +
                " (regenerate the program with megac compile)");
  };
  if (!group)
    bad("no shard group was given for it");
  if (!flat.param_offsets || !flat.buckets || flat.num_buckets < 1 || flat.numel < 1)
    bad("the tables are missing or empty (param_offsets, buckets, num_buckets " +
        std::to_string(flat.num_buckets) + ", numel " + std::to_string(flat.numel) + ")");
  if (flat.shard_degree != group->size())
    bad("shard_degree is " + std::to_string(flat.shard_degree) + ", but the data-parallel group " +
        "has " + std::to_string(group->size()) + " ranks");
  const int expert_size = expert_group ? expert_group->size() : 0;
  if (flat.expert_shard_degree != 0 && flat.expert_shard_degree != expert_size)
    bad("expert_shard_degree is " + std::to_string(flat.expert_shard_degree) + ", but " +
        (expert_group ? "the expert-data-parallel group has " + std::to_string(expert_size) + " ranks"
                      : std::string("no expert-data-parallel group was given")));
  constexpr int64_t kAlignFloats = 64 / sizeof(float);
  FlatLayout l;
  for (size_t i = 0; i < descs.size(); ++i) {
    const int64_t offset = flat.param_offsets[i];
    if (offset < 0 || offset % kAlignFloats != 0)
      bad("parameter " + std::to_string(i) + " ('" + descs[i].name + "') starts at element " +
          std::to_string(offset) + ", which is not a multiple of " + std::to_string(kAlignFloats) +
          " (64 bytes)");
    l.param_offsets.push_back(offset);
    l.param_numels.push_back(block_numel(descs[i]));
    l.weight_decay.push_back(descs[i].weight_decay ? 1 : 0);
  }
  l.buckets.assign(flat.buckets, flat.buckets + flat.num_buckets);
  l.numel = flat.numel;
  try {
    validate_flat_layout(l, group->size(), static_cast<int>(flat.expert_shard_degree));
  } catch (const Error &e) {
    bad(e.what());
  }
  return l;
}

} // namespace

ParamStore::ParamStore(const ParamDesc *params, int64_t num_params, int64_t tp_rank,
                       int64_t tp_size, Device &device, const FlatLayoutDesc *flat_layout,
                       Communicator *shard_group, int64_t ep_rank, int64_t ep_size,
                       Communicator *expert_shard_group)
    : tp_rank_(tp_rank), tp_size_(tp_size), ep_rank_(ep_rank), ep_size_(ep_size), device_(&device) {
  set_blocks(params, num_params);
  if (flat_layout) {
    // The distributed optimizer: two flat buffers as the compiler laid them out (their sizes are
    // its memory prediction), the moments only for this rank's shards.
    // With ZeRO-2 the gradient buffer holds only this rank's shard of each bucket, which the
    // compiled backward fills (StepContext::grad_shards): no per-parameter gradient pointers.
    // With ZeRO-3 the parameter buffer too (StepContext::param_shards).
    Communicator *expert_group = flat_layout->expert_shard_degree > 0 ? expert_shard_group : nullptr;
    FlatLayout layout = flat_layout_of(*flat_layout, descs_, shard_group, expert_group);
    const bool params_sharded = flat_layout->sharding == DataParallelSharding::OptimGradsParams;
    const bool grads_sharded = params_sharded || flat_layout->sharding == DataParallelSharding::OptimGrads;
    const int64_t shard = flat_shard_numel(layout, flat_layout->shard_degree, flat_layout->expert_shard_degree);
    flat_grads_numel_ = grads_sharded ? shard : layout.numel;
    flat_params_ = DeviceBuffer(device, static_cast<size_t>(params_sharded ? shard : layout.numel) * sizeof(float),
                                MemoryCategory::Parameters);
    flat_grads_ = DeviceBuffer(device, static_cast<size_t>(flat_grads_numel_) * sizeof(float),
                               MemoryCategory::Gradients);
    flat_offsets_ = layout.param_offsets;
    for (int64_t offset : flat_offsets_) {
      param_ptrs_.push_back(params_sharded ? nullptr : flat_params_.as<float>() + offset);
      grad_ptrs_.push_back(grads_sharded ? nullptr : flat_grads_.as<float>() + offset);
    }
    sharded_ = std::make_unique<DistributedOptimizerState>(
        std::move(layout), flat_params_.as<float>(), flat_grads_.as<float>(), *shard_group, device, grads_sharded,
        params_sharded, flat_layout->offloaded_numel, expert_group);
    return;
  }
  // One gradient allocation; each gradient starts on a 64-byte boundary, as ProgramDesc
  // promises generated code.
  constexpr int64_t kAlignFloats = 64 / sizeof(float);
  std::vector<int64_t> grad_offsets;
  int64_t total = 0;
  for (const ParamDesc &d : descs_) {
    grad_offsets.push_back(total);
    total += (block_numel(d) + kAlignFloats - 1) / kAlignFloats * kAlignFloats;
  }
  flat_grads_ = DeviceBuffer(device, static_cast<size_t>(total) * sizeof(float),
                             MemoryCategory::Gradients);
  flat_grads_numel_ = total;
  for (size_t i = 0; i < descs_.size(); ++i) {
    const size_t bytes = static_cast<size_t>(numel_[i]) * sizeof(float);
    params_.emplace_back(device, bytes, MemoryCategory::Parameters);
    exp_avg_.emplace_back(device, bytes, MemoryCategory::OptimizerState);
    exp_avg_sq_.emplace_back(device, bytes, MemoryCategory::OptimizerState);
    param_ptrs_.push_back(params_.back().as<float>());
    grad_ptrs_.push_back(flat_grads_.as<float>() + grad_offsets[i]);
  }
}

void ParamStore::set_blocks(const ParamDesc *params, int64_t num_params) {
  validate_param_layout(params, num_params, tp_size_, ep_size_);
  if (tp_rank_ < 0 || tp_rank_ >= tp_size_)
    throw Error("tensor parallel rank " + std::to_string(tp_rank_) + " is outside 0.." +
                std::to_string(tp_size_ - 1));
  if (ep_rank_ < 0 || ep_rank_ >= ep_size_)
    throw Error("expert parallel rank " + std::to_string(ep_rank_) + " is outside 0.." +
                std::to_string(ep_size_ - 1));
  program_descs_.assign(params, params + num_params);
  for (const ParamDesc &d : program_descs_)
    descs_.push_back(ep_block(tp_block(d, tp_rank_), ep_size_ > 1 ? ep_rank_ : 0));
  tensors_ = group_by_tensor(descs_.data(), size());
  for (const ParamDesc &d : descs_)
    numel_.push_back(block_numel(d));
}

ParamStore::ParamStore(FrozenTag, const ParamDesc *params, int64_t num_params, int64_t tp_rank,
                       int64_t tp_size, Device &device)
    : tp_rank_(tp_rank), tp_size_(tp_size), frozen_(true), device_(&device) {
  set_blocks(params, num_params);
  nf4_.resize(descs_.size());
  for (size_t i = 0; i < descs_.size(); ++i) {
    const int64_t block = descs_[i].nf4_block;
    if (block > 0 && (&device != &cpu_device() || numel_[i] % 2 != 0 || block % 2 != 0))
      throw Error("compiled program: frozen parameter " + std::to_string(i) + " ('" + descs_[i].name +
                  "') is NF4 with block " + std::to_string(block) + " over " + std::to_string(numel_[i]) +
                  " elements; NF4 needs an even count and block, in host memory (regenerate with megac compile)");
    const size_t bytes = block > 0 ? static_cast<size_t>(nf4_weight_bytes(numel_[i], block))
                                   : static_cast<size_t>(numel_[i]) * sizeof(float);
    params_.emplace_back(device, bytes, MemoryCategory::FrozenParameters);
    param_ptrs_.push_back(block > 0 ? nullptr : params_.back().as<float>());
    grad_ptrs_.push_back(nullptr);
  }
  for (Nf4Weight &w : nf4_) // the table is complete: pointers into it stay valid
    nf4_ptrs_.push_back(w.numel > 0 ? &w : nullptr);
}

void ParamStore::store_block(int64_t i, StateArray which, const float *host) {
  const int64_t block = frozen_ ? descs_[i].nf4_block : 0;
  if (which != StateArray::Param || block == 0) {
    device_->copy_from_host(array(i, which), host, static_cast<size_t>(numel_[i]) * sizeof(float));
    return;
  }
  nf4_[i] = nf4_store(nf4_quantize(host, numel_[i], block, /*double_quant=*/true), params_[i].data());
  nf4_ptrs_[i] = &nf4_[i];
}

std::unique_ptr<ParamStore> ParamStore::frozen(const ParamDesc *params, int64_t num_params, int64_t tp_rank,
                                               int64_t tp_size, Device &device) {
  return std::unique_ptr<ParamStore>(new ParamStore(FrozenTag{}, params, num_params, tp_rank, tp_size, device));
}

float *ParamStore::exp_avg(int64_t i) {
  if (frozen_)
    throw Error("frozen parameters have no optimizer state");
  if (sharded_)
    throw Error("the distributed optimizer keeps no per-parameter moments (they are sharded)");
  return exp_avg_[i].as<float>();
}

float *ParamStore::exp_avg_sq(int64_t i) {
  if (frozen_)
    throw Error("frozen parameters have no optimizer state");
  if (sharded_)
    throw Error("the distributed optimizer keeps no per-parameter moments (they are sharded)");
  return exp_avg_sq_[i].as<float>();
}

int64_t ParamStore::num_tensor_elements() const {
  return tensor_elements(descs_.data(), tensors_);
}

void ParamStore::zero_grads() { device_->zero(flat_grads_.data(), flat_grads_.bytes()); }

void ParamStore::reset_optimizer_state() {
  if (frozen_)
    return;
  if (sharded_) {
    sharded_->zero_moments();
    return;
  }
  for (size_t i = 0; i < descs_.size(); ++i) {
    device_->zero(exp_avg_[i].data(), exp_avg_[i].bytes());
    device_->zero(exp_avg_sq_[i].data(), exp_avg_sq_[i].bytes());
  }
}

std::string state_tensor_name(const std::string &name, StateArray which) {
  switch (which) {
  case StateArray::Param: return name;
  case StateArray::ExpAvg: return name + ".exp_avg";
  case StateArray::ExpAvgSq: return name + ".exp_avg_sq";
  }
  return name;
}

float *ParamStore::array(int64_t i, StateArray which) const {
  if (which == StateArray::Param && !params_sharded())
    return param_ptrs_[i];
  if (frozen_)
    throw Error("frozen parameters have no optimizer state");
  if (which == StateArray::Param) {
    if (!gathered_params_.data())
      throw Error("ZeRO-3 keeps the parameters sharded over the data-parallel ranks: "
                  "gather_sharded_state() assembles them before a checkpoint is written");
    return gathered_params_.as<float>() + flat_offsets_[i];
  }
  if (!sharded_)
    return (which == StateArray::ExpAvg ? exp_avg_[i] : exp_avg_sq_[i]).as<float>();
  const DeviceBuffer &gathered = which == StateArray::ExpAvg ? gathered_exp_avg_ : gathered_exp_avg_sq_;
  if (!gathered.data())
    throw Error("the distributed optimizer's moments are sharded over the data-parallel ranks: "
                "gather_sharded_state() assembles them before a checkpoint is written");
  return gathered.as<float>() + flat_offsets_[i];
}

std::vector<float> ParamStore::host_array(int64_t i, StateArray which) const {
  std::vector<float> host(static_cast<size_t>(numel_[i]));
  if (which == StateArray::Param && nf4_ptrs_.size() > static_cast<size_t>(i) && nf4_ptrs_[i]) {
    nf4_dequantize(host.data(), *nf4_ptrs_[i]);
    return host;
  }
  device_->copy_to_host(host.data(), array(i, which), host.size() * sizeof(float));
  return host;
}

void ParamStore::gather_sharded_state() {
  if (!sharded_)
    return;
  const size_t bytes = static_cast<size_t>(sharded_->layout().numel) * sizeof(float);
  gathered_exp_avg_ = DeviceBuffer(*device_, bytes, MemoryCategory::Communication);
  gathered_exp_avg_sq_ = DeviceBuffer(*device_, bytes, MemoryCategory::Communication);
  sharded_->all_gather_moments(gathered_exp_avg_.as<float>(), gathered_exp_avg_sq_.as<float>());
  if (params_sharded()) {
    gathered_params_ = DeviceBuffer(*device_, bytes, MemoryCategory::Communication);
    sharded_->all_gather_params_into(gathered_params_.as<float>());
  }
}

void ParamStore::release_gathered_state() {
  gathered_exp_avg_ = DeviceBuffer();
  gathered_exp_avg_sq_ = DeviceBuffer();
  gathered_params_ = DeviceBuffer();
}

bool ParamStore::params_sharded() const { return sharded_ && sharded_->params_sharded(); }

void ParamStore::init(uint64_t seed) {
  std::vector<float> host;
  for (size_t i = 0; i < descs_.size(); ++i) {
    host.assign(static_cast<size_t>(numel_[i]), 0.0f);
    init_param_block(descs_[i], seed, host.data());
    if (params_sharded()) // only this rank's shard of it
      sharded_->set_param_pieces(static_cast<int64_t>(i), host.data());
    else
      store_block(static_cast<int64_t>(i), StateArray::Param, host.data());
  }
  reset_optimizer_state();
  if (sharded_) // ZeRO-Offload's host master weights start from these
    sharded_->refresh_offloaded_master();
}

void ParamStore::load(const std::vector<std::string> &files, const std::set<std::string> &elsewhere) {
  read_arrays(files, elsewhere, {StateArray::Param}, {"F32", "BF16", "F16"});
  reset_optimizer_state();
  if (sharded_) // ZeRO-Offload's host master weights start from the loaded ones
    sharded_->refresh_offloaded_master();
}

void ParamStore::load_optimizer_state(const std::string &path,
                                      const std::set<std::string> &elsewhere) {
  // F32 only: a resumed run continues bit for bit from exactly what was saved.
  read_arrays({path}, elsewhere, {StateArray::ExpAvg, StateArray::ExpAvgSq}, {"F32"});
}

void ParamStore::read_arrays(const std::vector<std::string> &paths,
                             const std::set<std::string> &elsewhere,
                             const std::vector<StateArray> &which,
                             const std::set<std::string> &dtypes) {
  std::vector<SafetensorsFile> files;
  for (const std::string &p : paths)
    files.push_back(SafetensorsFile::open(p));
  const std::string path = paths.size() == 1 ? paths[0] : paths[0] + " (and " +
                           std::to_string(paths.size() - 1) + " more shards)";
  auto find = [&](const std::string &name) -> std::pair<const SafetensorsFile *, const TensorInfo *> {
    for (const SafetensorsFile &f : files)
      if (const TensorInfo *info = f.find(name))
        return {&f, info};
    return {nullptr, nullptr};
  };
  // Check the whole file against the program first: a wrong-model checkpoint must fail with
  // every mismatch named, and before any parameter changes.
  std::vector<std::string> problems;
  std::set<std::string> used;
  for (const std::string &name : elsewhere)
    for (StateArray w : which)
      if (!is_stacked(name))
        used.insert(state_tensor_name(name, w));
      else // another stage's experts: their members, whatever the index
        for (const SafetensorsFile &f : files)
          for (const std::string &file : f.names())
            if (is_member(file, state_tensor_name(name, w)))
              used.insert(file);
  std::string dtype_list;
  for (const std::string &d : dtypes)
    dtype_list += (dtype_list.empty() ? "" : ", ") + d;
  for (const CheckpointTensor &t : tensors_)
    for (StateArray w : which)
      for (const NamedTensor &m : unstacked({{state_tensor_name(t.name, w), t.shape, nullptr}})) {
        used.insert(m.name);
        const TensorInfo *info = find(m.name).second;
        if (!info)
          problems.push_back("missing tensor '" + m.name + "' " + shape_string(m.shape));
        else if (info->shape != m.shape)
          problems.push_back("tensor '" + m.name + "' has shape " + shape_string(info->shape) +
                             ", the program needs " + shape_string(m.shape));
        else if (!dtypes.count(info->dtype))
          problems.push_back("tensor '" + m.name + "' has dtype " + info->dtype + "; only " +
                             dtype_list + " can be loaded");
      }
  std::vector<std::string> extra;
  for (const SafetensorsFile &f : files)
    for (const std::string &name : f.names())
      if (!used.count(name))
        extra.push_back(name);
  if (!extra.empty()) {
    std::string list;
    for (size_t i = 0; i < extra.size() && i < 8; ++i)
      list += (i ? ", '" : "'") + extra[i] + "'";
    if (extra.size() > 8)
      list += ", ...";
    problems.push_back(std::to_string(extra.size()) + " tensor" + (extra.size() > 1 ? "s" : "") +
                       " not used by the program: " + list);
  }
  if (!problems.empty()) {
    std::string message = path + ": checkpoint does not match the compiled program:";
    for (size_t i = 0; i < problems.size() && i < 20; ++i)
      message += "\n  " + problems[i];
    if (problems.size() > 20)
      message += "\n  ... and " + std::to_string(problems.size() - 20) + " more";
    throw Error(message + "\n  (was it saved from a different model spec?)");
  }
  std::vector<float> full, block;
  for (const CheckpointTensor &t : tensors_)
    for (StateArray w : which) {
      full.resize(static_cast<size_t>(full_numel(descs_[t.blocks[0]])));
      const std::string name = state_tensor_name(t.name, w);
      float *at = full.data();
      for (const NamedTensor &m : unstacked({{name, t.shape, full.data()}})) { // a stack: each member in turn
        find(m.name).first->read_f32(m.name, m.shape, at);
        at += std::accumulate(m.shape.begin(), m.shape.end(), int64_t(1), std::multiplies<int64_t>());
      }
      // Training from a NaN or inf would skip every step (or spread it): refuse it here, before
      // anything runs, with the place to look.
      const auto bad = std::find_if(full.begin(), full.end(), [](float v) { return !std::isfinite(v); });
      if (bad != full.end())
        throw Error(path + ": tensor '" + name + "' holds " + (std::isnan(*bad) ? "NaN" : "an infinity") +
                    " at element " + std::to_string(bad - full.begin()) + " of " +
                    std::to_string(full.size()) + "; the checkpoint is damaged (load an earlier one)");
      // AdamW's second moment is a mean of squares: a negative one would make sqrt(v) NaN at
      // the first step.
      if (w == StateArray::ExpAvgSq) {
        const auto negative = std::find_if(full.begin(), full.end(), [](float v) { return v < 0; });
        if (negative != full.end())
          throw Error(path + ": tensor '" + name + "' holds " + std::to_string(*negative) + " at element " +
                      std::to_string(negative - full.begin()) + "; a second moment (a mean of squares) is never "
                      "negative: the optimizer state is damaged (load an earlier checkpoint, or --no-load-optim)");
      }
      for (int64_t b : t.blocks) {
        block.assign(static_cast<size_t>(numel_[b]), 0.0f); // vocabulary padding stays 0
        copy_block_from_full(descs_[b], full.data(), block.data());
        if (sharded_ && w != StateArray::Param) // only this rank's shard of the moments
          sharded_->set_moment_pieces(b, w == StateArray::ExpAvgSq, block.data());
        else if (w == StateArray::Param && params_sharded()) // ZeRO-3: of the parameters too
          sharded_->set_param_pieces(b, block.data());
        else
          store_block(b, w, block.data());
      }
    }
}

std::vector<float> ParamStore::assemble(const CheckpointTensor &t) const {
  std::vector<float> full(static_cast<size_t>(full_numel(descs_[t.blocks[0]])));
  for (int64_t b : t.blocks)
    copy_block_to_full(descs_[b], host_array(b).data(), full.data());
  return full;
}

void ParamStore::save(const std::string &path) const {
  if (tp_size_ > 1)
    throw Error("saving " + path + ": this store holds tp rank " + std::to_string(tp_rank_) +
                "'s blocks of " + std::to_string(tp_size_) +
                "; save with the tp communicator so the blocks are gathered");
  SelfCommunicator self;
  save(path, self);
}

void ParamStore::save(const std::string &path, Communicator &tp) const {
  std::vector<std::vector<float>> data = gather_tensors(tp);
  if (tp.rank() != 0)
    return;
  std::vector<NamedTensor> named;
  for (size_t i = 0; i < tensors_.size(); ++i)
    named.push_back({tensors_[i].name, tensors_[i].shape, data[i].data()});
  write_safetensors(path, named, {{"format", "pt"}});
}

std::vector<std::vector<float>> ParamStore::gather_tensors(Communicator &tp, StateArray which,
                                                           Communicator *ep) const {
  if (tp.size() != tp_size_ || tp.rank() != tp_rank_)
    throw Error("gathering the tensors: the tp communicator is rank " + std::to_string(tp.rank()) +
                " of " + std::to_string(tp.size()) + ", but the store holds tp rank " +
                std::to_string(tp_rank_) + " of " + std::to_string(tp_size_));
  const int64_t ep_size = ep ? ep->size() : 1, ep_rank = ep ? ep->rank() : 0;
  if (ep_size != ep_size_ || ep_rank != ep_rank_)
    throw Error("gathering the tensors: the ep communicator is rank " + std::to_string(ep_rank) + " of " +
                std::to_string(ep_size) + ", but the store holds ep rank " + std::to_string(ep_rank_) + " of " +
                std::to_string(ep_size_));
  const bool writer = tp_rank_ == 0 && ep_rank_ == 0;
  // The writer holds all full tensors at once (write_safetensors takes them together): one
  // extra copy of the model in memory, only while saving. The others hold one gather at a time.
  std::vector<std::vector<float>> data;
  std::vector<float> gathered;
  for (const CheckpointTensor &t : tensors_) {
    std::vector<float> full(writer ? static_cast<size_t>(full_numel(descs_[t.blocks[0]])) : 0);
    for (int64_t b : t.blocks) {
      const bool over_ep = ep_split(b), over_tp = tp_split(b);
      if (!over_ep && !over_tp) { // the same on every tp and ep rank: the writer's copy is the tensor's
        if (writer)
          copy_block_to_full(descs_[b], host_array(b, which).data(), full.data());
        continue;
      }
      // Every rank's block has this rank's shape, so all-gathers collect them in rank order: the
      // ep ranks' experts first, then (expert tensor parallelism) those over tp; tp_block and
      // ep_block say where each goes.
      const int64_t n = numel(b), experts = over_ep ? ep_size_ : 1, splits = over_tp ? tp_size_ : 1;
      std::vector<float> mine = host_array(b, which);
      if (over_ep) {
        gathered.resize(static_cast<size_t>(n * ep_size_));
        ep->all_gather(gathered.data(), mine.data(), n);
        mine.swap(gathered);
      }
      if (over_tp) {
        gathered.resize(static_cast<size_t>(n * experts * tp_size_));
        tp.all_gather(gathered.data(), mine.data(), n * experts);
        mine.swap(gathered);
      }
      if (writer)
        for (int64_t r = 0; r < splits; ++r)
          for (int64_t e = 0; e < experts; ++e) {
            const ParamDesc part = over_tp ? tp_block(program_descs_[b], r) : program_descs_[b];
            copy_block_to_full(over_ep ? ep_block(part, e) : part, mine.data() + (r * experts + e) * n, full.data());
          }
    }
    if (writer)
      data.push_back(std::move(full));
  }
  return data;
}

} // namespace megart
