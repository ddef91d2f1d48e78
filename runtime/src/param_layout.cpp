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

namespace {

std::string where(const ParamDesc &desc, int64_t i) {
  return "parameter " + std::to_string(i) + " ('" + (desc.name ? desc.name : "") + "')";
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
  for (int d = 0; d < desc.rank; ++d) {
    if (desc.shape[d] <= 0 || desc.full_shape[d] <= 0)
      throw Error(where(desc, i) + " has shape " + shape_string(block_shape(desc)) +
                  " in tensor shape " + shape_string(full_shape(desc)) +
                  "; every size must be positive");
    if (desc.offsets[d] < 0 || desc.offsets[d] + desc.shape[d] > desc.full_shape[d])
      throw Error(where(desc, i) + ": block " + shape_string(block_shape(desc)) + " at offsets " +
                  offsets_string(desc) + " does not fit in tensor shape " +
                  shape_string(full_shape(desc)));
  }
  if (desc.init != ParamInit::Normal && desc.init != ParamInit::Zeros &&
      desc.init != ParamInit::Ones)
    throw Error(where(desc, i) + " has unknown init " + std::to_string(static_cast<int>(desc.init)));
}

bool overlap(const ParamDesc &a, const ParamDesc &b) {
  for (int d = 0; d < a.rank; ++d)
    if (a.offsets[d] + a.shape[d] <= b.offsets[d] || b.offsets[d] + b.shape[d] <= a.offsets[d])
      return false;
  return true;
}

} // namespace

void validate_param_layout(const ParamDesc *params, int64_t num_params) {
  if (num_params < 0 || (num_params > 0 && !params))
    throw Error("the program's parameter table is missing (num_params " +
                std::to_string(num_params) + ")");
  for (int64_t i = 0; i < num_params; ++i)
    validate_one(params[i], i);
  for (const CheckpointTensor &t : group_by_tensor(params, num_params)) {
    const ParamDesc &first = params[t.blocks[0]];
    int64_t covered = 0;
    for (size_t a = 0; a < t.blocks.size(); ++a) {
      const ParamDesc &pa = params[t.blocks[a]];
      if (full_shape(pa) != t.shape)
        throw Error(where(pa, t.blocks[a]) + " says tensor shape " + shape_string(full_shape(pa)) +
                    " but " + where(first, t.blocks[0]) + " says " + shape_string(t.shape));
      for (size_t b = 0; b < a; ++b)
        if (overlap(pa, params[t.blocks[b]]))
          throw Error(where(pa, t.blocks[a]) + " (offsets " + offsets_string(pa) + ") overlaps " +
                      where(params[t.blocks[b]], t.blocks[b]) + " (offsets " +
                      offsets_string(params[t.blocks[b]]) + ")");
      covered += block_numel(pa);
    }
    // Disjoint blocks inside the tensor cover it exactly when their sizes add up.
    if (covered != full_numel(first))
      throw Error("tensor '" + t.name + "' " + shape_string(t.shape) + " has " +
                  std::to_string(full_numel(first)) + " elements but its blocks hold " +
                  std::to_string(covered) + "; a program must hold whole tensors");
  }
}

void copy_block_from_full(const ParamDesc &desc, const float *full, float *block) {
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
