#include "MegatronPlacement.h"

#include "llvm/ADT/ArrayRef.h"

using namespace llvm;

namespace {

struct Placement {
  StringRef suffix;
  int64_t dim;
};

// GPT-2 stores linear weights [in, out] (Conv1D), Llama [out, in]: column-parallel splits the
// output features, row-parallel the input features, so the dimension differs by family.
constexpr Placement kPlacements[] = {
    // vocabulary-parallel embedding and LM head, [vocab, hidden] in both families
    {"wte.weight", 0}, {"embed_tokens.weight", 0}, {"lm_head.weight", 0},
    // GPT-2: column-parallel c_attn (q, k, v blocks) and c_fc; row-parallel c_proj
    {"attn.c_attn.weight", 1}, {"attn.c_attn.bias", 0}, {"mlp.c_fc.weight", 1}, {"mlp.c_fc.bias", 0},
    {"attn.c_proj.weight", 0}, {"mlp.c_proj.weight", 0},
    // Llama: column-parallel q/k/v, gate, up; row-parallel o_proj, down_proj
    {"q_proj.weight", 0}, {"k_proj.weight", 0}, {"v_proj.weight", 0},
    {"q_proj.bias", 0}, {"k_proj.bias", 0}, {"v_proj.bias", 0},
    {"gate_proj.weight", 0}, {"up_proj.weight", 0}, {"gate_proj.bias", 0}, {"up_proj.bias", 0},
    {"o_proj.weight", 1}, {"down_proj.weight", 1},
};

} // namespace

std::optional<int64_t> megac::megatronSplitDim(StringRef name) {
  for (const Placement &p : kPlacements)
    if (name.ends_with(p.suffix))
      return p.dim;
  return std::nullopt;
}
