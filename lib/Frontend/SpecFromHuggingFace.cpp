#include "megac/Frontend/SpecFromHuggingFace.h"
#include "megac/Limits.h"
#include "megac/NumberText.h"

#include "llvm/ADT/Twine.h"
#include "llvm/Support/JSON.h"

#include <optional>

using namespace llvm;

namespace megac {

namespace {

/// Reads config.json's fields; every failure names the file and the field.
class ConfigReader {
public:
  ConfigReader(const json::Object &config, StringRef path, SpecUse use) : config(config), path(path.str()), use(use) {}

  Error fail(const Twine &message) const { return createStringError(inconvertibleErrorCode(), path + ": " + message); }

  /// A positive integer up to `limit` (megac/Limits.h, checked before any arithmetic on it);
  /// `fallback` (transformers' default) when the file leaves it out or writes null, else it is
  /// required. `what` says what the field is, for the message.
  Expected<int64_t> size(StringRef key, StringRef what, int64_t limit,
                         std::optional<int64_t> fallback = std::nullopt) const {
    const json::Value *v = config.get(key);
    if (!v || v->kind() == json::Value::Null) {
      if (fallback)
        return *fallback;
      return fail("has no " + key + " (" + what + "); a Hugging Face config.json of this architecture names it");
    }
    std::optional<int64_t> n = v->getAsInteger();
    std::optional<double> x = v->getAsNumber(); // beyond int64 (1e30, 2^64 - 1) too
    if (x && *x > double(limit))
      return tooLarge(key, *v, what, limit);
    if (!n || *n < 1)
      return fail(key + " is " + shown(*v) + "; " + what + " must be a positive integer");
    return *n;
  }

  Error tooLarge(StringRef key, const json::Value &v, StringRef what, int64_t limit) const {
    return fail(key + " is " + shown(v) + ", more than the " + Twine(limit) + " megac compiles (" + what +
                ", include/megac/Limits.h); " + cannot());
  }

  const json::Object &object() const { return config; }
  bool training() const { return use == SpecUse::Train; }

  /// What megac cannot do with a model it refuses.
  StringRef cannot() const {
    return use == SpecUse::Generate ? "it cannot generate from this model" : "it cannot compile this model";
  }

  /// A dropout rate (in [0, 1)) for training, `fallback` when absent; 0 for generating.
  Expected<double> dropout(StringRef key, double fallback) const {
    if (use == SpecUse::Generate)
      return 0.0;
    const json::Value *v = config.get(key);
    if (!v || v->kind() == json::Value::Null)
      return fallback;
    std::optional<double> x = v->getAsNumber();
    if (!x || !(*x >= 0 && *x < 1))
      return fail(key + " is " + shown(*v) + "; a dropout rate is a number in [0, 1)");
    return *x;
  }

  /// The spec lines of rope_scaling (transformers 4.40's Llama: null, or {"type", "factor"}):
  /// linear or dynamic (NTK) scaling.
  Expected<std::string> ropeScaling() const {
    const json::Value *v = config.get("rope_scaling");
    if (!v || v->kind() == json::Value::Null)
      return std::string();
    const json::Object *o = v->getAsObject();
    std::optional<StringRef> type = o ? o->getString("type") : std::nullopt;
    std::optional<double> factor = o ? o->getNumber("factor") : std::nullopt;
    if (!type || !factor)
      return fail("rope_scaling is " + shown(*v) + "; transformers' Llama reads {\"type\": ..., \"factor\": ...}");
    if (*type != "linear" && *type != "dynamic")
      return fail("rope_scaling's type is \"" + *type + "\"; transformers 4.40's Llama and megac compute \"linear\" "
                  "and \"dynamic\", so " + cannot());
    if (!(*factor > 1.0 && *factor <= 1e6))
      return fail("rope_scaling's factor is " + shown(*o->get("factor")) + "; it must be above 1 (at most 1e6)");
    return "rope_scaling_type: " + type->str() + "\nrope_scaling_factor: " + shortestExactText(*factor) + "\n";
  }

