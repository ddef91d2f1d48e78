// Where each parameter buffer of a compiled program sits in its checkpoint tensor. A ParamDesc
// is a rectangular block (shape at offsets) of a full tensor (full_shape); several descs may
// name the same tensor (GPT-2's c_attn split into q/k/v). These helpers check that layout and
// move data between blocks and full row-major tensors. A padded block (ParamDesc::padded,
// vocabulary padding) may reach past full_shape: only its elements inside the tensor are ever
// read from or written to full tensors; the rest is padding, kept at zero.
#pragma once

#include "megart/program.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace megart {

std::vector<int64_t> block_shape(const ParamDesc &desc);
std::vector<int64_t> full_shape(const ParamDesc &desc);
int64_t block_numel(const ParamDesc &desc);
int64_t full_numel(const ParamDesc &desc);
// Elements of the block inside the full tensor: block_numel(desc) unless the block is padded.
int64_t block_real_numel(const ParamDesc &desc);

// One checkpoint tensor and the indices (into the ParamDesc table) of its blocks.
struct CheckpointTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<int64_t> blocks;
};

// Tensors in order of first appearance in the table.
std::vector<CheckpointTensor> group_by_tensor(const ParamDesc *params, int64_t num_params);

// The sum of the full sizes of `tensors`, grouped (group_by_tensor) from `params`.
int64_t tensor_elements(const ParamDesc *params, const std::vector<CheckpointTensor> &tensors);

// The block that tensor-parallel rank `tp_rank` holds: desc itself when tp_split_dim is -1,
// otherwise desc (tp rank 0's block) moved tp_rank * shape[dim] along the split dimension.
ParamDesc tp_block(const ParamDesc &desc, int64_t tp_rank);
// The block that expert-parallel rank `ep_rank` holds: desc when ep_split_dim is -1, otherwise
// desc (ep rank 0's block) moved ep_rank * shape[dim] along the split dimension.
ParamDesc ep_block(const ParamDesc &desc, int64_t ep_rank);

// Throws megart::Error naming the parameter unless: rank is 1..kMaxRank, sizes are positive,
// tp_split_dim is -1 or a dimension, every tp rank's block lies inside its tensor (a padded one
// starts at offsets >= 0 and may reach past it), all blocks of a name agree on full_shape, and
// the blocks of each tensor, taken over all `tp_size` tensor-parallel ranks and `ep_size`
// expert-parallel ranks, are disjoint (padding included) and cover it exactly (the ranks together
// hold whole tensors).
void validate_param_layout(const ParamDesc *params, int64_t num_params, int64_t tp_size = 1, int64_t ep_size = 1);

// Calls fn(full_index, block_index, count) for each contiguous run (a last-dimension row) of
// the block's elements inside the full tensor; full_index is the flat row-major index into the
// full tensor. Padding (the parts of a padded block past full_shape) is skipped.
template <typename Fn> void for_each_block_row(const ParamDesc &desc, Fn &&fn) {
  const int r = desc.rank;
  const int64_t row = desc.shape[r - 1];
  const int64_t count = std::min(row, desc.full_shape[r - 1] - desc.offsets[r - 1]);
  if (count <= 0)
    return;
  int64_t stride[kMaxRank];
  stride[r - 1] = 1;
  for (int d = r - 2; d >= 0; --d)
    stride[d] = stride[d + 1] * desc.full_shape[d + 1];
  int64_t idx[kMaxRank] = {0, 0, 0, 0}; // position in the block's leading dimensions
  const int64_t rows = block_numel(desc) / row;
  for (int64_t i = 0; i < rows; ++i) {
    int64_t full = desc.offsets[r - 1];
    bool inside = true;
    for (int d = 0; d < r - 1; ++d) {
      inside = inside && desc.offsets[d] + idx[d] < desc.full_shape[d];
      full += (desc.offsets[d] + idx[d]) * stride[d];
    }
    if (inside)
      fn(full, i * row, count);
    for (int d = r - 2; d >= 0; --d) { // odometer over the leading dimensions
      if (++idx[d] < desc.shape[d])
        break;
      idx[d] = 0;
    }
  }
}

// The block's elements inside the tensor, from or to the full tensor; copy_block_from_full sets
// a padded block's padding to 0.
void copy_block_from_full(const ParamDesc &desc, const float *full, float *block);
void copy_block_to_full(const ParamDesc &desc, const float *block, float *full);

} // namespace megart
