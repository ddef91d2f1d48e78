// Parameters stacked over experts. megac keeps a mixture of experts' weights as one tensor
// [experts, ...] (its grouped GEMM reads them so); Hugging Face's Mixtral and Qwen2-MoE files hold
// one tensor per expert. The stacked tensor's name holds `*`, which each expert's tensor name
// replaces by the expert's index: "model.layers.0.block_sparse_moe.experts.*.w1.weight" is
// experts.0.w1.weight, experts.1.w1.weight, ... Files never hold a name with `*`.
#pragma once

#include "megart/safetensors.h"

#include <cstdint>
#include <string>
#include <vector>

namespace megart {

bool is_stacked(const std::string &name);

// The name of member `index` of stacked tensor `name`.
std::string member_name(const std::string &name, int64_t index);

// Whether `name` is a member of stacked tensor `stacked` (its `*` replaced by an index).
bool is_member(const std::string &name, const std::string &stacked);

// The tensors as a file holds them: each stacked one [n, ...] as its n members [...], views into
// its data; the others as they are.
std::vector<NamedTensor> unstacked(const std::vector<NamedTensor> &tensors);

} // namespace megart