  /// The spec line of a sliding window: Mistral's sliding_window (null: none, absent: 4096), or
  /// Qwen2's when use_sliding_window is true (over the first max_window_layers layers: megac builds
  /// one layer body, so every layer or none).
  Expected<std::string> slidingWindow(StringRef family, int64_t layers) const {
    if (family == "qwen2" || family == "qwen2_moe") {
      Expected<bool> on = flag("use_sliding_window", false);
      if (!on)
        return on.takeError();
      if (!*on)
        return std::string(); // the window sizes say nothing (transformers' flash path reads them only then)
      Expected<int64_t> windowed =
          size("max_window_layers", "the layers with a sliding window", limits::kLayers, 28);
      if (!windowed)
        return windowed.takeError();
      if (*windowed < layers)
        return fail("use_sliding_window is true with max_window_layers " + Twine(*windowed) + " of " + Twine(layers) +
                    " layers; megac builds one layer body and computes a window in every layer or in none, so " +
                    cannot() + " (a max_window_layers of at least num_hidden_layers windows every layer)");
    } else if (family != "mistral" && family != "mixtral") {
      return std::string();
    }
    const json::Value *v = config.get("sliding_window");
    if ((v && v->kind() == json::Value::Null) || (!v && family == "mixtral"))
      return std::string(); // transformers: no window (MixtralConfig's default)
    Expected<int64_t> window = size("sliding_window", "the positions before a token it attends to",
                                    limits::kSeqLength, 4096);
    if (!window)
      return window.takeError();
    return "sliding_window: " + std::to_string(*window) + "\n";
  }

  /// Gemma's MLP activation: transformers 4.40 reads hidden_activation only (null: gelu_pytorch_tanh,
  /// the tanh approximation megac's GeGLU computes).
  Error gemmaActivation() const {
    const json::Value *v = config.get("hidden_activation");
    if (!v || v->kind() == json::Value::Null)
      return Error::success();
    std::optional<StringRef> name = v->getAsString();
    if (name && (*name == "gelu_pytorch_tanh" || *name == "gelu_new"))
      return Error::success();
    return fail("hidden_activation is " + shown(*v) + ", but megac's GeGLU computes the tanh approximation "
                "(gelu_pytorch_tanh, what transformers uses for null); " + cannot());
  }

  /// Families whose transformers 4.40 class reads no rope_scaling: one in the file is refused
  /// rather than ignored as transformers would.
  Expected<std::string> noRopeScaling(StringRef architecture) const {
    const json::Value *v = config.get("rope_scaling");
    if (!v || v->kind() == json::Value::Null)
      return std::string();
    return fail("rope_scaling is " + shown(*v) + ", but transformers 4.40's " + architecture +
                " reads no rope_scaling (it would run unscaled); " + cannot() +
                " as the file asks: remove rope_scaling, or use a Llama folder");
  }

  /// The dropout lines of the spec, and what they are for.
  std::string dropoutComment() const {
    return use == SpecUse::Generate ? "dropout 0: a generating program drops nothing"
                                    : "dropout as the config gives it (transformers trains with it)";
  }

  /// A positive finite number, `fallback` when absent.
  Expected<double> number(StringRef key, double fallback) const {
    const json::Value *v = config.get(key);
    if (!v || v->kind() == json::Value::Null)
      return fallback;
    std::optional<double> x = v->getAsNumber();
    if (!x || !(*x > 0) || *x > 1e300)
      return fail(key + " is " + shown(*v) + "; it must be a positive number");
    return *x;
  }

  Expected<bool> flag(StringRef key, bool fallback) const {
    const json::Value *v = config.get(key);
    if (!v || v->kind() == json::Value::Null)
      return fallback;
    if (std::optional<bool> b = v->getAsBoolean())
      return *b;
    return fail(key + " is " + shown(*v) + "; it must be true or false");
  }

