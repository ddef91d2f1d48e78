// The training state of one rank of a compiled program: for every ParamDesc a parameter
// buffer, its gradient and AdamW's two moments (float32, 64-byte aligned, in the memory of the
// store's Device: host memory on the CPU, GPU memory with CUDA), plus initialisation and
// safetensors load/save of the full checkpoint tensors the blocks belong to (through host
// copies). With tensor
// parallelism the store holds this tp rank's blocks (tp_block); all gradients live in one
// allocation so data parallelism can all-reduce them in a few large buckets.
//
// With the distributed optimizer (a program's FlatLayoutDesc) the parameters live in one flat
// buffer and the gradients in another, both laid out by the compiler (padding included, and
// zero), and AdamW's moments only for this rank's shard of each bucket: sharded() holds them.
#pragma once

#include "megart/comm.h"
#include "megart/device.h"
#include "megart/distributed_optimizer.h"
#include "megart/nf4.h"
#include "megart/param_layout.h"
#include "megart/program.h"

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace megart {

// The per-parameter arrays a store holds besides the gradients: the weights and AdamW's moments.
enum class StateArray { Param, ExpAvg, ExpAvgSq };

// How a checkpoint names array `which` of tensor `name`: the name itself for weights (in
// model.safetensors), "NAME.exp_avg" / "NAME.exp_avg_sq" for the moments (optimizer.safetensors).
std::string state_tensor_name(const std::string &name, StateArray which);

class ParamStore {
public:
  // Validates the layout over tp_size ranks (validate_param_layout) and allocates zeroed
  // buffers for the blocks of tensor-parallel rank tp_rank on `device`. With `flat_layout` (the
  // program's, for these parameters) the parameters and gradients are its two flat buffers
  // (flat_layout->numel floats each) and the moments are sharded over `shard_group` (whose size
  // must be flat_layout->shard_degree): throws megart::Error naming what does not fit.
  // With expert parallelism (ep_size > 1) the blocks of ep-split parameters are ep rank ep_rank's;
  // a flat layout's expert buckets shard over `expert_shard_group` (the dp ranks holding the same
  // experts; its size must be flat_layout->expert_shard_degree).
  ParamStore(const ParamDesc *params, int64_t num_params, int64_t tp_rank = 0,
             int64_t tp_size = 1, Device &device = cpu_device(),
             const FlatLayoutDesc *flat_layout = nullptr, Communicator *shard_group = nullptr,
             int64_t ep_rank = 0, int64_t ep_size = 1, Communicator *expert_shard_group = nullptr);

  // The store of a program's frozen parameters (PipelineStageDesc::frozen_params, LoRA's base model):
  // the weights alone, allocated as MemoryCategory::FrozenParameters, with no gradients and no
  // optimizer state (grad(i) is null; the moments' functions throw). init, load, assemble and
  // gather_tensors work as for trainable parameters.
  static std::unique_ptr<ParamStore> frozen(const ParamDesc *params, int64_t num_params, int64_t tp_rank,
                                            int64_t tp_size, Device &device);
  bool is_frozen() const { return frozen_; }
  // The frozen store's NF4 weights (ParamDesc::nf4_block > 0: QLoRA's base), in ParamDesc order,
  // null for the fp32 ones (whose param() is set; an NF4 one's param() is null).
  const Nf4Weight *const *nf4_table() const { return nf4_ptrs_.data(); }

  Device &device() const { return *device_; }

  int64_t size() const { return static_cast<int64_t>(descs_.size()); }
  // This rank's block (offsets moved to tp_rank's for split parameters).
  const ParamDesc &desc(int64_t i) const { return descs_[i]; }
  // Split over the tp ranks (each holds a different block), or the same on every tp rank.
  bool tp_split(int64_t i) const { return descs_[i].tp_split_dim >= 0 && tp_size_ > 1; }
  // Split over the ep ranks (each holds different experts).
  bool ep_split(int64_t i) const { return descs_[i].ep_split_dim >= 0 && ep_size_ > 1; }
  // Device pointers (host pointers on the CPU device).
  int64_t numel(int64_t i) const { return numel_[i]; }
  float *param(int64_t i) { return param_ptrs_[i]; }
  const float *param(int64_t i) const { return param_ptrs_[i]; }
  float *grad(int64_t i) { return grad_ptrs_[i]; }
  const float *grad(int64_t i) const { return grad_ptrs_[i]; }
  // Every gradient in one buffer: grad(i) points into it, each 64-byte aligned; the padding
  // between them stays zero. Data parallelism all-reduces this buffer in buckets (with a flat
  // layout: reduce-scatters it in the layout's buckets; with ZeRO-2 it holds only this rank's
  // shard of each bucket, and grad(i) is null).
  float *flat_grads() { return flat_grads_.as<float>(); }
  int64_t flat_grads_numel() const { return flat_grads_numel_; }
  // AdamW's moments of parameter i; with a flat layout there are none per parameter (throws).
  float *exp_avg(int64_t i);
  float *exp_avg_sq(int64_t i);
  // The distributed optimizer's state (moments of this rank's shards), or null without a flat
  // layout.
  DistributedOptimizerState *sharded() const { return sharded_.get(); }
  // Pointer tables in ParamDesc order, as StepFn takes them.
  float *const *param_table() const { return param_ptrs_.data(); }
  float *const *grad_table() const { return grad_ptrs_.data(); }
  const std::vector<CheckpointTensor> &tensors() const { return tensors_; }
  // Elements of the checkpoint tensors (what a model's "number of parameters" is; vocabulary
  // padding is not counted).
  int64_t num_tensor_elements() const;

  void zero_grads();
  // Deterministic init from the seed (see param_init.h); resets the optimizer state.
  void init(uint64_t seed);
  // Reads every tensor from a safetensors file (F32, or BF16/F16 converted) and resets the
  // optimizer state; vocabulary padding is set to 0. Before anything is copied, throws one
  // megart::Error listing every tensor that is missing, has the wrong shape (not the
  // checkpoint tensor's), or is in the file but not in the program. `elsewhere` names tensors
  // the program holds in other pipeline stages: the file may have them, and they are skipped.
  void load(const std::string &path, const std::set<std::string> &elsewhere = {}) {
    load(std::vector<std::string>{path}, elsewhere);
  }
  // The same over the files of a sharded checkpoint: each tensor from the file that holds it.
  void load(const std::vector<std::string> &files, const std::set<std::string> &elsewhere = {});
  // Reads AdamW's moments (F32 "NAME.exp_avg" and "NAME.exp_avg_sq" for every tensor) from
  // optimizer.safetensors, checked like load(); the weights stay as they are. With a flat layout
  // each whole moment is read and this rank's shard pieces of it kept.
  void load_optimizer_state(const std::string &path, const std::set<std::string> &elsewhere = {});
  // Assembles the full tensors (no padding) and writes them atomically, metadata
  // {"format": "pt"}. Needs tp_size == 1; with tensor parallelism use the overload below.
  void save(const std::string &path) const;
  // Collective over `tp` (this store's tp group; every tp rank calls it): the tp-split blocks
  // are gathered to tp rank 0, which assembles the full tensors and writes the file; the other
  // ranks write nothing.
  void save(const std::string &path, Communicator &tp) const;
  // The full tensors (no padding) in tensors() order, assembled over `tp` on tp rank 0; the
  // other ranks get an empty list. Collective over `tp`, as save is.
  // With expert parallelism `ep` (this store's ep group) gathers the experts' blocks too, to ep
  // rank 0 (the writer is tp rank 0 and ep rank 0).
  std::vector<std::vector<float>> gather_tensors(Communicator &tp, StateArray which = StateArray::Param,
                                                 Communicator *ep = nullptr) const;
  // Full tensor `t` of tensors(), assembled from this rank's blocks (complete when
  // tp_size == 1).
  std::vector<float> assemble(const CheckpointTensor &t) const;

  // With a flat layout the moments (and with ZeRO-3 the parameters) are sharded, but a checkpoint
  // holds them whole: collective over the shard group, gathers them into temporary flat buffers
  // (Communication memory, flat_layout->numel floats each) that gather_tensors and save read
  // until release_gathered_state(). Does nothing without a flat layout.
  void gather_sharded_state();
  void release_gathered_state();
  // ZeRO-3: each rank holds only its shard of the parameters (flat_params(), laid out as the
  // gradient shards); param(i) is null.
  bool params_sharded() const;
  float *flat_params() { return flat_params_.as<float>(); }

private:
  struct FrozenTag {};
  ParamStore(FrozenTag, const ParamDesc *params, int64_t num_params, int64_t tp_rank, int64_t tp_size,
             Device &device);
  // What both constructors check and set: this rank's blocks.
  void set_blocks(const ParamDesc *params, int64_t num_params);
  void reset_optimizer_state();
  // Sets array `which` of parameter i from host[numel(i)]: a copy, or for an NF4 weight its
  // quantization into the store's NF4 buffer.
  void store_block(int64_t i, StateArray which, const float *host);
  // Device pointer to array `which` of parameter i (numel(i) floats).
  float *array(int64_t i, StateArray which) const;
  // Array `which` of parameter i copied to host memory.
  std::vector<float> host_array(int64_t i, StateArray which = StateArray::Param) const;
  // Checks a file against the program (see load) and copies each tensor's blocks into `which`,
  // `dtypes` naming the dtypes accepted.
  void read_arrays(const std::vector<std::string> &files, const std::set<std::string> &elsewhere,
                   const std::vector<StateArray> &which, const std::set<std::string> &dtypes);

  int64_t tp_rank_ = 0, tp_size_ = 1, ep_rank_ = 0, ep_size_ = 1;
  bool frozen_ = false;
  std::vector<ParamDesc> program_descs_; // as compiled: tp (and ep) rank 0's blocks
  std::vector<ParamDesc> descs_;         // this rank's blocks
  std::vector<CheckpointTensor> tensors_;
  Device *device_;
  std::vector<int64_t> numel_;
  std::vector<DeviceBuffer> params_, exp_avg_, exp_avg_sq_; // without a flat layout
  DeviceBuffer flat_params_;                                 // with one
  DeviceBuffer flat_grads_;
  int64_t flat_grads_numel_ = 0;
  std::vector<float *> param_ptrs_, grad_ptrs_;
  std::vector<Nf4Weight> nf4_;            // frozen NF4 weights' views (numel 0: fp32)
  std::vector<const Nf4Weight *> nf4_ptrs_;
  std::unique_ptr<DistributedOptimizerState> sharded_;
  DeviceBuffer gathered_exp_avg_, gathered_exp_avg_sq_, gathered_params_; // gather_sharded_state() .. release
  std::vector<int64_t> flat_offsets_;
};

} // namespace megart
