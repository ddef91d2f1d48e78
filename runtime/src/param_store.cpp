#include "megart/param_store.h"

#include "megart/error.h"
#include "megart/param_init.h"
#include "megart/safetensors.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

namespace megart {

ParamStore::ParamStore(const ParamDesc *params, int64_t num_params, int64_t tp_rank,
                       int64_t tp_size, Device &device)
    : tp_rank_(tp_rank), tp_size_(tp_size), device_(&device) {
  validate_param_layout(params, num_params, tp_size);
  if (tp_rank < 0 || tp_rank >= tp_size)
    throw Error("tensor parallel rank " + std::to_string(tp_rank) + " is outside 0.." +
                std::to_string(tp_size - 1));
  program_descs_.assign(params, params + num_params);
  for (const ParamDesc &d : program_descs_)
    descs_.push_back(tp_block(d, tp_rank));
  tensors_ = group_by_tensor(descs_.data(), size());
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
    const int64_t n = block_numel(descs_[i]);
    const size_t bytes = static_cast<size_t>(n) * sizeof(float);
    numel_.push_back(n);
    params_.emplace_back(device, bytes, MemoryCategory::Parameters);
    exp_avg_.emplace_back(device, bytes, MemoryCategory::OptimizerState);
    exp_avg_sq_.emplace_back(device, bytes, MemoryCategory::OptimizerState);
    param_ptrs_.push_back(params_.back().as<float>());
    grad_ptrs_.push_back(flat_grads_.as<float>() + grad_offsets[i]);
  }
}

int64_t ParamStore::num_tensor_elements() const {
  return tensor_elements(descs_.data(), tensors_);
}

void ParamStore::zero_grads() { device_->zero(flat_grads_.data(), flat_grads_.bytes()); }

void ParamStore::reset_optimizer_state() {
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

const DeviceBuffer &ParamStore::array(int64_t i, StateArray which) const {
  switch (which) {
  case StateArray::ExpAvg: return exp_avg_[i];
  case StateArray::ExpAvgSq: return exp_avg_sq_[i];
  case StateArray::Param: break;
  }
  return params_[i];
}

std::vector<float> ParamStore::host_array(int64_t i, StateArray which) const {
  const DeviceBuffer &buffer = array(i, which);
  std::vector<float> host(static_cast<size_t>(numel_[i]));
  device_->copy_to_host(host.data(), buffer.data(), buffer.bytes());
  return host;
}

void ParamStore::init(uint64_t seed) {
  std::vector<float> host;
  for (size_t i = 0; i < descs_.size(); ++i) {
    host.assign(static_cast<size_t>(numel_[i]), 0.0f);
    init_param_block(descs_[i], seed, host.data());
    device_->copy_from_host(params_[i].data(), host.data(), params_[i].bytes());
  }
  reset_optimizer_state();
}

void ParamStore::load(const std::vector<std::string> &files, const std::set<std::string> &elsewhere) {
  read_arrays(files, elsewhere, {StateArray::Param}, {"F32", "BF16", "F16"});
  reset_optimizer_state();
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
      used.insert(state_tensor_name(name, w));
  std::string dtype_list;
  for (const std::string &d : dtypes)
    dtype_list += (dtype_list.empty() ? "" : ", ") + d;
  for (const CheckpointTensor &t : tensors_)
    for (StateArray w : which) {
      const std::string name = state_tensor_name(t.name, w);
      used.insert(name);
      const TensorInfo *info = find(name).second;
      if (!info)
        problems.push_back("missing tensor '" + name + "' " + shape_string(t.shape));
      else if (info->shape != t.shape)
        problems.push_back("tensor '" + name + "' has shape " + shape_string(info->shape) +
                           ", the program needs " + shape_string(t.shape));
      else if (!dtypes.count(info->dtype))
        problems.push_back("tensor '" + name + "' has dtype " + info->dtype + "; only " +
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
      find(name).first->read_f32(name, t.shape, full.data());
      // Training from a NaN or inf would skip every step (or spread it): refuse it here, before
      // anything runs, with the place to look.
      const auto bad = std::find_if(full.begin(), full.end(), [](float v) { return !std::isfinite(v); });
      if (bad != full.end())
        throw Error(path + ": tensor '" + name + "' holds " + (std::isnan(*bad) ? "NaN" : "an infinity") +
                    " at element " + std::to_string(bad - full.begin()) + " of " +
                    std::to_string(full.size()) + "; the checkpoint is damaged (load an earlier one)");
      for (int64_t b : t.blocks) {
        block.assign(static_cast<size_t>(numel_[b]), 0.0f); // vocabulary padding stays 0
        copy_block_from_full(descs_[b], full.data(), block.data());
        const DeviceBuffer &target = array(b, w);
        device_->copy_from_host(target.data(), block.data(), target.bytes());
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

std::vector<std::vector<float>> ParamStore::gather_tensors(Communicator &tp, StateArray which) const {
  if (tp.size() != tp_size_ || tp.rank() != tp_rank_)
    throw Error("gathering the tensors: the tp communicator is rank " + std::to_string(tp.rank()) +
                " of " + std::to_string(tp.size()) + ", but the store holds tp rank " +
                std::to_string(tp_rank_) + " of " + std::to_string(tp_size_));
  const bool writer = tp_rank_ == 0;
  // The writer holds all full tensors at once (write_safetensors takes them together): one
  // extra copy of the model in memory, only while saving. The others hold one gather at a time.
  std::vector<std::vector<float>> data;
  std::vector<float> gathered;
  for (const CheckpointTensor &t : tensors_) {
    std::vector<float> full(writer ? static_cast<size_t>(full_numel(descs_[t.blocks[0]])) : 0);
    for (int64_t b : t.blocks) {
      if (!tp_split(b)) { // the same on every tp rank: tp rank 0's copy is the tensor's
        if (writer)
          copy_block_to_full(descs_[b], host_array(b, which).data(), full.data());
        continue;
      }
      // Every tp rank's block has this rank's shape, so one all-gather collects them in rank
      // order, and tp_block says where each goes.
      const int64_t n = numel(b);
      gathered.resize(static_cast<size_t>(n * tp_size_));
      tp.all_gather(gathered.data(), host_array(b, which).data(), n);
      if (writer)
        for (int64_t r = 0; r < tp_size_; ++r)
          copy_block_to_full(tp_block(program_descs_[b], r), gathered.data() + r * n,
                             full.data());
    }
    if (writer)
      data.push_back(std::move(full));
  }
  return data;
}

} // namespace megart
