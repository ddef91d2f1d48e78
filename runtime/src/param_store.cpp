#include "megart/param_store.h"

#include "megart/error.h"
#include "megart/param_init.h"
#include "megart/safetensors.h"

#include <algorithm>
#include <cstring>
#include <set>

namespace megart {

ParamStore::ParamStore(const ParamDesc *params, int64_t num_params) {
  validate_param_layout(params, num_params);
  descs_.assign(params, params + num_params);
  tensors_ = group_by_tensor(params, num_params);
  for (const ParamDesc &d : descs_) {
    const auto n = static_cast<size_t>(block_numel(d));
    params_.emplace_back(n);
    grads_.emplace_back(n);
    exp_avg_.emplace_back(n);
    exp_avg_sq_.emplace_back(n);
    param_ptrs_.push_back(params_.back().data());
    grad_ptrs_.push_back(grads_.back().data());
  }
}

int64_t ParamStore::num_tensor_elements() const {
  int64_t n = 0;
  for (const CheckpointTensor &t : tensors_)
    n += full_numel(descs_[t.blocks[0]]);
  return n;
}

void ParamStore::zero_grads() {
  for (auto &g : grads_)
    std::memset(g.data(), 0, g.size() * sizeof(float));
}

void ParamStore::reset_optimizer_state() {
  for (size_t i = 0; i < descs_.size(); ++i) {
    std::memset(exp_avg_[i].data(), 0, exp_avg_[i].size() * sizeof(float));
    std::memset(exp_avg_sq_[i].data(), 0, exp_avg_sq_[i].size() * sizeof(float));
  }
}

void ParamStore::init(uint64_t seed) {
  for (size_t i = 0; i < descs_.size(); ++i)
    init_param_block(descs_[i], seed, params_[i].data());
  reset_optimizer_state();
}

void ParamStore::load(const std::string &path) {
  const SafetensorsFile file = SafetensorsFile::open(path);
  // Check the whole file against the program first: a wrong-model checkpoint must fail with
  // every mismatch named, and before any parameter changes.
  std::vector<std::string> problems;
  std::set<std::string> used;
  for (const CheckpointTensor &t : tensors_) {
    used.insert(t.name);
    const TensorInfo *info = file.find(t.name);
    if (!info)
      problems.push_back("missing tensor '" + t.name + "' " + shape_string(t.shape));
    else if (info->shape != t.shape)
      problems.push_back("tensor '" + t.name + "' has shape " + shape_string(info->shape) +
                         ", the program needs " + shape_string(t.shape));
    else if (info->dtype != "F32" && info->dtype != "BF16" && info->dtype != "F16")
      problems.push_back("tensor '" + t.name + "' has dtype " + info->dtype +
                         "; only F32, BF16 and F16 can be loaded");
  }
  std::vector<std::string> extra;
  for (const std::string &name : file.names())
    if (!used.count(name))
      extra.push_back(name);
  if (!extra.empty()) {
    std::string list;
    for (size_t i = 0; i < extra.size(); ++i)
      list += (i ? ", '" : "'") + extra[i] + "'";
    problems.push_back(std::to_string(extra.size()) + " tensor" + (extra.size() > 1 ? "s" : "") +
                       " not used by the program: " + list);
  }
  if (!problems.empty()) {
    std::string message = path + ": checkpoint does not match the compiled program:";
    for (const std::string &p : problems)
      message += "\n  " + p;
    throw Error(message + "\n  (was it saved from a different model spec?)");
  }
  std::vector<float> full;
  for (const CheckpointTensor &t : tensors_) {
    full.resize(static_cast<size_t>(full_numel(descs_[t.blocks[0]])));
    file.read_f32(t.name, t.shape, full.data());
    for (int64_t b : t.blocks)
      copy_block_from_full(descs_[b], full.data(), params_[b].data());
  }
  reset_optimizer_state();
}

std::vector<float> ParamStore::assemble(const CheckpointTensor &t) const {
  std::vector<float> full(static_cast<size_t>(full_numel(descs_[t.blocks[0]])));
  for (int64_t b : t.blocks)
    copy_block_to_full(descs_[b], params_[b].data(), full.data());
  return full;
}

void ParamStore::save(const std::string &path) const {
  // All full tensors live at once: write_safetensors takes them together. That is one extra
  // copy of the model in memory, only while saving.
  std::vector<std::vector<float>> data;
  std::vector<NamedTensor> named;
  data.reserve(tensors_.size());
  for (const CheckpointTensor &t : tensors_) {
    data.push_back(assemble(t));
    named.push_back({t.name, t.shape, data.back().data()});
  }
  write_safetensors(path, named, {{"format", "pt"}});
}

} // namespace megart
