#include "megac/Frontend/ModelSize.h"
#include "megac/Limits.h"

#include "llvm/ADT/Twine.h"
#include "llvm/Support/CheckedArithmetic.h"

#include <optional>
#include <utility>

using namespace llvm;
using namespace megac;

namespace {

Error fail(const Twine &message) { return createStringError(inconvertibleErrorCode(), message); }

/// a x b x ..., or nothing on overflow.
std::optional<int64_t> product(std::initializer_list<int64_t> factors) {
  std::optional<int64_t> p = 1;
  for (int64_t f : factors)
    p = p ? checkedMul(*p, f) : p;
  return p;
}

std::string text(std::optional<int64_t> v) { return v ? std::to_string(*v) : std::string("more than 2^63"); }

/// One weight matrix [rows, cols] against the largest tensor; `fix` names the keys to lower.
Error checkWeight(StringRef what, StringRef rowsName, int64_t rows, StringRef colsName, int64_t cols, StringRef fix) {
  std::optional<int64_t> elements = product({rows, cols});
  if (elements && *elements <= limits::kTensorElements)
    return Error::success();
  return fail(what + " [" + rowsName + " " + Twine(rows) + ", " + colsName + " " + Twine(cols) + "] has " +
              text(elements) + " elements, more than the " + Twine(limits::kTensorElements) +
              " (2^40) one tensor may have; lower " + fix);
}

struct LayerParameters {
  int64_t moe = 0, dense = 0; // one layer of each kind (moe: 0 without experts)
  int64_t embeddings = 0;
  /// Every layer's: each kind's count times its layers (checked by the caller where it can overflow).
  std::optional<int64_t> layers(const ModelSpec &s) const {
    std::optional<int64_t> m = checkedMul(s.numMoeLayers(), moe), d = checkedMul(s.numLayers - s.numMoeLayers(), dense);
    return m && d ? checkedAdd(*m, *d) : std::nullopt;
  }
};

/// Parameters of one layer of each kind (with the mixture of experts, and with a dense MLP), and
/// of the embeddings (with `vocabRows` rows, the LM head and the final norm). Every size is within
/// its own limit (< 2^25), so each term is < 2^50.
LayerParameters layerAndEmbeddingParameters(const ModelSpec &s, int64_t vocabRows) {
  const int64_t H = s.hiddenSize, F = s.ffnHiddenSize, kv = s.numQueryGroups * s.headDim();
  const bool swiglu = s.activation == "swiglu";
  const bool qkvBias = s.addBiasLinear || s.addQkvBias;
  const int64_t Q = s.queryWidth();
  const int64_t attention = H * (Q + 2 * kv) + Q * H + (qkvBias ? Q + 2 * kv : 0) + (s.addBiasLinear ? H : 0);
  // A mixture of experts: the router [experts, H] and each expert's three SwiGLU weights
  // (checkSpecSize bounded the stacked weight [experts, ffn, H] by 2^40).
  const int64_t experts = s.numExperts * H + s.numExperts * 3 * H * s.expertFfnHiddenSize();
  const int64_t shared = s.moeSharedExpertIntermediateSize ? 3 * H * s.moeSharedExpertIntermediateSize + H : 0;
  const int64_t dense = (swiglu ? 3 : 2) * H * F + (s.addBiasLinear ? F + H : 0);
  LayerParameters p;
  p.dense = attention + dense + 4 * H; // two norms, weights and biases
  p.moe = s.isMixtureOfExperts() ? attention + experts + shared + 4 * H : 0;
  p.embeddings = vocabRows * H * (s.tieEmbeddings ? 1 : 2) + 2 * H; // + the final norm
  if (s.positionEmbeddingType == "learned")
    p.embeddings += s.maxPositionEmbeddings * H;
  return p;
}

/// Parameters of the whole model with `vocabRows` rows in the embedding (and LM head).
Error checkParameters(const ModelSpec &s, int64_t vocabRows, StringRef vocabName) {
  // Only the products with num_layers and the sums need checking.
  const LayerParameters p = layerAndEmbeddingParameters(s, vocabRows);
  std::optional<int64_t> layers = p.layers(s);
  std::optional<int64_t> total = layers ? checkedAdd(*layers, p.embeddings) : layers;
  if (total && *total <= limits::kParameters)
    return Error::success();
  return fail("the model has " + text(total) + " parameters (num_layers " + Twine(s.numLayers) + " x " +
              Twine(s.isMixtureOfExperts() ? p.moe : p.dense) + " per layer + " + Twine(p.embeddings) +
              " in the embeddings, " + vocabName + " " + Twine(vocabRows) + "), more than the " +
              Twine(limits::kParameters) + " (2^44) megac compiles; lower num_layers, hidden_size or ffn_hidden_size");
}

} // namespace

