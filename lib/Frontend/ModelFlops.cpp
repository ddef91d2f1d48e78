#include "megac/Frontend/ModelFlops.h"

namespace megac {

double modelFlopsPerSample(const ModelSpec &spec) {
  const double s = static_cast<double>(spec.seqLength), h = static_cast<double>(spec.hiddenSize),
               l = static_cast<double>(spec.numLayers), V = static_cast<double>(spec.vocabSize),
               F = static_cast<double>(spec.ffnHiddenSize);
  const double q = static_cast<double>(spec.numAttentionHeads * spec.headDim());
  const double kv = static_cast<double>(spec.numQueryGroups * spec.headDim());
  const double mlpGemms = spec.activation == "swiglu" ? 3 : 2; // swiglu: gate, up and down
  // Per token of one layer, 2 FLOPs per multiply-add.
  const double projections = 2 * h * (q + 2 * kv) + 2 * q * h;
  // A mixture of experts: the router's GEMM, each token through its top k experts (SwiGLU) and
  // a shared expert; its dense layers (moe_layer_freq) a dense MLP.
  const double moe = 2 * h * static_cast<double>(spec.numExperts) +
                     static_cast<double>(spec.moeRouterTopk) * 3 * 2 * h *
                         static_cast<double>(spec.expertFfnHiddenSize()) +
                     3 * 2 * h * static_cast<double>(spec.moeSharedExpertIntermediateSize) +
                     (spec.moeSharedExpertGate ? 2 * h : 0.0);
  const double moeLayers = static_cast<double>(spec.numMoeLayers());
  const double mlp = moeLayers * moe + (l - moeLayers) * mlpGemms * 2 * h * F; // over the layers
  const double attention = 2 * 2 * s * q; // Q K^T and the weighted sum of V
  const double forward = s * (l * (projections + attention) + mlp + 2 * h * V);
  return 3 * forward; // backward: the gradients of the inputs and of the weights
}

} // namespace megac
