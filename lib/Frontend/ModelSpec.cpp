// Reads a model spec with LLVM's YAML parser: family defaults first, then the file's keys,
// then checks that span keys. Unknown keys are errors, never ignored.
#include "megac/Frontend/ModelSpec.h"
#include "megac/Frontend/ModelSize.h"
#include "megac/Limits.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/YAMLParser.h"

#include <cmath>
#include <sstream>

using namespace llvm;
using namespace megac;

namespace {

StringRef exampleValue(StringRef key);

class SpecReader {
public:
  SpecReader(StringRef where) : where(where.str()) {}

  Error fail(const Twine &message) {
    return createStringError(inconvertibleErrorCode(), where + ": " + message);
  }

  /// A positive integer of at most `limit` (megac/Limits.h).
  Expected<int64_t> toInt(StringRef key, StringRef text, int64_t limit) {
    int64_t value;
    if (text.getAsInteger(10, value)) {
      StringRef digits = text;
      digits.consume_front("+") || digits.consume_front("-");
      if (!digits.empty() && llvm::all_of(digits, isDigit)) // too long for int64
        return fail(key + " is " + text + "; it must be between 1 and " + Twine(limit));
      return fail(key + " must be an integer, got '" + text + "'");
    }
    if (value < 1)
      return fail(key + " must be positive, got " + text);
    if (value > limit)
      return fail(key + " is " + text + "; it must be between 1 and " + Twine(limit) +
                  " (the largest megac compiles)");
    return value;
  }

  /// A finite number: YAML's .inf and .nan, and values beyond a double's range, are refused.
  Expected<double> toNumber(StringRef key, StringRef text) {
    double value;
    std::string lower = text.trim().lower();
    bool yamlSpecial = lower == ".inf" || lower == "+.inf" || lower == "-.inf" || lower == ".nan";
    if (!yamlSpecial && text.trim().getAsDouble(value))
      return fail(key + " must be a number, got '" + text + "'");
    if (yamlSpecial || !std::isfinite(value))
      return fail(key + " is '" + text + "', which is not a finite number; give a finite value (e.g. " + key +
                  ": " + exampleValue(key) + ")");
    return value;
  }

  Expected<bool> toBool(StringRef key, StringRef text) {
    if (text == "true" || text == "True")
      return true;
    if (text == "false" || text == "False")
      return false;
    return fail(key + " must be true or false, got '" + text + "'");
  }

  Expected<std::string> toChoice(StringRef key, StringRef text, ArrayRef<StringRef> allowed) {
    if (llvm::is_contained(allowed, text))
      return text.str();
    return fail(key + " is '" + text + "'; expected one of " + join(allowed, ", "));
  }

