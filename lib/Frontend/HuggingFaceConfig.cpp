#include "megac/Frontend/HuggingFaceConfig.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Sequence.h"
#include "llvm/Support/FormatVariadic.h"

#include <optional>
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

namespace megac {

namespace {

std::string pretty(llvm::json::Object object) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(object))) << "\n";
  return text;
}

HuggingFaceConfig none(std::string why) { return {"", std::move(why)}; }

/// transformers' Llama refuses a rope_scaling factor that JSON gives as an integer ("2"), and
/// llvm::json writes a whole double so: written as a float ("2.0").
std::string floatFactor(std::string config) {
  const std::string key = "\"factor\": ";
  size_t at = config.find(key);
  if (at == std::string::npos)
    return config;
  const size_t begin = at + key.size(), end = config.find_first_of(",\n}", begin);
  if (config.find_first_of(".eE", begin) >= end) // no fraction, no exponent
    config.insert(end, ".0");
  return config;
}

/// transformers 4.40's GPT-2, Llama, Qwen2 and Mistral make their heads hidden_size / num_attention_heads wide.
std::optional<HuggingFaceConfig> headsNotHiddenWide(const ModelSpec &s, llvm::StringRef architecture) {
  if (s.queryWidth() == s.hiddenSize)
    return std::nullopt;
  return none("kv_channels " + std::to_string(s.headDim()) + " (" + architecture.str() +
              "'s heads are hidden_size / num_attention_heads wide)");
}

HuggingFaceConfig gpt2(const ModelSpec &s) {
  if (std::optional<HuggingFaceConfig> no = headsNotHiddenWide(s, "GPT2LMHeadModel"))
    return *no;
  if (s.normalization != "LayerNorm")
    return none("normalization " + s.normalization + " (GPT2LMHeadModel has LayerNorm)");
  if (s.positionEmbeddingType != "learned")
    return none("position_embedding_type " + s.positionEmbeddingType +
                " (GPT2LMHeadModel has learned positions)");
  if (!s.addBiasLinear)
    return none("add_bias_linear false (GPT2LMHeadModel's linear layers have biases)");
  if (s.numQueryGroups != s.numAttentionHeads)
    return none("num_query_groups " + std::to_string(s.numQueryGroups) +
                " (GPT2LMHeadModel has no grouped-query attention)");
  return {pretty(llvm::json::Object{{"architectures", llvm::json::Array{"GPT2LMHeadModel"}},
                  {"model_type", "gpt2"},
                  {"vocab_size", s.vocabSize},
                  {"n_positions", s.maxPositionEmbeddings},
                  {"n_embd", s.hiddenSize},
                  {"n_layer", s.numLayers},
                  {"n_head", s.numAttentionHeads},
                  {"n_inner", s.ffnHiddenSize},
                  {"activation_function", "gelu_new"}, // the tanh approximation megac computes
                  {"layer_norm_epsilon", s.normEpsilon},
                  {"resid_pdrop", s.hiddenDropout},
                  {"embd_pdrop", s.hiddenDropout},
                  {"attn_pdrop", s.attentionDropout},
                  {"scale_attn_weights", true},
                  {"tie_word_embeddings", s.tieEmbeddings},
                  {"torch_dtype", "float32"}}),
          ""};
}

/// Llama's layout (LlamaForCausalLM, Qwen2ForCausalLM, MistralForCausalLM; GemmaForCausalLM's but
/// for its head_dim): RMSNorm, a gated MLP, rotary positions; q, k and v biases and rope scaling
/// where the family has them.
std::optional<HuggingFaceConfig> notLlamaLayout(const ModelSpec &s, llvm::StringRef architecture) {
  if (s.normalization != "RMSNorm")
    return none("normalization " + s.normalization + " (" + architecture.str() + " has RMSNorm)");
  if (s.addBiasLinear)
    return none("add_bias_linear true (" + architecture.str() + "'s MLP has no biases)");
  // Only Qwen2 has biases on q, k and v alone (Llama's and Gemma's attention_bias puts them on
  // o_proj too; Mistral has none); only Llama's rotary embedding reads rope_scaling in 4.40.
  if (s.addQkvBias != (s.family == "qwen2" || s.family == "qwen2_moe"))
    return none(std::string("add_qkv_bias ") + (s.addQkvBias ? "true" : "false") + " (" + architecture.str() +
                (s.addQkvBias ? " has no biases on q, k and v alone)" : "'s q, k and v have biases)"));
  if (s.ropeScalingType != "none" && s.family != "llama")
    return none("rope_scaling_type " + s.ropeScalingType + " (" + architecture.str() + " has no rope scaling)");
  if (s.family == "gemma")
    return std::nullopt; // head_dim is GemmaConfig's own field
  return headsNotHiddenWide(s, architecture);
}

