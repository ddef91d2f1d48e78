// The training state of a compiled program: for every ParamDesc a parameter buffer, its
// gradient and AdamW's two moments (float32, 64-byte aligned), plus initialisation and
// safetensors load/save of the full checkpoint tensors the blocks belong to.
#pragma once

#include "megart/aligned_buffer.h"
#include "megart/param_layout.h"
#include "megart/program.h"

#include <cstdint>
#include <string>
#include <vector>

namespace megart {

class ParamStore {
public:
  // Validates the layout (validate_param_layout) and allocates zeroed buffers.
  ParamStore(const ParamDesc *params, int64_t num_params);

  int64_t size() const { return static_cast<int64_t>(descs_.size()); }
  const ParamDesc &desc(int64_t i) const { return descs_[i]; }
  int64_t numel(int64_t i) const { return static_cast<int64_t>(params_[i].size()); }
  float *param(int64_t i) { return params_[i].data(); }
  const float *param(int64_t i) const { return params_[i].data(); }
  float *grad(int64_t i) { return grads_[i].data(); }
  float *exp_avg(int64_t i) { return exp_avg_[i].data(); }
  float *exp_avg_sq(int64_t i) { return exp_avg_sq_[i].data(); }
  // Pointer tables in ParamDesc order, as StepFn takes them.
  float *const *param_table() const { return param_ptrs_.data(); }
  float *const *grad_table() const { return grad_ptrs_.data(); }
  const std::vector<CheckpointTensor> &tensors() const { return tensors_; }
  // Elements of the checkpoint tensors (what a model's "number of parameters" is).
  int64_t num_tensor_elements() const;

  void zero_grads();
  // Deterministic init from the seed (see param_init.h); resets the optimizer state.
  void init(uint64_t seed);
  // Reads every tensor from a safetensors file (F32, or BF16/F16 converted) and resets the
  // optimizer state. Before anything is copied, throws one megart::Error listing every tensor
  // that is missing, has the wrong shape, or is in the file but not in the program.
  void load(const std::string &path);
  // Assembles the full tensors and writes them atomically, metadata {"format": "pt"}.
  void save(const std::string &path) const;
  // Full tensor `t` of tensors(), assembled from its blocks.
  std::vector<float> assemble(const CheckpointTensor &t) const;

private:
  void reset_optimizer_state();

  std::vector<ParamDesc> descs_;
  std::vector<CheckpointTensor> tensors_;
  std::vector<AlignedBuffer<float>> params_, grads_, exp_avg_, exp_avg_sq_;
  std::vector<float *> param_ptrs_, grad_ptrs_;
};

} // namespace megart