Error megac::checkSpecSize(const ModelSpec &s) {
  const int64_t H = s.hiddenSize, kv = s.numQueryGroups * s.headDim();
  if (Error e = checkWeight("the attention's query/key/value weight", "hidden_size", H,
                            "(num_attention_heads + 2 x num_query_groups) x head dim", s.queryWidth() + 2 * kv,
                            "hidden_size (or num_query_groups, kv_channels)"))
    return e;
  if (Error e = checkWeight("the MLP's weight", "hidden_size", H, "ffn_hidden_size", s.ffnHiddenSize,
                            "hidden_size or ffn_hidden_size"))
    return e;
  if (Error e = checkWeight("the embedding", "vocab_size", s.vocabSize, "hidden_size", H, "vocab_size or hidden_size"))
    return e;
  if (s.isMixtureOfExperts()) {
    std::optional<int64_t> expertWidth = product({s.numExperts, s.expertFfnHiddenSize()});
    if (Error e = checkWeight("the experts' stacked weight", "num_experts x moe_ffn_hidden_size",
                              expertWidth.value_or(limits::kTensorElements + 1), "hidden_size", H,
                              "num_experts, moe_ffn_hidden_size or hidden_size"))
      return e;
  }
  if (s.positionEmbeddingType == "learned")
    if (Error e = checkWeight("the position embedding", "max_position_embeddings", s.maxPositionEmbeddings,
                              "hidden_size", H, "max_position_embeddings or hidden_size"))
      return e;
  return checkParameters(s, s.vocabSize, "vocab_size");
}

Error megac::checkProgramSize(const ModelSpec &s, const ParallelPlan &plan, int64_t microBatch) {
  // The divisor (< 2^17) times tp (< 2^21) and the vocabulary (< 2^25): no overflow.
  const int64_t padded = plan.paddedVocab(s.vocabSize);
  if (padded > limits::kVocabSize)
    return fail("the vocabulary padded to a multiple of --make-vocab-size-divisible-by (" +
                Twine(plan.makeVocabSizeDivisibleBy) + ") x tensor parallel size (" + Twine(plan.tp) + ") is " +
                Twine(padded) + " rows, more than the " + Twine(limits::kVocabSize) +
                " (2^24) megac allows; lower --make-vocab-size-divisible-by (1 pads only as tp needs)");
  if (Error e = checkWeight("the padded embedding", "padded vocabulary", padded, "hidden_size", s.hiddenSize,
                            "--make-vocab-size-divisible-by, vocab_size or hidden_size"))
    return e;
  if (Error e = checkParameters(s, padded, "padded vocabulary"))
    return e;
  // The frontend's IR is unsharded: its widest activation is [micro batch, seq, width].
  const int64_t kv = s.numQueryGroups * s.headDim();
  const int64_t width = std::max({s.queryWidth() + 2 * kv, s.hiddenSize, s.ffnHiddenSize, padded});
  // The experts' rows: each token once per choice ([tokens x top k, expert ffn]).
  std::optional<int64_t> expertRows =
      s.isMixtureOfExperts() ? product({microBatch, s.seqLength, s.moeRouterTopk, s.expertFfnHiddenSize()}) : 0;
  if (!expertRows || *expertRows > limits::kTensorElements)
    return fail("the experts' rows of a microbatch, [--micro-batch-size " + Twine(microBatch) + " x seq_length " +
                Twine(s.seqLength) + " x moe_router_topk " + Twine(s.moeRouterTopk) + ", " +
                Twine(s.expertFfnHiddenSize()) + "], have " + text(expertRows) + " elements, more than the " +
                Twine(limits::kTensorElements) +
                " (2^40) one tensor may have; lower --micro-batch-size, seq_length or moe_router_topk");
  std::optional<int64_t> activation = product({microBatch, s.seqLength, width});
  if (!activation || *activation > limits::kTensorElements)
    return fail("the largest activation of a microbatch, [--micro-batch-size " + Twine(microBatch) + ", seq_length " +
                Twine(s.seqLength) + ", " + Twine(width) + "], has " + text(activation) + " elements, more than the " +
                Twine(limits::kTensorElements) +
                " (2^40) one tensor may have; lower --micro-batch-size or seq_length (or the widest of hidden_size, "
                "ffn_hidden_size and vocab_size)");
  std::optional<int64_t> attention = product({microBatch, s.seqLength, s.seqLength, s.hiddenSize});
  if (!attention || *attention > limits::kAttentionWork)
    return fail("the attention of a microbatch, --micro-batch-size " + Twine(microBatch) + " x seq_length^2 (" +
                Twine(s.seqLength) + "^2) x hidden_size " + Twine(s.hiddenSize) + " = " + text(attention) +
                " multiply-adds, is more than the " + Twine(limits::kAttentionWork) +
                " (2^60) megac allows; lower --micro-batch-size or seq_length");
  return Error::success();
}

int64_t megac::layerParameters(const ModelSpec &s) {
  const LayerParameters p = layerAndEmbeddingParameters(s, s.vocabSize);
  if (!s.isMixtureOfExperts())
    return p.dense;
  return s.numMoeLayers() == s.numLayers ? p.moe : std::min(p.moe, p.dense);
}

int64_t megac::parameterCount(const ModelSpec &s) {
  const LayerParameters p = layerAndEmbeddingParameters(s, s.vocabSize);
  return *p.layers(s) + p.embeddings; // checkSpecSize bounded it by 2^44
}