/// The fields Llama's layout shares (LlamaForCausalLM, Qwen2ForCausalLM, MistralForCausalLM); none
/// has a hidden dropout.
llvm::json::Object llamaLayoutFields(const ModelSpec &s, llvm::StringRef architecture, llvm::StringRef modelType) {
  return llvm::json::Object{{"architectures", llvm::json::Array{architecture}},
                            {"model_type", modelType},
                            {"vocab_size", s.vocabSize},
                            {"hidden_size", s.hiddenSize},
                            {"intermediate_size", s.ffnHiddenSize},
                            {"num_hidden_layers", s.numLayers},
                            {"num_attention_heads", s.numAttentionHeads},
                            {"num_key_value_heads", s.numQueryGroups},
                            {"hidden_act", "silu"},
                            {"max_position_embeddings", s.maxPositionEmbeddings},
                            {"rms_norm_eps", s.normEpsilon},
                            {"rope_theta", s.rotaryBase},
                            {"attention_dropout", s.attentionDropout},
                            {"tie_word_embeddings", s.tieEmbeddings},
                            {"torch_dtype", "float32"}};
}

/// transformers 4.40's sliding_window: the window, or null for none (Qwen2's eager attention
/// masks by sliding_window whatever use_sliding_window says, and its default is 4096).
llvm::json::Value slidingWindow(const ModelSpec &s) {
  return s.slidingWindow ? llvm::json::Value(s.slidingWindow) : llvm::json::Value(nullptr);
}

/// Qwen2's window fields: a sliding window in every layer or none.
void qwen2Window(llvm::json::Object &config, const ModelSpec &s) {
  config["use_sliding_window"] = s.slidingWindow != 0;
  config["sliding_window"] = slidingWindow(s);
  config["max_window_layers"] = s.numLayers;
}

/// Qwen2ForCausalLM: Llama's layout with biases on q, k and v; a sliding window in every layer or none.
HuggingFaceConfig qwen2(const ModelSpec &s) {
  if (std::optional<HuggingFaceConfig> no = notLlamaLayout(s, "Qwen2ForCausalLM"))
    return *no;
  llvm::json::Object config = llamaLayoutFields(s, "Qwen2ForCausalLM", "qwen2");
  qwen2Window(config, s);
  return {pretty(std::move(config)), ""};
}

/// MistralForCausalLM: Llama's layout with a sliding window (or none: null).
HuggingFaceConfig mistral(const ModelSpec &s) {
  if (std::optional<HuggingFaceConfig> no = notLlamaLayout(s, "MistralForCausalLM"))
    return *no;
  llvm::json::Object config = llamaLayoutFields(s, "MistralForCausalLM", "mistral");
  config["sliding_window"] = slidingWindow(s);
  return {pretty(std::move(config)), ""};
}

/// A mixture of experts in Llama's layout (MixtralForCausalLM, Qwen2MoeForCausalLM): the
/// load-balancing loss is in transformers' training loss only with output_router_logits, at
/// router_aux_loss_coef, computed over every layer's routing at once (megac's global_aux_loss).
std::optional<HuggingFaceConfig> notExpertLayout(const ModelSpec &s, llvm::StringRef architecture) {
  if (std::optional<HuggingFaceConfig> no = notLlamaLayout(s, architecture))
    return no;
  if (s.moeAuxLossCoeff > 0.0 && s.moeRouterLoadBalancingType != "global_aux_loss")
    return none("moe_router_load_balancing_type " + s.moeRouterLoadBalancingType + " (transformers' " +
                architecture.str() + " computes its load-balancing loss over all layers at once: global_aux_loss)");
  return std::nullopt;
}

/// The router's fields both families share.
void routerFields(llvm::json::Object &config, const ModelSpec &s) {
  config["num_experts_per_tok"] = s.moeRouterTopk;
  config["output_router_logits"] = s.moeAuxLossCoeff > 0.0;
  config["router_aux_loss_coef"] = s.moeAuxLossCoeff > 0.0 ? s.moeAuxLossCoeff : 0.001; // transformers' default
}

/// MixtralForCausalLM: Llama's layout (a sliding window or none) whose MLPs are experts.
HuggingFaceConfig mixtral(const ModelSpec &s) {
  if (std::optional<HuggingFaceConfig> no = notExpertLayout(s, "MixtralForCausalLM"))
    return *no;
  if (s.moeRouterPreSoftmax)
    return none("moe_router_pre_softmax true (MixtralForCausalLM renormalises its top-k weights)");
  llvm::json::Object config = llamaLayoutFields(s, "MixtralForCausalLM", "mixtral");
  config["sliding_window"] = slidingWindow(s);
  config["num_local_experts"] = s.numExperts;
  routerFields(config, s);
  config["router_jitter_noise"] = 0.0;
  return {pretty(std::move(config)), ""};
}