  std::string where;
};

/// What a finite value of a floating-point key looks like.
StringRef exampleValue(StringRef key) {
  if (key == "norm_epsilon")
    return "1e-5";
  if (key == "rotary_base")
    return "10000";
  return "0";
}

std::string number(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

/// The Hugging Face class a family's checkpoints load as (transformers 4.40).
StringRef huggingFaceClass(StringRef family) {
  return llvm::StringSwitch<StringRef>(family)
      .Case("gpt2", "GPT2LMHeadModel")
      .Case("qwen2", "Qwen2ForCausalLM")
      .Case("mistral", "MistralForCausalLM")
      .Case("gemma", "GemmaForCausalLM")
      .Case("bert", "BertForMaskedLM")
      .Case("megatron_bert", "MegatronBertForMaskedLM")
      .Case("mixtral", "MixtralForCausalLM")
      .Case("qwen2_moe", "Qwen2MoeForCausalLM")
      .Default("LlamaForCausalLM");
}

int64_t defaultFfn(StringRef family, int64_t hidden) {
  if (family == "gpt2" || family == "bert" || family == "megatron_bert")
    return 4 * hidden;
  // Llama: 8h/3 rounded up to a multiple of 256.
  return 256 * static_cast<int64_t>(std::ceil((8.0 * hidden / 3.0) / 256.0));
}

Error moeFail(const Twine &message) { return createStringError(inconvertibleErrorCode(), message); }

/// Megatron's moe_layer_freq: an integer N (the mixture in layers 0, N, 2N, ...) or a list of
/// one 0 or 1 per layer ("[0, 1, 0, 1]"); empty when every layer's MLP is the mixture.
Expected<std::vector<bool>> moeLayerPattern(StringRef text, int64_t layers) {
  std::vector<bool> pattern;
  const StringRef trimmed = text.trim();
  int64_t every;
  if (!trimmed.getAsInteger(10, every)) {
    if (every < 1 || every > layers)
      return moeFail("moe_layer_freq is " + trimmed + "; an integer N puts the mixture of experts in every Nth "
                     "layer from the first, so it must be between 1 and num_layers (" + Twine(layers) + ")");
    for (int64_t l = 0; l < layers; ++l)
      pattern.push_back(l % every == 0);
  } else if (trimmed.starts_with("[") && trimmed.ends_with("]")) {
    SmallVector<StringRef> entries;
    trimmed.drop_front().drop_back().split(entries, ',');
    for (StringRef e : entries) {
      if (e.trim() != "0" && e.trim() != "1")
        return moeFail("moe_layer_freq is " + trimmed + "; a list holds one 0 (dense) or 1 (mixture of experts) per "
                       "layer, and '" + e.trim() + "' is neither");
      pattern.push_back(e.trim() == "1");
    }
    if (static_cast<int64_t>(pattern.size()) != layers)
      return moeFail("moe_layer_freq is " + trimmed + ", " + Twine(pattern.size()) + " entries; it needs one per layer (" +
                     "num_layers " + Twine(layers) + ")");
    if (llvm::none_of(pattern, [](bool moe) { return moe; }))
      return moeFail("moe_layer_freq is " + trimmed + ": no layer has the mixture of experts; leave num_experts out "
                     "for a dense model");
  } else {
    return moeFail("moe_layer_freq is '" + trimmed + "'; give an integer N (every Nth layer, from the first) or a "
                   "quoted list of one 0 or 1 per layer, e.g. \"[0, 1, 0, 1]\"");
  }
  if (llvm::all_of(pattern, [](bool moe) { return moe; }))
    pattern.clear();
  return pattern;
}

/// The mixture-of-experts keys against each other and the family: experts have a Hugging Face
/// checkpoint layout as mixtral or qwen2_moe only, and those families have experts.
Error checkMixtureOfExperts(const ModelSpec &s, const StringMap<std::string> &raw) {
  const bool moeFamily = s.family == "mixtral" || s.family == "qwen2_moe";
  if (!moeFamily) {
    for (StringRef key : specKeys())
      if (key.starts_with("moe_") || key == "num_experts")
        if (raw.count(key))
          return moeFail(key + " with family " + s.family + ": " + huggingFaceClass(s.family) +
                         " has no experts, so no Hugging Face checkpoint could hold them; use family mixtral or "
                         "qwen2_moe, or leave " + key + " out");
    return Error::success();
  }
  if (!s.numExperts)
    return moeFail("family " + s.family + " needs num_experts (the experts of each layer's MLP)");
  if (s.moeRouterTopk > s.numExperts)
    return moeFail("moe_router_topk is " + Twine(s.moeRouterTopk) + ", more than num_experts (" +
                   Twine(s.numExperts) + "); a token is routed to at most every expert: lower moe_router_topk");
  if (s.family == "mixtral" && !s.moeLayers.empty())
    return moeFail("moe_layer_freq with dense layers and family mixtral: MixtralForCausalLM has experts in every "
                   "layer, so no Hugging Face checkpoint could hold a dense one; use family qwen2_moe (its "
                   "mlp_only_layers), or leave moe_layer_freq out");
  const bool shared = s.moeSharedExpertIntermediateSize > 0;
  if (s.family == "mixtral" && (shared || s.moeSharedExpertGate))
    return moeFail(std::string("moe_shared_expert_") + (shared ? "intermediate_size" : "gate") +
                   " with family mixtral: MixtralForCausalLM has no shared expert; use family qwen2_moe, or leave "
                   "it out");
  if (s.family == "qwen2_moe" && !shared)
    return moeFail("family qwen2_moe needs moe_shared_expert_intermediate_size (Qwen2MoeForCausalLM's "
                   "shared_expert_intermediate_size): its layers have a shared expert");
  if (s.moeSharedExpertGate != (s.family == "qwen2_moe"))
    return moeFail("moe_shared_expert_gate is " + Twine(s.moeSharedExpertGate ? "true" : "false") +
                   " with family qwen2_moe: Qwen2MoeForCausalLM always gates its shared expert (sigmoid of "
                   "shared_expert_gate); leave moe_shared_expert_gate out");
  for (auto [key, v] : {std::pair<StringRef, double>{"moe_aux_loss_coeff", s.moeAuxLossCoeff},
                        {"moe_z_loss_coeff", s.moeZLossCoeff}})
    if (!(v >= 0.0 && v <= 1e6))
      return moeFail(key + " is " + number(v) + "; a loss coefficient is a number in [0, 1e6] (0: not added)");
  if (raw.count("moe_expert_capacity_factor") && !(s.moeExpertCapacityFactor > 0.0 && s.moeExpertCapacityFactor <= 1e6))
    return moeFail("moe_expert_capacity_factor is " + number(s.moeExpertCapacityFactor) +
                   "; a capacity factor is a positive number (leave it out for dropless routing)");
  if (raw.count("moe_token_drop_policy") && !raw.count("moe_expert_capacity_factor"))
    return moeFail("moe_token_drop_policy without moe_expert_capacity_factor: dropless routing drops no token; set "
                   "a capacity factor, or leave moe_token_drop_policy out");
  if (s.moeAuxLossCoeff > 0.0 && s.moeRouterLoadBalancingType == "none")
    return moeFail("moe_aux_loss_coeff is " + number(s.moeAuxLossCoeff) +
                   " with moe_router_load_balancing_type none: there is no load-balancing loss to scale; set a "
                   "type (aux_loss, global_aux_loss) or leave the coefficient out");
  return Error::success();
}

} // namespace

int64_t ModelSpec::numMoeLayers() const {
  if (!isMixtureOfExperts())
    return 0;
  return moeLayers.empty() ? numLayers : llvm::count(moeLayers, true);
}

ArrayRef<StringRef> megac::specKeys() {
  static const StringRef known[] = {
      "family", "num_layers", "hidden_size", "num_attention_heads", "num_query_groups", "kv_channels",
      "ffn_hidden_size", "seq_length", "max_position_embeddings", "vocab_size", "normalization",
      "activation", "position_embedding_type", "tie_embeddings", "add_bias_linear", "add_qkv_bias",
      "norm_epsilon", "rotary_base", "rope_scaling_type", "rope_scaling_factor", "sliding_window",
      "num_tokentypes", "hidden_dropout", "attention_dropout", "num_experts", "moe_router_topk",
      "moe_ffn_hidden_size", "moe_router_pre_softmax", "moe_shared_expert_intermediate_size",
      "moe_shared_expert_gate", "moe_layer_freq", "moe_router_load_balancing_type", "moe_aux_loss_coeff",
      "moe_z_loss_coeff", "moe_expert_capacity_factor", "moe_token_drop_policy"};
  return known;
}

Expected<ModelSpec> megac::parseModelSpec(StringRef yaml, StringRef where) {
  SpecReader r(where);
  SourceMgr sm;
  std::string yamlError;
  sm.setDiagHandler([](const SMDiagnostic &d, void *ctx) {
    *static_cast<std::string *>(ctx) = (Twine(d.getLineNo()) + ":" + Twine(d.getColumnNo() + 1) +
                                        ": " + d.getMessage()).str();
  }, &yamlError);
  yaml::Stream stream(yaml, sm);
  yaml::document_iterator doc = stream.begin();
  if (doc == stream.end() || !doc->getRoot())
    return r.fail("empty spec; expected keys such as family, num_layers, hidden_size");
  auto *map = dyn_cast<yaml::MappingNode>(doc->getRoot());
  if (!map)
    return r.fail(yamlError.empty() ? "expected a mapping of keys to values" : "invalid YAML at " + yamlError);

  StringMap<std::string> raw;
  std::map<std::string, unsigned> keyLines;
  for (yaml::KeyValueNode &kv : *map) {
    auto *key = dyn_cast_or_null<yaml::ScalarNode>(kv.getKey());
    auto *value = dyn_cast_or_null<yaml::ScalarNode>(kv.getValue());
    if (!yamlError.empty())
      return r.fail("invalid YAML at " + yamlError);
    SmallString<32> keyStorage, valueStorage;
    if (!key)
      return r.fail("keys must be plain names");
    StringRef k = key->getValue(keyStorage);
    if (!value)
      return r.fail(k + " must be a single value, not a list or mapping");
    if (!raw.try_emplace(k, value->getValue(valueStorage).str()).second)
      return r.fail(k + " is given twice");
    keyLines[k.str()] = sm.getLineAndColumn(key->getSourceRange().Start).first;
  }
  if (!yamlError.empty())
    return r.fail("invalid YAML at " + yamlError);
  // After the keys are copied out: moving to the next document frees this one's nodes.
  if (++doc != stream.end())
    return r.fail("has a second YAML document (after '---'); a spec is one document: remove the '---' and what "
                  "follows, or put the other model in its own file");
  if (!yamlError.empty())
    return r.fail("invalid YAML at " + yamlError);

  for (auto &entry : raw)
    if (!llvm::is_contained(specKeys(), entry.getKey()))
      return r.fail("unknown key '" + entry.getKey() + "'; known keys: " + join(specKeys(), ", "));
  for (StringRef k : {"family", "num_layers", "hidden_size", "num_attention_heads", "seq_length", "vocab_size"})
    if (!raw.count(k))
      return r.fail("missing required key '" + k + "'");

  ModelSpec s;
  s.path = where.str();
  s.keyLines = std::move(keyLines);
  // A reference into the map: lookup() would return a temporary copy.
  auto get = [&](StringRef k) -> StringRef { return raw.find(k)->second; };
  auto has = [&](StringRef k) { return raw.count(k) != 0; };
  auto take = [&](auto expected, auto &field) -> Error {
    if (!expected)
      return expected.takeError();
    field = *expected;
    return Error::success();
  };
  if (Error e = take(r.toChoice("family", get("family"), {"gpt2", "llama", "qwen2", "mistral", "gemma", "bert", "megatron_bert",
                                                        "mixtral", "qwen2_moe"}),
                       s.family))
    return std::move(e);
  // GPT-2 and BERT share a layout's traits: LayerNorm, GELU, learned positions, biases.
  const bool bert = s.family == "bert" || s.family == "megatron_bert";
  const bool gpt2Traits = s.family == "gpt2" || bert;
  struct IntKey { StringRef key; int64_t *field; int64_t limit; };
  for (IntKey k : {IntKey{"num_layers", &s.numLayers, limits::kLayers},
                   IntKey{"hidden_size", &s.hiddenSize, limits::kHiddenSize},
                   IntKey{"num_attention_heads", &s.numAttentionHeads, limits::kAttentionHeads},
                   IntKey{"seq_length", &s.seqLength, limits::kSeqLength},
                   IntKey{"vocab_size", &s.vocabSize, limits::kVocabSize}})
    if (Error e = take(r.toInt(k.key, get(k.key), k.limit), *k.field))
      return std::move(e);
  s.numQueryGroups = s.numAttentionHeads;
  s.ffnHiddenSize = defaultFfn(s.family, s.hiddenSize);
  s.maxPositionEmbeddings = s.seqLength;
  s.normalization = gpt2Traits ? "LayerNorm" : "RMSNorm";
  s.activation = gpt2Traits ? "gelu" : s.family == "gemma" ? "geglu" : "swiglu";
  s.positionEmbeddingType = gpt2Traits ? "learned" : "rope";
  s.tieEmbeddings = gpt2Traits || s.family == "gemma";
  s.numTokentypes = bert ? 2 : 0;
  if (bert)
    s.normEpsilon = 1e-12; // BERT's layer_norm_eps
  s.addBiasLinear = gpt2Traits;
  s.addQkvBias = s.family == "qwen2" || s.family == "qwen2_moe";
  s.moeRouterPreSoftmax = s.family == "qwen2_moe"; // Qwen2MoeConfig's norm_topk_prob false
  s.moeSharedExpertGate = s.family == "qwen2_moe";
  // Megatron's and GPT-2's dropout; Hugging Face Llama has none.
  s.hiddenDropout = s.attentionDropout = gpt2Traits ? 0.1 : 0.0;
  for (IntKey k : {IntKey{"num_query_groups", &s.numQueryGroups, limits::kAttentionHeads},
                   IntKey{"kv_channels", &s.kvChannels, limits::kHiddenSize},
                   IntKey{"ffn_hidden_size", &s.ffnHiddenSize, limits::kFfnHiddenSize},
                   IntKey{"max_position_embeddings", &s.maxPositionEmbeddings, limits::kSeqLength},
                   IntKey{"sliding_window", &s.slidingWindow, limits::kSeqLength},
                   IntKey{"num_tokentypes", &s.numTokentypes, limits::kVocabSize},
                   IntKey{"num_experts", &s.numExperts, limits::kExperts},
                   IntKey{"moe_router_topk", &s.moeRouterTopk, limits::kExperts},
                   IntKey{"moe_ffn_hidden_size", &s.moeFfnHiddenSize, limits::kFfnHiddenSize},
                   IntKey{"moe_shared_expert_intermediate_size", &s.moeSharedExpertIntermediateSize,
                          limits::kFfnHiddenSize}})
    if (has(k.key))
      if (Error e = take(r.toInt(k.key, get(k.key), k.limit), *k.field))
        return std::move(e);
  struct Choice { StringRef key; std::string *field; SmallVector<StringRef, 2> allowed; };
  for (Choice c : {Choice{"normalization", &s.normalization, {"LayerNorm", "RMSNorm"}},
                   Choice{"activation", &s.activation, {"gelu", "swiglu", "geglu"}},
                   Choice{"position_embedding_type", &s.positionEmbeddingType, {"learned", "rope"}},
                   Choice{"rope_scaling_type", &s.ropeScalingType, {"none", "linear", "dynamic"}},
                   Choice{"moe_router_load_balancing_type", &s.moeRouterLoadBalancingType,
                          {"aux_loss", "global_aux_loss", "none"}},
                   Choice{"moe_token_drop_policy", &s.moeTokenDropPolicy, {"probs", "position"}}})
    if (has(c.key))
      if (Error e = take(r.toChoice(c.key, get(c.key), c.allowed), *c.field))
        return std::move(e);
  for (auto [k, field] : {std::pair<StringRef, bool *>{"tie_embeddings", &s.tieEmbeddings},
                          {"add_bias_linear", &s.addBiasLinear}, {"add_qkv_bias", &s.addQkvBias},
                          {"moe_router_pre_softmax", &s.moeRouterPreSoftmax},
                          {"moe_shared_expert_gate", &s.moeSharedExpertGate}})
    if (has(k))
      if (Error e = take(r.toBool(k, get(k)), *field))
        return std::move(e);
  for (auto [k, field] : {std::pair<StringRef, double *>{"norm_epsilon", &s.normEpsilon},
                          {"rotary_base", &s.rotaryBase}, {"rope_scaling_factor", &s.ropeScalingFactor},
                          {"hidden_dropout", &s.hiddenDropout},
                          {"attention_dropout", &s.attentionDropout}, {"moe_aux_loss_coeff", &s.moeAuxLossCoeff},
                          {"moe_z_loss_coeff", &s.moeZLossCoeff},
                          {"moe_expert_capacity_factor", &s.moeExpertCapacityFactor}})
    if (has(k))
      if (Error e = take(r.toNumber(k, get(k)), *field))
        return std::move(e);

  // Checks that span keys.
  if (!s.kvChannels && s.hiddenSize % s.numAttentionHeads)
    return r.fail("hidden_size (" + Twine(s.hiddenSize) + ") is not divisible by num_attention_heads (" +
                  Twine(s.numAttentionHeads) + "); set kv_channels (the head dimension) if the heads are not "
                  "hidden_size / num_attention_heads wide");
  // Both are bounded (kAttentionHeads, kHiddenSize): the product cannot overflow.
  if (s.queryWidth() > limits::kHiddenSize)
    return r.fail("num_attention_heads x kv_channels is " + Twine(s.numAttentionHeads) + " x " +
                  Twine(s.headDim()) + " = " + Twine(s.queryWidth()) + ", more than the " +
                  Twine(limits::kHiddenSize) + " megac allows for the queries' width; lower kv_channels or "
                  "num_attention_heads");
  if (s.numAttentionHeads % s.numQueryGroups)
    return r.fail("num_attention_heads (" + Twine(s.numAttentionHeads) +
                  ") is not divisible by num_query_groups (" + Twine(s.numQueryGroups) + ")");
  if (s.positionEmbeddingType == "rope" && s.headDim() % 2)
    return r.fail("rope needs an even head dimension; hidden_size / num_attention_heads = " +
                  Twine(s.headDim()));
  if (s.positionEmbeddingType == "learned" && s.maxPositionEmbeddings < s.seqLength)
    return r.fail("max_position_embeddings (" + Twine(s.maxPositionEmbeddings) +
                  ") is smaller than seq_length (" + Twine(s.seqLength) + ")");
  if (s.normEpsilon <= 0)
    return r.fail("norm_epsilon must be > 0, got " + number(s.normEpsilon));
  if (s.rotaryBase <= 0)
    return r.fail("rotary_base must be > 0, got " + number(s.rotaryBase));
  if (s.ropeScalingType != "none" && !(s.ropeScalingFactor > 1.0 && s.ropeScalingFactor <= 1e6))
    return r.fail("rope_scaling_factor is " + number(s.ropeScalingFactor) + "; rope scaling needs a factor above 1 "
                  "(transformers' rule), at most 1e6");
  if (s.ropeScalingType != "none" && s.positionEmbeddingType != "rope")
    return r.fail("rope_scaling_type " + s.ropeScalingType + " scales rotary positions, but position_embedding_type "
                  "is " + s.positionEmbeddingType + "; leave rope_scaling_type out");
  if (s.ropeScalingType != "none" && s.headDim() <= 2)
    return r.fail("rope_scaling_type " + s.ropeScalingType + " needs a head dimension above 2, got " +
                  Twine(s.headDim()));
  // Checkpoints use Hugging Face layouts; these combinations have none.
  if (s.slidingWindow && s.family != "mistral" && s.family != "qwen2")
    return r.fail("sliding_window with family " + s.family + ": " +
                  huggingFaceClass(s.family) +
                  " has no sliding window, so no Hugging Face checkpoint could say it; use family mistral (or "
                  "qwen2), or leave sliding_window out");
  if (gpt2Traits && s.activation == "swiglu")
    return r.fail("activation swiglu with family " + s.family +
                  " has no Hugging Face checkpoint layout; use family llama");
  if (bert && (s.normalization != "LayerNorm" || s.positionEmbeddingType != "learned"))
    return r.fail("family " + s.family + " with normalization " + s.normalization + " and position_embedding_type " +
                  s.positionEmbeddingType + ": BERT has LayerNorm and learned positions; leave both out");
  if (has("num_tokentypes") && !bert)
    return r.fail("num_tokentypes with family " + s.family +
                  ": token types are BERT's; leave num_tokentypes out, or use family bert or megatron_bert");
  if (!gpt2Traits && s.activation == "gelu")
    return r.fail("activation gelu with family " + s.family +
                  " has no Hugging Face checkpoint layout; use family gpt2");
  if ((s.family == "gemma") != (s.activation == "geglu"))
    return r.fail("activation " + s.activation + " with family " + s.family + ": " +
                  (s.family == "gemma" ? "GemmaForCausalLM's MLP is GeGLU; leave activation out (geglu)"
                                       : "GeGLU has a Hugging Face checkpoint layout as family gemma only; use family "
                                         "gemma, or leave activation out"));
  if (s.family == "gemma" && s.normalization != "RMSNorm")
    return r.fail("normalization " + s.normalization + " with family gemma: GemmaForCausalLM has RMSNorm (scaling "
                  "by 1 + w); leave normalization out");
  if (!gpt2Traits && s.positionEmbeddingType == "learned")
    return r.fail("position_embedding_type learned with family " + s.family +
                  " has no Hugging Face checkpoint layout; use rope, or family gpt2");
  // GPT-2's fused c_attn has its bias with the other linear layers' or not at all.
  if (gpt2Traits && has("add_qkv_bias") && s.addQkvBias != s.addBiasLinear)
    return r.fail("add_qkv_bias is " + get("add_qkv_bias") + " but add_bias_linear " +
                  (s.addBiasLinear ? "true" : "false") + "; family " + s.family +
                  "'s q, k and v have biases with the other linear layers or none (GPT-2's fused c_attn): leave "
                  "add_qkv_bias out");
  if (bert && !s.tieEmbeddings)
    return r.fail("tie_embeddings false with family " + s.family +
                  ": BERT's masked-LM decoder is the word embeddings; leave tie_embeddings out");
  for (auto [k, v] : {std::pair<StringRef, double>{"hidden_dropout", s.hiddenDropout},
                      {"attention_dropout", s.attentionDropout}})
    if (!(v >= 0.0 && v < 1.0))
      return r.fail(k + " is " + number(v) + ", but a dropout rate must be in [0, 1) (Megatron's default: 0.1)");
  if (auto it = raw.find("moe_layer_freq"); it != raw.end() && s.isMixtureOfExperts()) {
    Expected<std::vector<bool>> pattern = moeLayerPattern(it->second, s.numLayers);
    if (!pattern)
      return r.fail(toString(pattern.takeError()));
    s.moeLayers = std::move(*pattern);
  }
  if (Error e = checkMixtureOfExperts(s, raw))
    return r.fail(toString(std::move(e)));
  // The products of the sizes (weights, parameters), each size being within its limit.
  if (Error e = checkSpecSize(s))
    return r.fail(toString(std::move(e)));
  return s;
}

double megac::ModelSpec::rotaryBaseFor(int64_t tokens) const {
  if (ropeScalingType != "dynamic" || tokens <= maxPositionEmbeddings)
    return rotaryBase;
  const double d = static_cast<double>(headDim());
  const double stretch = ropeScalingFactor * static_cast<double>(tokens) / static_cast<double>(maxPositionEmbeddings) -
                         (ropeScalingFactor - 1.0);
  return rotaryBase * std::pow(stretch, d / (d - 2.0));
}
