// A model spec: the YAML file a user writes, keys in Megatron's names.
#pragma once

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <map>
#include <vector>
#include <string>

namespace megac {

struct ModelSpec {
  std::string family;                  // gpt2 | llama | qwen2 (Llama's layout with q, k, v biases) |
                                       // mistral (Llama's layout with a sliding window) | gemma (GeGLU,
                                       // (1 + w) RMSNorm, embeddings scaled by sqrt(hidden)) | bert
                                       // (BertForMaskedLM: a post-LN encoder, masked LM) |
                                       // megatron_bert (MegatronBertForMaskedLM: the same, pre-LN) |
                                       // mixtral (MixtralForCausalLM: Llama's attention, a mixture of
                                       // experts for the MLP) | qwen2_moe (Qwen2MoeForCausalLM: Qwen2's
                                       // attention, experts and a gated shared expert)
  int64_t numLayers = 0;
  int64_t hiddenSize = 0;
  int64_t numAttentionHeads = 0;
  int64_t numQueryGroups = 0;          // = heads unless grouped-query attention
  int64_t kvChannels = 0;              // the head dimension (Megatron's kv_channels); 0: hidden / heads
  int64_t ffnHiddenSize = 0;
  int64_t seqLength = 0;
  int64_t maxPositionEmbeddings = 0;   // learned positions only
  int64_t vocabSize = 0;
  std::string normalization;           // LayerNorm | RMSNorm
  std::string activation;              // gelu | swiglu | geglu (tanh GELU gating, Gemma's)
  std::string positionEmbeddingType;   // learned | rope
  bool tieEmbeddings = false;
  bool addBiasLinear = false;
  bool addQkvBias = false;             // biases on q, k and v only (Qwen2): Megatron's add_qkv_bias
  double normEpsilon = 1e-5;
  double rotaryBase = 10000.0;
  // Rope scaling (Hugging Face's rope_scaling): "linear" divides every position by the factor;
  // "dynamic" NTK scaling raises the base for a sequence longer than max_position_embeddings
  // (transformers' LlamaLinearScalingRotaryEmbedding, LlamaDynamicNTKScalingRotaryEmbedding).
  std::string ropeScalingType = "none";
  double ropeScalingFactor = 1.0;
  // Sliding-window attention (transformers 4.40's sliding_window, Mistral's and Qwen2's) in every
  // layer: a token attends to itself and at most this many positions before it; 0: every earlier
  // position.
  int64_t slidingWindow = 0;
  int64_t numTokentypes = 0;           // BERT's token types (Megatron's num_tokentypes; HF type_vocab_size)
  double hiddenDropout = 0.0;
  double attentionDropout = 0.0;

  // Mixture of experts (Megatron's names); 0 experts: a dense MLP.
  int64_t numExperts = 0;
  // Which layers' MLP is the mixture (Megatron's moe_layer_freq: 1 every Nth layer from the
  // first, or "[1, 0, ...]" one entry per layer); empty: every layer's. The others have a dense
  // MLP ffn_hidden_size wide.
  std::vector<bool> moeLayers;
  int64_t moeRouterTopk = 2;
  int64_t moeFfnHiddenSize = 0;        // each expert's hidden size; 0: ffn_hidden_size
  // Softmax over all experts, the top k's probabilities used as they are (Qwen2-MoE's norm_topk_prob
  // false); otherwise they are renormalised to sum to 1 (Mixtral's: a softmax over the top k).
  bool moeRouterPreSoftmax = false;
  int64_t moeSharedExpertIntermediateSize = 0; // 0: no shared expert
  bool moeSharedExpertGate = false;    // the shared expert's output times sigmoid(x . w) (Qwen2-MoE)
  // aux_loss: Megatron's, each layer's over its own routing; global_aux_loss: transformers'
  // load_balancing_loss_func, all layers' routing together; none.
  std::string moeRouterLoadBalancingType = "aux_loss";
  double moeAuxLossCoeff = 0.0;
  double moeZLossCoeff = 0.0;
  double moeExpertCapacityFactor = 0.0; // 0: dropless
  std::string moeTokenDropPolicy = "probs"; // probs | position (with a capacity factor)

  // Where each key the file gives stands (1-based line): the IR's locations point there.
  std::string path;
  std::map<std::string, unsigned> keyLines;

  bool isMixtureOfExperts() const { return numExperts > 0; }
  bool isMoeLayer(int64_t layer) const { return isMixtureOfExperts() && (moeLayers.empty() || moeLayers[layer]); }
  /// The layers whose MLP is the mixture (all of them unless moeLayers says otherwise).
  int64_t numMoeLayers() const;
  int64_t expertFfnHiddenSize() const { return moeFfnHiddenSize ? moeFfnHiddenSize : ffnHiddenSize; }
  /// A bidirectional encoder trained as a masked language model (BERT).
  bool isEncoder() const { return family == "bert" || family == "megatron_bert"; }
  /// BERT's original norms after each residual add (Megatron's BERT moved them before).
  bool normAfterResidual() const { return family == "bert"; }
  /// GPT-2's GELU is the tanh approximation (gelu_new); BERT's the exact one (erf).
  bool geluTanh() const { return family != "bert" && family != "megatron_bert"; }
  /// Gemma's RMSNorm scales by (1 + w), its weights centred at zero (Megatron's
  /// apply_layernorm_1p).
  bool normWeightsCentredAtZero() const { return family == "gemma"; }
  /// Gemma multiplies the token embeddings by sqrt(hidden_size) (as a float32, transformers').
  bool scalesEmbeddings() const { return family == "gemma"; }
  int64_t headDim() const { return kvChannels ? kvChannels : hiddenSize / numAttentionHeads; }
  /// The rope base a sequence of `tokens` uses: with dynamic NTK scaling past
  /// max_position_embeddings, base x (factor x tokens / max - (factor - 1))^(d / (d - 2)).
  double rotaryBaseFor(int64_t tokens) const;
  /// The width of the queries (and of the attention's output): heads x head dimension.
  int64_t queryWidth() const { return numAttentionHeads * headDim(); }
};

/// The keys a spec may have (Megatron's names).
llvm::ArrayRef<llvm::StringRef> specKeys();

/// Parses and validates a spec. `where` (the file name) starts every error message; each
/// message names the key, the value and what is allowed.
llvm::Expected<ModelSpec> parseModelSpec(llvm::StringRef yaml, llvm::StringRef where);

} // namespace megac
