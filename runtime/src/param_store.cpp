#include "megart/param_store.h"

#include "megart/error.h"
#include "megart/param_init.h"
#include "megart/safetensors.h"

#include <algorithm>
#include <cstring>
#include <set>

namespace megart {

ParamStore::ParamStore(const ParamDesc *params, int64_t num_params, int64_t tp_rank,
                       int64_t tp_size)
    : tp_rank_(tp_rank), tp_size_(tp_size) {
  validate_param_layout(params, num_params, tp_size);
  if (tp_rank < 0 || tp_rank >= tp_size)
    throw Error("tensor parallel rank " + std::to_string(tp_rank) + " is outside 0.." +
                std::to_string(tp_size - 1));
  program_descs_.assign(params, params + num_params);
  for (const ParamDesc &d : program_descs_)
    descs_.push_back(tp_block(d, tp_rank));
  tensors_ = group_by_tensor(descs_.data(), size());
  // One gradient allocation; each gradient starts on a 64-byte boundary as a separate
  // AlignedBuffer would, so generated code sees the same alignment either way.
  constexpr int64_t kAlignFloats = static_cast<int64_t>(kBufferAlignment / sizeof(float));
  std::vector<int64_t> grad_offsets;
  int64_t total = 0;
  for (const ParamDesc &d : descs_) {
    grad_offsets.push_back(total);
    total += (block_numel(d) + kAlignFloats - 1) / kAlignFloats * kAlignFloats;
  }
  flat_grads_ = AlignedBuffer<float>(static_cast<size_t>(total));
  for (size_t i = 0; i < descs_.size(); ++i) {
    const auto n = static_cast<size_t>(block_numel(descs_[i]));
    params_.emplace_back(n);
    exp_avg_.emplace_back(n);
    exp_avg_sq_.emplace_back(n);
    param_ptrs_.push_back(params_.back().data());
    grad_ptrs_.push_back(flat_grads_.data() + grad_offsets[i]);
  }
}

int64_t ParamStore::num_tensor_elements() const {
  return tensor_elements(descs_.data(), tensors_);
}

void ParamStore::zero_grads() {
  std::memset(flat_grads_.data(), 0, flat_grads_.size() * sizeof(float));
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

void ParamStore::load(const std::string &path, const std::set<std::string> &elsewhere) {
  const SafetensorsFile file = SafetensorsFile::open(path);
  // Check the whole file against the program first: a wrong-model checkpoint must fail with
  // every mismatch named, and before any parameter changes.
  std::vector<std::string> problems;
  std::set<std::string> used = elsewhere;
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

std::vector<std::vector<float>> ParamStore::gather_tensors(Communicator &tp) const {
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
          copy_block_to_full(descs_[b], params_[b].data(), full.data());
        continue;
      }
      // Every tp rank's block has this rank's shape, so one all-gather collects them in rank
      // order, and tp_block says where each goes.
      const int64_t n = numel(b);
      gathered.resize(static_cast<size_t>(n * tp_size_));
      tp.all_gather(gathered.data(), params_[b].data(), n);
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