/// Qwen2MoeForCausalLM: Qwen2's attention, experts with a shared expert gated by a sigmoid;
/// norm_topk_prob is moe_router_pre_softmax's negation. The layers with experts: every
/// decoder_sparse_step-th from the step's (index + 1 a multiple of it) where moe_layer_freq's pattern
/// is one, else decoder_sparse_step 1 with the dense layers in mlp_only_layers (which transformers
/// reads from 4.41 on).
HuggingFaceConfig qwen2Moe(const ModelSpec &s) {
  if (std::optional<HuggingFaceConfig> no = notExpertLayout(s, "Qwen2MoeForCausalLM"))
    return *no;
  llvm::json::Object config = llamaLayoutFields(s, "Qwen2MoeForCausalLM", "qwen2_moe");
  qwen2Window(config, s);
  auto isStep = [&](int64_t k) {
    return llvm::all_of(llvm::seq<int64_t>(0, s.numLayers), [&](int64_t l) { return s.isMoeLayer(l) == ((l + 1) % k == 0); });
  };
  int64_t step = 1;
  while (step < s.numLayers && !isStep(step))
    ++step;
  if (!isStep(step))
    step = 1;
  config["decoder_sparse_step"] = step;
  llvm::json::Array dense;
  for (int64_t l = 0; l < s.numLayers && step == 1; ++l)
    if (!s.isMoeLayer(l))
      dense.push_back(l);
  if (!dense.empty())
    config["mlp_only_layers"] = std::move(dense);
  config["num_experts"] = s.numExperts;
  config["moe_intermediate_size"] = s.expertFfnHiddenSize();
  config["shared_expert_intermediate_size"] = s.moeSharedExpertIntermediateSize;
  config["norm_topk_prob"] = !s.moeRouterPreSoftmax;
  routerFields(config, s);
  return {pretty(std::move(config)), ""};
}

HuggingFaceConfig llama(const ModelSpec &s) {
  if (std::optional<HuggingFaceConfig> no = notLlamaLayout(s, "LlamaForCausalLM"))
    return *no;
  llvm::json::Object config = llamaLayoutFields(s, "LlamaForCausalLM", "llama");
  config["attention_bias"] = false;
  config["rope_scaling"] = s.ropeScalingType == "none"
                               ? llvm::json::Value(nullptr)
                               : llvm::json::Object{{"type", s.ropeScalingType}, {"factor", s.ropeScalingFactor}};
  return {floatFactor(pretty(std::move(config))), ""};
}

/// GemmaForCausalLM: GeGLU with the tanh GELU, (1 + w) RMSNorm, embeddings times sqrt(hidden_size),
/// its own head_dim.
HuggingFaceConfig gemma(const ModelSpec &s) {
  if (std::optional<HuggingFaceConfig> no = notLlamaLayout(s, "GemmaForCausalLM"))
    return *no;
  llvm::json::Object config = llamaLayoutFields(s, "GemmaForCausalLM", "gemma");
  config["hidden_act"] = "gelu_pytorch_tanh";
  config["hidden_activation"] = "gelu_pytorch_tanh";
  config["head_dim"] = s.headDim();
  config["attention_bias"] = false;
  return {pretty(std::move(config)), ""};
}

/// BertForMaskedLM (post-LN) or MegatronBertForMaskedLM (pre-LN): an encoder with learned
/// positions and token types, the exact GELU, the masked-LM head tied to the word embeddings.
HuggingFaceConfig bert(const ModelSpec &s) {
  const bool megatron = s.family == "megatron_bert";
  const std::string architecture = megatron ? "MegatronBertForMaskedLM" : "BertForMaskedLM";
  if (s.queryWidth() != s.hiddenSize)
    return none("kv_channels " + std::to_string(s.headDim()) + " (" + architecture +
                "'s heads are hidden_size / num_attention_heads wide)");
  if (s.numQueryGroups != s.numAttentionHeads)
    return none("num_query_groups " + std::to_string(s.numQueryGroups) + " (" + architecture +
                " has no grouped-query attention)");
  if (!s.addBiasLinear)
    return none("add_bias_linear false (" + architecture + "'s linear layers have biases)");
  return {pretty(llvm::json::Object{{"architectures", llvm::json::Array{architecture}},
                                    {"model_type", megatron ? "megatron-bert" : "bert"},
                                    {"vocab_size", s.vocabSize},
                                    {"hidden_size", s.hiddenSize},
                                    {"num_hidden_layers", s.numLayers},
                                    {"num_attention_heads", s.numAttentionHeads},
                                    {"intermediate_size", s.ffnHiddenSize},
                                    {"hidden_act", "gelu"}, // the exact GELU (erf)
                                    {"hidden_dropout_prob", s.hiddenDropout},
                                    {"attention_probs_dropout_prob", s.attentionDropout},
                                    {"max_position_embeddings", s.maxPositionEmbeddings},
                                    {"type_vocab_size", s.numTokentypes},
                                    {"layer_norm_eps", s.normEpsilon},
                                    {"position_embedding_type", "absolute"},
                                    {"tie_word_embeddings", true},
                                    {"torch_dtype", "float32"}}),
          ""};
}

} // namespace

HuggingFaceConfig huggingFaceConfig(const ModelSpec &spec) {
  if (spec.family == "gpt2")
    return gpt2(spec);
  if (spec.family == "llama")
    return llama(spec);
  if (spec.family == "qwen2")
    return qwen2(spec);
  if (spec.family == "mistral")
    return mistral(spec);
  if (spec.family == "gemma")
    return gemma(spec);
  if (spec.family == "mixtral")
    return mixtral(spec);
  if (spec.family == "qwen2_moe")
    return qwen2Moe(spec);
  if (spec.isEncoder())
    return bert(spec);
  return none("family " + spec.family);
}

} // namespace megac
