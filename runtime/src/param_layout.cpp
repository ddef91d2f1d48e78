#include "megart/param_layout.h"

#include "megart/error.h"
#include "megart/safetensors.h"

#include <algorithm>
#include <cstring>
#include <map>

namespace megart {

std::vector<int64_t> block_shape(const ParamDesc &desc) {
  return std::vector<int64_t>(desc.shape, desc.shape + desc.rank);
}

std::vector<int64_t> full_shape(const ParamDesc &desc) {
  return std::vector<int64_t>(desc.full_shape, desc.full_shape + desc.rank);
}

int64_t block_numel(const ParamDesc &desc) {
  int64_t n = 1;
  for (int d = 0; d < desc.rank; ++d)
    n *= desc.shape[d];
  return n;
}

int64_t full_numel(const ParamDesc &desc) {
  int64_t n = 1;
  for (int d = 0; d < desc.rank; ++d)
    n *= desc.full_shape[d];
  return n;
}

int64_t block_real_numel(const ParamDesc &desc) {
  int64_t n = 1;
  for (int d = 0; d < desc.rank; ++d)
    n *= std::clamp<int64_t>(desc.full_shape[d] - desc.offsets[d], 0, desc.shape[d]);
  return n;
}

std::vector<CheckpointTensor> group_by_tensor(const ParamDesc *params, int64_t num_params) {
  std::vector<CheckpointTensor> tensors;
  std::map<std::string, size_t> index;
  for (int64_t i = 0; i < num_params; ++i) {
    const std::string name = params[i].name ? params[i].name : "";
    auto [it, inserted] = index.emplace(name, tensors.size());
    if (inserted)
      tensors.push_back({name, full_shape(params[i]), {}});
    tensors[it->second].blocks.push_back(i);
  }
  return tensors;
}

int64_t tensor_elements(const ParamDesc *params, const std::vector<CheckpointTensor> &tensors) {
  int64_t n = 0;
  for (const CheckpointTensor &t : tensors)
    n += full_numel(params[t.blocks[0]]);
  return n;
}

ParamDesc tp_block(const ParamDesc &desc, int64_t tp_rank) {
  ParamDesc block = desc;
  if (desc.tp_split_dim >= 0)
    block.offsets[desc.tp_split_dim] += tp_rank * desc.shape[desc.tp_split_dim];
  return block;
}

ParamDesc ep_block(const ParamDesc &desc, int64_t ep_rank) {
  ParamDesc block = desc;
  if (desc.ep_split_dim >= 0)
    block.offsets[desc.ep_split_dim] += ep_rank * desc.shape[desc.ep_split_dim];
  return block;
}

namespace {

// One block of the layout over all tp and ep ranks: a table entry, or one rank's part of it.
struct Block {
  ParamDesc desc;
  int64_t index;   // into the program's table
  int64_t tp_rank; // -1: the same block on every tp rank
  int64_t ep_rank = -1; // -1: the same block on every ep rank
};

std::string where(const ParamDesc &desc, int64_t i) {
  return "parameter " + std::to_string(i) + " ('" + (desc.name ? desc.name : "") + "')";
}

std::string where(const Block &b) {
  return where(b.desc, b.index) + (b.tp_rank >= 0 ? " on tp rank " + std::to_string(b.tp_rank) : std::string()) +
         (b.ep_rank >= 0 ? " on ep rank " + std::to_string(b.ep_rank) : std::string());
}

std::string offsets_string(const ParamDesc &desc) {
  return shape_string(std::vector<int64_t>(desc.offsets, desc.offsets + desc.rank));
}

void validate_one(const ParamDesc &desc, int64_t i) {
  if (!desc.name || !*desc.name)
    throw Error("parameter " + std::to_string(i) + " has no checkpoint name");
  if (desc.rank < 1 || desc.rank > kMaxRank)
    throw Error(where(desc, i) + " has rank " + std::to_string(desc.rank) + "; it must be 1.." +
                std::to_string(kMaxRank));
  for (int d = 0; d < desc.rank; ++d)
    if (desc.shape[d] <= 0 || desc.full_shape[d] <= 0)
      throw Error(where(desc, i) + " has shape " + shape_string(block_shape(desc)) +
                  " in tensor shape " + shape_string(full_shape(desc)) +
                  "; every size must be positive");
  if (desc.init != ParamInit::Normal && desc.init != ParamInit::Zeros &&
      desc.init != ParamInit::Ones && desc.init != ParamInit::KaimingUniform)
    throw Error(where(desc, i) + " has unknown init " + std::to_string(static_cast<int>(desc.init)));
  if (desc.nf4_block < 0 || desc.nf4_block % 2 != 0 || (desc.nf4_block > 0 && desc.rank != 2))
    throw Error(where(desc, i) + " has nf4_block " + std::to_string(desc.nf4_block) +
                "; it must be 0 (fp32) or an even block size of a matrix");
  if (desc.tp_split_dim < -1 || desc.tp_split_dim >= desc.rank)
    throw Error(where(desc, i) + " has tp_split_dim " + std::to_string(desc.tp_split_dim) +
                "; it must be -1 (not split) or a dimension 0.." + std::to_string(desc.rank - 1));
  if (desc.ep_split_dim < -1 || desc.ep_split_dim >= desc.rank || (desc.ep_split_dim >= 0 && desc.ep_split_dim == desc.tp_split_dim))
    throw Error(where(desc, i) + " has ep_split_dim " + std::to_string(desc.ep_split_dim) + " (tp_split_dim " +
                std::to_string(desc.tp_split_dim) + "); it must be -1 (not split) or a dimension 0.." +
                std::to_string(desc.rank - 1) + " other than the one tp splits");
}

// A padded block may reach past the tensor (even lie wholly in the padding); coverage is
// checked per tensor.
void validate_fit(const Block &b) {
  const ParamDesc &desc = b.desc;
  for (int d = 0; d < desc.rank; ++d)
    if (desc.offsets[d] < 0 ||
        (!desc.padded && desc.offsets[d] + desc.shape[d] > desc.full_shape[d]))
      throw Error(where(b) + ": " + (desc.padded ? "padded " : "") + "block " +
                  shape_string(block_shape(desc)) + " at offsets " + offsets_string(desc) +
                  " does not fit in tensor shape " + shape_string(full_shape(desc)));
}

bool overlap(const ParamDesc &a, const ParamDesc &b) {
  for (int d = 0; d < a.rank; ++d)
    if (a.offsets[d] + a.shape[d] <= b.offsets[d] || b.offsets[d] + b.shape[d] <= a.offsets[d])
      return false;
  return true;
}

} // namespace

void validate_param_layout(const ParamDesc *params, int64_t num_params, int64_t tp_size, int64_t ep_size) {
  if (num_params < 0 || (num_params > 0 && !params))
    throw Error("the program's parameter table is missing (num_params " +
                std::to_string(num_params) + ")");
  if (tp_size < 1 || ep_size < 1)
    throw Error("tensor parallel size is " + std::to_string(tp_size) + " and expert parallel size " +
                std::to_string(ep_size) + "; both must be >= 1");
  // Every rank's offsets follow from tp rank 0's, so the whole layout is checked locally.
  std::vector<Block> blocks;
  // A block per (tp rank, ep rank) that holds a different one: an expert weight under expert
  // tensor parallelism is split over both (on different dimensions).
  for (int64_t i = 0; i < num_params; ++i) {
    validate_one(params[i], i);
    const bool over_tp = params[i].tp_split_dim >= 0 && tp_size > 1;
    const bool over_ep = params[i].ep_split_dim >= 0 && ep_size > 1;
    for (int64_t t = 0; t < (over_tp ? tp_size : 1); ++t)
      for (int64_t e = 0; e < (over_ep ? ep_size : 1); ++e) {
        const ParamDesc tp_part = over_tp ? tp_block(params[i], t) : params[i];
        blocks.push_back({over_ep ? ep_block(tp_part, e) : tp_part, i, over_tp ? t : -1, over_ep ? e : -1});
      }
  }
  for (const Block &b : blocks)
    validate_fit(b);
  std::vector<ParamDesc> descs;
  for (const Block &b : blocks)
    descs.push_back(b.desc);
  for (const CheckpointTensor &t : group_by_tensor(descs.data(), static_cast<int64_t>(descs.size()))) {
    const Block &first = blocks[t.blocks[0]];
    int64_t covered = 0;
    for (size_t a = 0; a < t.blocks.size(); ++a) {
      const Block &ba = blocks[t.blocks[a]];
      if (full_shape(ba.desc) != t.shape)
        throw Error(where(ba) + " says tensor shape " + shape_string(full_shape(ba.desc)) +
                    " but " + where(first) + " says " + shape_string(t.shape));
      for (size_t b = 0; b < a; ++b) {
        const Block &bb = blocks[t.blocks[b]];
        if (overlap(ba.desc, bb.desc))
          throw Error(where(ba) + " (offsets " + offsets_string(ba.desc) + ") overlaps " +
                      where(bb) + " (offsets " + offsets_string(bb.desc) + ")");
      }
      covered += block_real_numel(ba.desc);
    }
    // Disjoint blocks cover the tensor exactly when their parts inside it add up to its size.
    if (covered != full_numel(first.desc))
      throw Error("tensor '" + t.name + "' " + shape_string(t.shape) + " has " +
                  std::to_string(full_numel(first.desc)) + " elements but its blocks hold " +
                  std::to_string(covered) +
                  (ep_size > 1   ? " over the " + std::to_string(tp_size) + " tp and " + std::to_string(ep_size) +
                                         " ep ranks; the ranks together must hold whole tensors"
                   : tp_size > 1 ? " over the " + std::to_string(tp_size) +
                                       " tp ranks; the tp ranks together must hold whole tensors"
                                 : "; a program must hold whole tensors"));
  }
}

void copy_block_from_full(const ParamDesc &desc, const float *full, float *block) {
  if (desc.padded)
    std::fill(block, block + block_numel(desc), 0.0f);
  for_each_block_row(desc, [&](int64_t f, int64_t b, int64_t n) {
    std::memcpy(block + b, full + f, static_cast<size_t>(n) * sizeof(float));
  });
}

void copy_block_to_full(const ParamDesc &desc, const float *block, float *full) {
  for_each_block_row(desc, [&](int64_t f, int64_t b, int64_t n) {
    std::memcpy(full + f, block + b, static_cast<size_t>(n) * sizeof(float));
  });
}

} // namespace megart