  /// A string field that must be `expected` (what megac computes) when present.
  Error require(StringRef key, StringRef expected, StringRef why) const {
    const json::Value *v = config.get(key);
    if (!v || v->kind() == json::Value::Null || v->getAsString() == expected)
      return Error::success();
    return fail(key + " is " + shown(*v) + ", but megac computes " + expected + " (" + why + "); " + cannot());
  }

  static std::string shown(const json::Value &v) {
    std::string text;
    raw_string_ostream os(text);
    os << v;
    return text.size() > 80 ? text.substr(0, 77) + "..." : text;
  }

private:
  const json::Object &config;
  std::string path;
  SpecUse use;
};

std::string exact(double x) { return shortestExactText(x); }

std::string line(StringRef key, const Twine &value) { return (key + ": " + value + "\n").str(); }

/// The experts of MixtralForCausalLM (num_local_experts, each intermediate_size wide; softmax
/// over the top k) or Qwen2MoeForCausalLM (num_experts, moe_intermediate_size wide, softmax over
/// all and the top k renormalised only with norm_topk_prob; a shared expert gated by a sigmoid,
/// and MoE layers chosen by decoder_sparse_step and mlp_only_layers). transformers adds
/// router_aux_loss_coef x load_balancing_loss_func (over every layer's routing at once) to the
/// training loss when output_router_logits is true: so does megac.
Expected<std::string> expertLines(const ConfigReader &r, StringRef family) {
  const json::Object &config = r.object();
  const bool qwen = family == "qwen2_moe";
  Expected<int64_t> experts = r.size(qwen ? "num_experts" : "num_local_experts", "the experts of each layer",
                                     limits::kExperts, qwen ? 60 : 8);
  if (!experts)
    return experts.takeError();
  Expected<int64_t> topk = r.size("num_experts_per_tok", "the experts each token is routed to", limits::kExperts,
                                  qwen ? 4 : 2);
  if (!topk)
    return topk.takeError();
  if (*topk > *experts)
    return r.fail("num_experts_per_tok is " + Twine(*topk) + ", more than " +
                  (qwen ? "num_experts" : "num_local_experts") + " (" + Twine(*experts) +
                  "): a token is routed to at most every expert");
  Expected<double> coefficient = r.number("router_aux_loss_coef", 0.001);
  Expected<bool> routerLogits = r.flag("output_router_logits", false);
  if (!coefficient)
    return coefficient.takeError();
  if (!routerLogits)
    return routerLogits.takeError();
  std::string out = line("num_experts", Twine(*experts)) + line("moe_router_topk", Twine(*topk)) +
                    "# transformers' load_balancing_loss_func, in the training loss " +
                    (*routerLogits ? "(output_router_logits true)" : "only with output_router_logits true") + "\n" +
                    line("moe_router_load_balancing_type", "global_aux_loss") +
                    line("moe_aux_loss_coeff", *routerLogits ? exact(*coefficient) : "0");
  if (!qwen) {
    if (const json::Value *jitter = config.get("router_jitter_noise"))
      if (jitter->getAsNumber().value_or(1.0) != 0.0 && r.training())
        return r.fail("router_jitter_noise is " + (jitter->getAsNumber() ? exact(*jitter->getAsNumber()) : ConfigReader::shown(*jitter)) +
                      "; megac does not jitter the router's inputs (transformers multiplies them by noise in "
                      "training), so " + r.cannot() + " as the file asks: set it to 0");
    return out;
  }
  Expected<int64_t> expertFfn = r.size("moe_intermediate_size", "each expert's hidden size", limits::kFfnHiddenSize, 1408),
                    shared = r.size("shared_expert_intermediate_size", "the shared expert's hidden size",
                                    limits::kFfnHiddenSize, 5632),
                    step = r.size("decoder_sparse_step", "the layers between two MoE layers", limits::kLayers, 1);
  Expected<bool> normTopk = r.flag("norm_topk_prob", false);
  for (Expected<int64_t> *e : {&expertFfn, &shared, &step})
    if (!*e)
      return e->takeError();
  if (!normTopk)
    return normTopk.takeError();
  // The layers with the mixture: every decoder_sparse_step-th (layer index + 1 a multiple of it)
  // but those mlp_only_layers lists; the others have a dense MLP intermediate_size wide.
  Expected<int64_t> layers = r.size("num_hidden_layers", "the number of layers", limits::kLayers);
  if (!layers)
    return layers.takeError();
  std::vector<bool> sparse;
  for (int64_t l = 0; l < *layers; ++l)
    sparse.push_back((l + 1) % *step == 0);
  if (const json::Value *dense = config.get("mlp_only_layers")) {
    const json::Array *list = dense->getAsArray();
    for (size_t i = 0; list && i < list->size(); ++i) {
      std::optional<int64_t> l = (*list)[i].getAsInteger();
      if (!l || *l < 0 || *l >= *layers) {
        list = nullptr;
        break;
      }
      sparse[static_cast<size_t>(*l)] = false;
    }
    if (!list)
      return r.fail("mlp_only_layers is " + ConfigReader::shown(*dense) + "; it lists layer indices (0 to " +
                    Twine(*layers - 1) + ") whose MLP is dense");
  }
  if (llvm::none_of(sparse, [](bool moe) { return moe; }))
    return r.fail("decoder_sparse_step " + Twine(*step) + " and mlp_only_layers leave no layer with the experts; " +
                  r.cannot() + " as a mixture of experts");
  std::string pattern;
  for (bool moe : sparse)
    pattern += std::string(pattern.empty() ? "" : ", ") + (moe ? "1" : "0");
  if (llvm::any_of(sparse, [](bool moe) { return !moe; }))
    out += "# decoder_sparse_step " + std::to_string(*step) + " and mlp_only_layers: the layers with the experts (1)\n" +
           line("moe_layer_freq", "\"[" + pattern + "]\"");
  // intermediate_size is the dense layers' MLP width (kept for the config written back).
  return out + line("moe_ffn_hidden_size", Twine(*expertFfn)) +
         line("moe_shared_expert_intermediate_size", Twine(*shared)) +
         line("moe_router_pre_softmax", *normTopk ? "false" : "true");
}


Expected<std::string> gpt2Spec(const ConfigReader &r) {
  Expected<int64_t> layers = r.size("n_layer", "the number of layers", limits::kLayers),
                    hidden = r.size("n_embd", "the hidden size", limits::kHiddenSize),
                    heads = r.size("n_head", "the number of attention heads", limits::kAttentionHeads),
                    positions = r.size("n_positions", "the positions the model was made for", limits::kSeqLength),
                    vocab = r.size("vocab_size", "the vocabulary size", limits::kVocabSize);
  for (Expected<int64_t> *e : {&layers, &hidden, &heads, &positions, &vocab})
    if (!*e)
      return e->takeError();
  // null: 4 x n_embd (within kFfnHiddenSize: n_embd is at most kHiddenSize)
  Expected<int64_t> ffn = r.size("n_inner", "the MLP's hidden size", limits::kFfnHiddenSize, 4 * *hidden);
  Expected<double> epsilon = r.number("layer_norm_epsilon", 1e-5);
  Expected<bool> tied = r.flag("tie_word_embeddings", true);
  if (!ffn)
    return ffn.takeError();
  if (!epsilon)
    return epsilon.takeError();
  if (!tied)
    return tied.takeError();
  if (Error e = r.require("activation_function", "gelu_new", "GELU's tanh approximation"))
    return std::move(e);
  // Megatron's one hidden dropout is GPT-2's embedding and residual dropouts at once.
  Expected<double> residual = r.dropout("resid_pdrop", 0.1), embedding = r.dropout("embd_pdrop", 0.1),
                   attention = r.dropout("attn_pdrop", 0.1);
  for (Expected<double> *e : {&residual, &embedding, &attention})
    if (!*e)
      return e->takeError();
  if (*residual != *embedding)
    return r.fail("embd_pdrop is " + exact(*embedding) + " and resid_pdrop " + exact(*residual) +
                  "; megac drops the embeddings and the residual branches at one rate (Megatron's hidden dropout): "
                  "set both to one value");
  return "# From a Hugging Face GPT2LMHeadModel's config.json; " + r.dropoutComment() + ".\n" +
         line("family", "gpt2") + line("num_layers", Twine(*layers)) + line("hidden_size", Twine(*hidden)) +
         line("num_attention_heads", Twine(*heads)) + line("ffn_hidden_size", Twine(*ffn)) +
         line("seq_length", Twine(*positions)) + line("vocab_size", Twine(*vocab)) +
         line("norm_epsilon", exact(*epsilon)) + line("tie_embeddings", *tied ? "true" : "false") +
         line("hidden_dropout", exact(*residual)) + line("attention_dropout", exact(*attention));
}

/// LlamaForCausalLM's config, Qwen2ForCausalLM's (the same fields; q, k and v with biases, which the
/// qwen2 family gives, and an optional sliding window), MistralForCausalLM's (a sliding window) or
/// GemmaForCausalLM's (head_dim, Megatron's kv_channels; GeGLU, whose activation transformers 4.40
/// reads from hidden_activation alone, null meaning gelu_pytorch_tanh; (1 + w) RMSNorm and
/// embeddings times sqrt(hidden_size), which the gemma family gives; tied by default).
Expected<std::string> llamaLayoutSpec(const ConfigReader &r, StringRef family, StringRef architecture) {
  const bool gemma = family == "gemma", moe = family == "mixtral" || family == "qwen2_moe";
  Expected<int64_t> layers = r.size("num_hidden_layers", "the number of layers", limits::kLayers),
                    hidden = r.size("hidden_size", "the hidden size", limits::kHiddenSize),
                    heads = r.size("num_attention_heads", "the number of attention heads", limits::kAttentionHeads),
                    ffn = r.size("intermediate_size", "the MLP's hidden size", limits::kFfnHiddenSize),
                    vocab = r.size("vocab_size", "the vocabulary size", limits::kVocabSize),
                    positions = r.size("max_position_embeddings", "the positions the model was made for",
                                       limits::kSeqLength,
                                       family == "qwen2" || family == "qwen2_moe" ? 32768
                                       : family == "mistral" || family == "mixtral" ? 4096 * 32
                                       : gemma               ? 8192
                                                             : 2048);
  for (Expected<int64_t> *e : {&layers, &hidden, &heads, &ffn, &vocab, &positions})
    if (!*e)
      return e->takeError();
  std::string headDim; // Gemma's own head width
  if (gemma) {
    Expected<int64_t> width = r.size("head_dim", "the width of each attention head", limits::kHiddenSize, 256);
    if (!width)
      return width.takeError();
    headDim = line("kv_channels", Twine(*width));
  }
  Expected<int64_t> groups = r.size("num_key_value_heads", "the number of key/value heads", limits::kAttentionHeads,
                                    family == "mixtral" ? 8 : *heads); // MixtralConfig's default
  // MixtralConfig's defaults differ from the others'.
  Expected<double> epsilon = r.number("rms_norm_eps", family == "mixtral" ? 1e-5 : 1e-6),
                   base = r.number("rope_theta", family == "mixtral" ? 1e6 : 10000);
  Expected<bool> tied = r.flag("tie_word_embeddings", gemma);
  if (!groups)
    return groups.takeError();
  if (!epsilon)
    return epsilon.takeError();
  if (!base)
    return base.takeError();
  if (!tied)
    return tied.takeError();
  if (Error e = gemma ? r.gemmaActivation() : r.require("hidden_act", "silu", "SwiGLU's gate"))
    return std::move(e);
  Expected<double> attention = r.dropout("attention_dropout", 0.0); // Llama has no other dropout
  if (!attention)
    return attention.takeError();
  Expected<std::string> scaling = family == "llama" ? r.ropeScaling() : r.noRopeScaling(architecture);
  if (!scaling)
    return scaling.takeError();
  Expected<std::string> window = r.slidingWindow(family, *layers);
  if (!window)
    return window.takeError();
  Expected<std::string> experts = moe ? expertLines(r, family) : std::string();
  if (!experts)
    return experts.takeError();
  return "# From a Hugging Face " + architecture.str() + "'s config.json; " + r.dropoutComment() + ".\n" +
         line("family", family) + line("num_layers", Twine(*layers)) + line("hidden_size", Twine(*hidden)) +
         line("num_attention_heads", Twine(*heads)) + line("num_query_groups", Twine(*groups)) + headDim +
         line("ffn_hidden_size", Twine(*ffn)) + line("seq_length", Twine(*positions)) +
         line("vocab_size", Twine(*vocab)) + line("norm_epsilon", exact(*epsilon)) +
         line("rotary_base", exact(*base)) + *scaling + *window + line("tie_embeddings", *tied ? "true" : "false") +
         line("hidden_dropout", "0") + line("attention_dropout", exact(*attention)) + *experts;
}


/// BertForMaskedLM's (or MegatronBertForMaskedLM's) config: post-LN (pre-LN) encoder, learned
/// absolute positions and token types, the exact GELU.
Expected<std::string> bertSpec(const ConfigReader &r, StringRef family, StringRef architecture) {
  Expected<int64_t> layers = r.size("num_hidden_layers", "the number of layers", limits::kLayers, 12),
                    hidden = r.size("hidden_size", "the hidden size", limits::kHiddenSize, 768),
                    heads = r.size("num_attention_heads", "the number of attention heads", limits::kAttentionHeads, 12),
                    ffn = r.size("intermediate_size", "the MLP's hidden size", limits::kFfnHiddenSize, 3072),
                    vocab = r.size("vocab_size", "the vocabulary size", limits::kVocabSize,
                                   family == "bert" ? 30522 : 29056),
                    positions = r.size("max_position_embeddings", "the positions the model was made for",
                                       limits::kSeqLength, 512),
                    types = r.size("type_vocab_size", "the token types", limits::kVocabSize, 2);
  for (Expected<int64_t> *e : {&layers, &hidden, &heads, &ffn, &vocab, &positions, &types})
    if (!*e)
      return e->takeError();
  Expected<double> epsilon = r.number("layer_norm_eps", 1e-12);
  Expected<bool> decoder = r.flag("is_decoder", false), tied = r.flag("tie_word_embeddings", true);
  if (!epsilon)
    return epsilon.takeError();
  if (!decoder)
    return decoder.takeError();
  if (!tied)
    return tied.takeError();
  if (*decoder)
    return r.fail("is_decoder is true: a causal BERT; megac computes " + architecture +
                  " as the bidirectional encoder it is, so " + r.cannot());
  if (!*tied)
    return r.fail("tie_word_embeddings is false; megac's masked-LM decoder is the word embeddings, as " +
                  architecture + "'s by default, so " + r.cannot());
  if (Error e = r.require("hidden_act", "gelu", "the exact GELU"))
    return std::move(e);
  if (Error e = r.require("position_embedding_type", "absolute", "learned absolute positions"))
    return std::move(e);
  Expected<double> hiddenDrop = r.dropout("hidden_dropout_prob", 0.1),
                   attentionDrop = r.dropout("attention_probs_dropout_prob", 0.1);
  for (Expected<double> *e : {&hiddenDrop, &attentionDrop})
    if (!*e)
      return e->takeError();
  return "# From a Hugging Face " + architecture.str() + "'s config.json; " + r.dropoutComment() + ".\n" +
         line("family", family) + line("num_layers", Twine(*layers)) + line("hidden_size", Twine(*hidden)) +
         line("num_attention_heads", Twine(*heads)) + line("ffn_hidden_size", Twine(*ffn)) +
         line("seq_length", Twine(*positions)) + line("vocab_size", Twine(*vocab)) +
         line("num_tokentypes", Twine(*types)) + line("norm_epsilon", exact(*epsilon)) +
         line("hidden_dropout", exact(*hiddenDrop)) + line("attention_dropout", exact(*attentionDrop));
}

} // namespace

Expected<std::string> specFromHuggingFaceConfig(StringRef configJson, StringRef path, SpecUse use) {
  Expected<json::Value> parsed = json::parse(configJson);
  if (!parsed)
    return createStringError(inconvertibleErrorCode(),
                             path + ": not JSON (" + toString(parsed.takeError()) + "); is this a config.json?");
  const json::Object *config = parsed->getAsObject();
  if (!config)
    return createStringError(inconvertibleErrorCode(), path + ": holds no JSON object; is this a config.json?");
  ConfigReader r(*config, path, use);
  std::string type = config->getString("model_type").value_or("").str(), architectures;
  if (const json::Array *list = config->getArray("architectures"))
    for (const json::Value &a : *list)
      architectures += (architectures.empty() ? "" : ", ") + a.getAsString().value_or("?").str();
  // The class names the head on the model: megac trains and generates with a causal LM head, or
  // trains BERT with its masked-LM head.
  const char *causalLM = type == "gpt2"    ? "GPT2LMHeadModel"
                         : type == "llama" ? "LlamaForCausalLM"
                         : type == "qwen2"   ? "Qwen2ForCausalLM"
                         : type == "mistral" ? "MistralForCausalLM"
                         : type == "gemma"   ? "GemmaForCausalLM"
                         : type == "mixtral" ? "MixtralForCausalLM"
                         : type == "qwen2_moe" ? "Qwen2MoeForCausalLM"
                         : type == "bert"    ? "BertForMaskedLM"
                         : type == "megatron-bert" ? "MegatronBertForMaskedLM"
                                             : nullptr;
  if (const json::Array *list = config->getArray("architectures"); causalLM && list && !list->empty())
    for (const json::Value &a : *list)
      if (a.getAsString() != causalLM)
        return r.fail("architectures is [" + architectures + "]; megac computes " + causalLM +
                      " (" + (type == "bert" || type == "megatron-bert" ? "a masked" : "a causal") +
                      " language model head) for model_type '" + type + "', not " +
                      a.getAsString().value_or("?") + ", so " + r.cannot());
  if (type == "gpt2")
    return gpt2Spec(r);
  if (type == "llama" || type == "qwen2" || type == "mistral" || type == "gemma" || type == "mixtral" ||
      type == "qwen2_moe")
    return llamaLayoutSpec(r, type, causalLM);
  if (type == "bert" || type == "megatron-bert")
    return bertSpec(r, type == "bert" ? "bert" : "megatron_bert", causalLM);
  return r.fail("model_type is " + (type.empty() ? std::string("missing") : "'" + type + "'") +
                (architectures.empty() ? std::string() : " (architectures " + architectures + ")") +
                "; megac computes the gpt2 (GPT2LMHeadModel), llama (LlamaForCausalLM), qwen2 (Qwen2ForCausalLM), "
                "mistral (MistralForCausalLM), gemma (GemmaForCausalLM), mixtral (MixtralForCausalLM), qwen2_moe "
                "(Qwen2MoeForCausalLM), bert (BertForMaskedLM) and megatron-bert (MegatronBertForMaskedLM) families "
                "only, so " +
                r.cannot());
}

} // namespace megac
