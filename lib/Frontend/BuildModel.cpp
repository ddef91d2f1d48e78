// Spec -> `tx` IR. Parameter names and layouts follow Hugging Face's GPT2LMHeadModel and
// LlamaForCausalLM, so checkpoints load in `transformers` without conversion. Every value is
// named (a NameLoc: the dumps print `%ln_1 = tx.layer_norm ...`) and located at the spec key
// that decides it.
#include "megac/Frontend/BuildModel.h"
#include "megac/Frontend/ModelFlops.h"
#include "megac/Plan/PlanIR.h"
#include "megac/Plan/PlanDialect.h"
#include "tx/TxNames.h"
#include "tx/TxOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/IR/Builders.h"

#include <cmath>
#include <optional>

using namespace mlir;
using namespace megac;

namespace {

/// A parameter's role in Megatron's tensor-parallel placement and the dimension it splits.
struct Placement {
  tx::ParamRole role;
  std::optional<int64_t> dim;
};

/// A parameter of the layer function: its checkpoint name after the layer prefix, and where it
/// sits in its checkpoint tensor when that tensor is fused (GPT-2's c_attn holds the blocks q, k
/// and v).
struct LayerParam {
  std::string name, block;
  SmallVector<int64_t> shape;
  Placement placement;
  tx::ParamInit init;
  std::optional<double> std;
  SmallVector<int64_t> offsets, fullShape;
};

/// "attn.c_attn.weight" -> "attn_c_attn_weight": the name as an identifier of the IR and the C++.
std::string identifier(StringRef name) {
  std::string id = name.str();
  for (char &c : id)
    if (c == '.')
      c = '_';
  return id;
}

/// A parameter block's value name: the checkpoint name, and the block of a fused tensor.
std::string blockName(StringRef name, StringRef block) {
  return block.empty() ? name.str() : (name + "." + block).str();
}

class ModelBuilder {
public:
  ModelBuilder(MLIRContext &context, const ModelSpec &spec, int64_t microBatch, int64_t globalBatch, int64_t paddedVocab)
      : b(&context), s(spec), gpt2(spec.family == "gpt2"), bert(spec.isEncoder()), microBatch(microBatch), B(globalBatch), S(spec.seqLength), H(spec.hiddenSize),
        heads(spec.numAttentionHeads), groups(spec.numQueryGroups), D(spec.headDim()), Q(spec.queryWidth()),
        F(spec.ffnHiddenSize),
        V(spec.vocabSize), Vp(paddedVocab), outputStd(0.02 / std::sqrt(2.0 * spec.numLayers)) {}

  OwningOpRef<ModuleOp> build() {
    OwningOpRef<ModuleOp> module = ModuleOp::create(keyLoc("family"));
    module->getOperation()->setAttr(names::kModelAttr, modelAttr());
    b.setInsertionPointToEnd(module->getBody());
    // One layer function per kind: the mixture of experts' (or the dense model's) layer, and with
    // moe_layer_freq the dense layers' beside it.
    experts = s.isMixtureOfExperts();
    collectLayerParams();
    layers.push_back({buildLayer("transformer_layer"), std::move(layerParams)});
    if (s.numMoeLayers() != 0 && s.numMoeLayers() != s.numLayers) {
      experts = false;
      layerParams.clear();
      collectLayerParams();
      layers.push_back({buildLayer("transformer_layer_dense"), std::move(layerParams)});
    }
    buildForward();
    return module;
  }

private:
  RankedTensorType f32(ArrayRef<int64_t> shape) { return RankedTensorType::get(shape, b.getF32Type()); }

  /// Where spec key `key` stands in the file; a key the file leaves out takes the family's
  /// default, so it points at `family`.
  Location keyLoc(StringRef key) {
    auto it = s.keyLines.find(key.str());
    if (it == s.keyLines.end())
      it = s.keyLines.find("family");
    unsigned line = it == s.keyLines.end() ? 0 : it->second;
    return FileLineColLoc::get(b.getStringAttr(s.path), line, 1);
  }
  /// The location of a value named `name` that spec key `key` decides.
  Location at(StringRef name, StringRef key) { return NameLoc::get(b.getStringAttr(name), keyLoc(key)); }

  DictionaryAttr modelAttr() {
    auto i64 = [&](int64_t v) { return b.getI64IntegerAttr(v); };
    SmallVector<NamedAttribute> fields{
        b.getNamedAttr("family", b.getStringAttr(s.family)),
        b.getNamedAttr("num_layers", i64(s.numLayers)),
        b.getNamedAttr("hidden_size", i64(H)),
        b.getNamedAttr("seq_length", i64(S)),
        b.getNamedAttr("vocab_size", i64(V)),
        b.getNamedAttr("micro_batch_size", i64(microBatch)),
        // A count of FLOPs (2 per multiply-add): an integer, printed as one.
        b.getNamedAttr("flops_per_sample", i64(std::llround(modelFlopsPerSample(s)))),
    };
    if (bert) // the runtime masks its batches (ProgramDesc::masked_lm)
      fields.push_back(b.getNamedAttr("masked_lm", b.getUnitAttr()));
    return b.getDictionaryAttr(fields);
  }

  // ---- parameters ---------------------------------------------------------------------------

  void addParam(std::string name, std::string block, ArrayRef<int64_t> shape, Placement placement, tx::ParamInit init,
                std::optional<double> std = std::nullopt, ArrayRef<int64_t> offsets = {},
                ArrayRef<int64_t> fullShape = {}) {
    layerParams.push_back({std::move(name), std::move(block), SmallVector<int64_t>(shape), placement, init, std,
                           SmallVector<int64_t>(offsets), SmallVector<int64_t>(fullShape)});
  }
  void addParam(const std::string &name, ArrayRef<int64_t> shape, Placement placement, tx::ParamInit init,
                std::optional<double> std = std::nullopt) {
    addParam(name, "", shape, placement, init, std);
  }

  /// A norm's weight starts at 1, or at 0 where it scales by 1 + w (Gemma's).
  tx::ParamInit normWeightInit() const {
    return s.normWeightsCentredAtZero() ? tx::ParamInit::Zeros : tx::ParamInit::Ones;
  }
  FloatAttr normWeightOffset() { return s.normWeightsCentredAtZero() ? b.getF64FloatAttr(1.0) : FloatAttr(); }

  void addNorm(StringRef name) {
    addParam((name + ".weight").str(), {H}, {tx::ParamRole::Norm}, normWeightInit());
    if (s.normalization == "LayerNorm")
      addParam((name + ".bias").str(), {H}, {tx::ParamRole::Norm}, tx::ParamInit::Zeros);
  }

  enum class Parallel { Column, Row };

  /// Where Megatron's placement splits a linear layer's weight: column-parallel on the output
  /// features, row-parallel on the input features, in the family's layout (GPT-2's Conv1D is
  /// [in, out], Llama's Linear [out, in]).
  Placement weightPlacement(Parallel parallel) {
    bool column = parallel == Parallel::Column;
    int64_t outDim = gpt2 ? 1 : 0, inDim = 1 - outDim;
    return column ? Placement{tx::ParamRole::ColumnParallelWeight, outDim}
                  : Placement{tx::ParamRole::RowParallelWeight, inDim};
  }
  /// A column-parallel bias is split like its outputs; a row-parallel one is added once, whole.
  static Placement biasPlacement(Parallel parallel) {
    return parallel == Parallel::Column ? Placement{tx::ParamRole::ColumnParallelBias, 0}
                                        : Placement{tx::ParamRole::RowParallelBias, std::nullopt};
  }

  void addLinear(StringRef name, int64_t in, int64_t out, double std, Parallel parallel, bool bias) {
    addParam((name + ".weight").str(), gpt2 ? SmallVector<int64_t>{in, out} : SmallVector<int64_t>{out, in},
             weightPlacement(parallel), tx::ParamInit::Normal, std);
    if (bias)
      addParam((name + ".bias").str(), {out}, biasPlacement(parallel), tx::ParamInit::Zeros);
  }

  void collectLayerParams() {
    int64_t kv = groups * D;
    if (bert) { // in the order of HF's modules; the norms before (Megatron) or after (BERT) their blocks
      if (!s.normAfterResidual())
        addNorm("attention.ln");
      addLinear("attention.self.query", H, Q, 0.02, Parallel::Column, true);
      addLinear("attention.self.key", H, kv, 0.02, Parallel::Column, true);
      addLinear("attention.self.value", H, kv, 0.02, Parallel::Column, true);
      addLinear("attention.output.dense", Q, H, outputStd, Parallel::Row, true);
      addNorm(s.normAfterResidual() ? "attention.output.LayerNorm" : "ln");
      addLinear("intermediate.dense", H, F, 0.02, Parallel::Column, true);
      addLinear("output.dense", F, H, outputStd, Parallel::Row, true);
      if (s.normAfterResidual())
        addNorm("output.LayerNorm");
    } else if (gpt2) {
      addNorm("ln_1");
      // c_attn [H, H + 2 kv] holds [q | k | v] by columns: one block each.
      int64_t fused = Q + 2 * kv;
      int64_t start[3] = {0, Q, Q + kv}, width[3] = {Q, kv, kv};
      const char *block[3] = {"q", "k", "v"};
      for (int i = 0; i < 3; ++i)
        addParam("attn.c_attn.weight", block[i], {H, width[i]}, weightPlacement(Parallel::Column),
                 tx::ParamInit::Normal, 0.02, {0, start[i]}, {H, fused});
      if (s.addBiasLinear)
        for (int i = 0; i < 3; ++i)
          addParam("attn.c_attn.bias", block[i], {width[i]}, biasPlacement(Parallel::Column), tx::ParamInit::Zeros,
                   std::nullopt, {start[i]}, {fused});
      addLinear("attn.c_proj", Q, H, outputStd, Parallel::Row, s.addBiasLinear);
      addNorm("ln_2");
      addLinear("mlp.c_fc", H, F, 0.02, Parallel::Column, s.addBiasLinear);
      addLinear("mlp.c_proj", F, H, outputStd, Parallel::Row, s.addBiasLinear);
    } else {
      addNorm("input_layernorm");
      addLinear("self_attn.q_proj", H, Q, 0.02, Parallel::Column, qkvBias());
      addLinear("self_attn.k_proj", H, kv, 0.02, Parallel::Column, qkvBias());
      addLinear("self_attn.v_proj", H, kv, 0.02, Parallel::Column, qkvBias());
      addLinear("self_attn.o_proj", Q, H, outputStd, Parallel::Row, s.addBiasLinear);
      addNorm("post_attention_layernorm");
      if (experts) {
        addExperts();
        return;
      }
      addLinear("mlp.gate_proj", H, F, 0.02, Parallel::Column, s.addBiasLinear);
      addLinear("mlp.up_proj", H, F, 0.02, Parallel::Column, s.addBiasLinear);
      addLinear("mlp.down_proj", F, H, outputStd, Parallel::Row, s.addBiasLinear);
    }
  }

  /// The experts' checkpoint names: Mixtral's block_sparse_moe (w1 the gate, w2 down, w3 up) or
  /// Qwen2-MoE's mlp (gate_proj, down_proj, up_proj), with its shared expert.
  bool qwenExperts() const { return s.family == "qwen2_moe"; }
  std::string expertName(StringRef projection) const {
    if (!qwenExperts())
      return ("block_sparse_moe.experts.*." + projection + ".weight").str();
    StringRef qwen = projection == "w1" ? "gate_proj" : projection == "w2" ? "down_proj" : "up_proj";
    return ("mlp.experts.*." + qwen + ".weight").str();
  }

  /// The router's gate [experts, hidden] and each expert's gate (w1), down (w2) and up (w3) weights
  /// in Linear's [out, in] layout, stacked over the experts (the checkpoint holds
  /// experts.<e>.w1.weight for each e: `*` in the name); Qwen2-MoE's shared expert (a SwiGLU MLP,
  /// split as Megatron's) and its gate [1, hidden] after them. Expert tensor parallelism splits each
  /// expert's ffn as a dense MLP's: gate and up on their rows, down on its columns.
  void addExperts() {
    const int64_t E = s.numExperts, Fe = s.expertFfnHiddenSize();
    const Placement router{tx::ParamRole::Router};
    addParam(qwenExperts() ? "mlp.gate.weight" : "block_sparse_moe.gate.weight", {E, H}, router,
             tx::ParamInit::Normal, 0.02);
    const Placement expertColumns{tx::ParamRole::ExpertWeight, 1}, expertRows{tx::ParamRole::ExpertWeight, 2};
    addParam(expertName("w1"), {E, Fe, H}, expertColumns, tx::ParamInit::Normal, 0.02);
    addParam(expertName("w2"), {E, H, Fe}, expertRows, tx::ParamInit::Normal, outputStd);
    addParam(expertName("w3"), {E, Fe, H}, expertColumns, tx::ParamInit::Normal, 0.02);
    if (!s.moeSharedExpertIntermediateSize)
      return;
    const int64_t Fs = s.moeSharedExpertIntermediateSize;
    addLinear("mlp.shared_expert.gate_proj", H, Fs, 0.02, Parallel::Column, false);
    addLinear("mlp.shared_expert.up_proj", H, Fs, 0.02, Parallel::Column, false);
    addLinear("mlp.shared_expert.down_proj", Fs, H, outputStd, Parallel::Row, false);
    addParam("mlp.shared_expert_gate.weight", {1, H}, router, tx::ParamInit::Normal, 0.02);
  }

  /// VocabParallelEmbedding's table: split on the vocabulary.
  Value vocabTable(const std::string &name) {
    Placement vocab{tx::ParamRole::VocabEmbedding, 0};
    if (Vp == V)
      return declareParam(name, {V, H}, vocab, tx::ParamInit::Normal, 0.02);
    return declareParam(name, {Vp, H}, vocab, tx::ParamInit::Normal, 0.02, {0, 0}, {V, H}, /*padded=*/true);
  }

  /// `block` names the block of a fused checkpoint tensor (GPT-2's c_attn q, k, v).
  Value declareParam(const std::string &name, ArrayRef<int64_t> shape, Placement placement, tx::ParamInit init,
                     std::optional<double> std = std::nullopt, ArrayRef<int64_t> offsets = {},
                     ArrayRef<int64_t> fullShape = {}, bool padded = false, StringRef block = "") {
    DenseI64ArrayAttr offsetsAttr, fullAttr;
    if (!offsets.empty()) {
      offsetsAttr = b.getDenseI64ArrayAttr(offsets);
      fullAttr = b.getDenseI64ArrayAttr(fullShape);
    }
    FloatAttr stdAttr = std ? b.getF64FloatAttr(*std) : FloatAttr();
    return tx::ParamOp::create(b, at(blockName(name, block), "hidden_size"), f32(shape), b.getStringAttr(name),
                               offsetsAttr, fullAttr, padded ? b.getUnitAttr() : UnitAttr(),
                               tx::ParamRoleAttr::get(b.getContext(), placement.role),
                               placement.dim ? b.getI64IntegerAttr(*placement.dim) : IntegerAttr(),
                               tx::ParamInitAttr::get(b.getContext(), init), stdAttr, UnitAttr(),
                               IntegerAttr());
  }

  // ---- layer --------------------------------------------------------------------------------

  /// Takes the layer function's parameter arguments in the order collectLayerParams made them.
  struct ArgCursor {
    Block::BlockArgListType args;
    unsigned next; // after x and the carried values
    Value take() { return args[next++]; }
  };

  /// Whether the layers carry their routers' load (a mixture of experts whose load-balancing
  /// loss is trained on): [2, experts] summed over the layers (transformers'), or the sum of the
  /// layers' own losses (Megatron's aux_loss).
  bool carriesLoad() const {
    return s.isMixtureOfExperts() && s.moeAuxLossCoeff > 0.0 && s.moeRouterLoadBalancingType != "none";
  }
  bool globalLoad() const { return s.moeRouterLoadBalancingType == "global_aux_loss"; }
  /// The tokens of one data-parallel rank's microbatch: a load-balancing loss is each rank's own
  /// (its tokens' routing, as Megatron and transformers under DDP compute it), so every plan with
  /// the same micro batch trains the single rank's objective.
  double rankTokens() const { return double(microBatch) * double(S); }
  /// The choices an expert keeps of one rank's microbatch (Megatron's get_capacity of tokens x top
  /// k): ceil(tokens x k / experts x moe_expert_capacity_factor); dropless: every token.
  int64_t expertCapacity() const {
    const double tokens = rankTokens();
    if (s.moeExpertCapacityFactor <= 0.0)
      return int64_t(tokens);
    const double c = std::ceil(tokens * double(s.moeRouterTopk) / double(s.numExperts) * s.moeExpertCapacityFactor);
    return int64_t(std::min(c, tokens));
  }
  RankedTensorType loadType() { return globalLoad() ? f32({2, s.numExperts}) : f32({}); }
  /// Whether the layers carry the sum of their routers' z-losses (trained on).
  bool carriesZLoss() const { return s.isMixtureOfExperts() && s.moeZLossCoeff > 0.0; }

  /// What each layer takes after x and returns after its output, summed over the layers: the
  /// routers' load, their z-losses.
  struct Carried {
    Value load, zLoss;
    SmallVector<Value> values() const {
      SmallVector<Value> v;
      for (Value c : {load, zLoss})
        if (c)
          v.push_back(c);
      return v;
    }
  };
  SmallVector<Type> carriedTypes() {
    SmallVector<Type> types;
    if (carriesLoad())
      types.push_back(loadType());
    if (carriesZLoss())
      types.push_back(f32({}));
    return types;
  }
  /// `values` (as carriedTypes() orders them) as a Carried.
  Carried carried(ValueRange values) {
    Carried c;
    unsigned i = 0;
    if (carriesLoad())
      c.load = values[i++];
    if (carriesZLoss())
      c.zLoss = values[i++];
    return c;
  }

  Value norm(ArgCursor &p, Value x, StringRef name) {
    Location loc = at(name, "normalization");
    Value w = p.take();
    if (s.normalization == "LayerNorm")
      return tx::LayerNormOp::create(b, loc, x.getType(), x, w, p.take(), b.getF64FloatAttr(s.normEpsilon));
    return tx::RmsNormOp::create(b, loc, x.getType(), x, w, b.getF64FloatAttr(s.normEpsilon), normWeightOffset());
  }

  /// x @ w (+ bias): the product is `name` without a bias, `name`_gemm with one.
  Value linear(Value x, Value w, Value bias, int64_t out, StringRef name, StringRef key) {
    SmallVector<int64_t> shape(cast<RankedTensorType>(x.getType()).getShape());
    shape.back() = out;
    Value y = tx::MatmulOp::create(b, at(bias ? (name + "_gemm").str() : name, key), f32(shape), x, w, UnitAttr(),
                                   gpt2 ? UnitAttr() : b.getUnitAttr(), FloatAttr());
    return bias ? tx::AddOp::create(b, at(name, "add_bias_linear"), y, bias).getResult() : y;
  }

  Value linear(ArgCursor &p, Value x, int64_t out, StringRef name, StringRef key, bool bias) {
    Value w = p.take();
    return linear(x, w, bias ? p.take() : Value(), out, name, key);
  }
  Value linear(ArgCursor &p, Value x, int64_t out, StringRef name, StringRef key) {
    return linear(p, x, out, name, key, s.addBiasLinear);
  }
  /// Whether q, k and v have biases: with every linear layer's, or alone (Qwen2).
  bool qkvBias() const { return s.addBiasLinear || s.addQkvBias; }

  Value reshape(Value x, ArrayRef<int64_t> shape, StringRef name, StringRef key) {
    return tx::ReshapeOp::create(b, at(name, key), f32(shape), x);
  }

  /// [B, S, n * D] -> [B, S, n, D], rotated by position with rope.
  Value heads4(Value x, int64_t n, StringRef name, StringRef key) {
    Value y = reshape(x, {B, S, n, D}, (name + "_heads").str(), key);
    if (s.positionEmbeddingType == "rope")
      y = tx::RopeOp::create(b, at((name + "_rope").str(), "rotary_base"), y.getType(), y,
                             b.getF64FloatAttr(s.rotaryBaseFor(S)), UnitAttr(),
                             s.ropeScalingType == "linear" ? b.getF64FloatAttr(s.ropeScalingFactor) : FloatAttr());
    return y;
  }

  /// Megatron's hidden dropout (before each residual add, and after the embeddings): none at rate 0.
  Value hiddenDropout(Value x, int64_t stream, StringRef name) {
    if (s.hiddenDropout == 0.0)
      return x;
    return tx::DropoutOp::create(b, at(name, "hidden_dropout"), x, b.getF64FloatAttr(s.hiddenDropout),
                                 b.getI64IntegerAttr(stream));
  }

  /// BERT's layer: bidirectional attention and a GELU (erf) MLP, each added to the residual and
  /// then normed (BertForMaskedLM), or normed first (MegatronBertForMaskedLM).
  Value encoderLayer(ArgCursor &p, Value x) {
    const bool post = s.normAfterResidual();
    int64_t kv = groups * D;
    Value h = post ? x : norm(p, x, "attention_ln");
    Value q = linear(p, h, Q, "q", "num_attention_heads", true), k = linear(p, h, kv, "k", "num_query_groups", true),
          v = linear(p, h, kv, "v", "num_query_groups", true);
    Value attn = tx::AttentionOp::create(
        b, at("attn", "num_attention_heads"), f32({B, S, heads, D}), heads4(q, heads, "q", "num_attention_heads"),
        heads4(k, groups, "k", "num_query_groups"), reshape(v, {B, S, groups, D}, "v_heads", "num_query_groups"),
        UnitAttr(), IntegerAttr(), b.getF64FloatAttr(1.0 / std::sqrt(static_cast<double>(D))),
        s.attentionDropout > 0.0 ? b.getF64FloatAttr(s.attentionDropout) : FloatAttr());
    Value o = linear(p, reshape(attn, {B, S, Q}, "attn_merged", "num_attention_heads"), H, "attn_proj", "hidden_size");
    o = hiddenDropout(o, names::kAttentionOutputDropoutStream, "attn_proj_dropout");
    Value r1 = tx::AddOp::create(b, at("residual_1", "num_layers"), x, o);
    if (post)
      r1 = norm(p, r1, "attention_output_ln");
    Value h2 = post ? r1 : norm(p, r1, "mlp_ln");
    Value u = linear(p, h2, F, "fc", "ffn_hidden_size");
    Value m = linear(p, tx::GeluOp::create(b, at("fc_gelu", "activation"), u, tx::GeluApproximation::Erf), H,
                     "fc_proj", "ffn_hidden_size");
    m = hiddenDropout(m, names::kMlpOutputDropoutStream, "mlp_dropout");
    Value r2 = tx::AddOp::create(b, at("residual_2", "num_layers"), r1, m);
    return post ? norm(p, r2, "output_ln") : r2;
  }

  RankedTensorType i32(ArrayRef<int64_t> shape) { return RankedTensorType::get(shape, b.getI32Type()); }

  /// Dropless top-k routing to experts with SwiGLU MLPs (MixtralSparseMoeBlock): each token's
  /// rows go to its experts in expert order, each expert's rows through its weights in one grouped
  /// GEMM per projection, and back, summed with the router's weights.
  Value mixtureOfExperts(ArgCursor &p, Value h, Carried &carry) {
    Value &load = carry.load;
    const int64_t T = B * S, E = s.numExperts, K = s.moeRouterTopk, Fe = s.expertFfnHiddenSize(), R = T * K;
    Value gate = p.take(), w1 = p.take(), w2 = p.take(), w3 = p.take();
    Value x = reshape(h, {T, H}, "moe_tokens", "num_experts");
    Value logits = tx::MatmulOp::create(b, at("router_logits", "num_experts"), f32({T, E}), x, gate, UnitAttr(),
                                        b.getUnitAttr(), FloatAttr());
    if (carry.zLoss) // ST-MoE's router z-loss: the mean over the tokens of logsumexp(logits)^2
      carry.zLoss = tx::AddOp::create(b, at("z_loss", "moe_z_loss_coeff"), carry.zLoss,
                                      tx::RouterZLossOp::create(b, at("router_z_loss", "moe_z_loss_coeff"), f32({}),
                                                                logits));
    auto route = tx::MoeRouteOp::create(b, at("route", "moe_router_topk"), f32({T, E}), i32({T, K}), f32({T, K}),
                                        logits, b.getI64IntegerAttr(K),
                                        s.moeRouterPreSoftmax ? b.getUnitAttr() : UnitAttr());
    auto assign = tx::MoeAssignOp::create(b, at("assign", "num_experts"), i32({T, K}), i32({E}), route.getExperts());
    // The router's load counts every choice, dropped or not (Megatron's aux loss sees the routing
    // before the capacity).
    const Value routedCounts = assign.getCounts();
    Value weights = route.getWeights();
    const int64_t capacity = expertCapacity();
    if (capacity < int64_t(rankTokens())) { // an expert may get more: each keeps `capacity` choices
      const StringRef key = "moe_expert_capacity_factor";
      auto drop = tx::MoeDropOp::create(b, at("drop", key), i32({T, K}), f32({T, K}), route.getExperts(), weights,
                                        b.getI64IntegerAttr(capacity), b.getI64IntegerAttr(E),
                                        s.moeTokenDropPolicy == "position" ? b.getUnitAttr() : UnitAttr());
      weights = tx::MulOp::create(b, at("kept_weights", key), weights, drop.getMask());
      assign = tx::MoeAssignOp::create(b, at("assign_kept", key), i32({T, K}), i32({E}), drop.getKept());
    }
    Value rows = assign.getRows(), counts = assign.getCounts();
    tx::RecordExpertLoadOp::create(b, at("expert_load", "num_experts"), counts); // the load histogram
    if (load) { // the router's load, for the load-balancing loss
      Value mine = tx::RouterLoadOp::create(b, at("router_load", "moe_router_load_balancing_type"), f32({2, E}),
                                            route.getProbs(), routedCounts);
      if (!globalLoad()) { // Megatron's: this layer's loss, experts / (tokens^2 x top k) x sum_e count_e prob_e
        const double tokens = rankTokens();
        mine = tx::LoadBalancingLossOp::create(b, at("layer_aux_loss", "moe_router_load_balancing_type"), f32({}), mine,
                                               b.getF64FloatAttr(double(E) / (tokens * tokens * double(K))));
      }
      load = tx::AddOp::create(b, at("load", "moe_router_load_balancing_type"), load, mine);
    }
    Value xe = tx::MoeScatterOp::create(b, at("expert_tokens", "moe_router_topk"), f32({R, H}), x, rows, Value());
    auto grouped = [&](Value in, Value w, int64_t out, StringRef name) -> Value {
      return tx::GroupedMatmulOp::create(b, at(name, "moe_ffn_hidden_size"), f32({R, out}), in, w, counts,
                                         b.getUnitAttr());
    };
    Value expertGate = grouped(xe, w1, Fe, "expert_gate"), expertUp = grouped(xe, w3, Fe, "expert_up");
    Value gated = tx::SwigluOp::create(b, at("expert_swiglu", "activation"), expertGate, expertUp);
    Value ye = grouped(gated, w2, H, "expert_down");
    Value y = tx::MoeGatherOp::create(b, at("moe", "moe_router_topk"), f32({T, H}), ye, rows, weights);
    if (s.moeSharedExpertIntermediateSize) { // Qwen2-MoE: every token through the shared expert too, gated
      const StringRef key = "moe_shared_expert_intermediate_size";
      const int64_t Fs = s.moeSharedExpertIntermediateSize;
      Value sharedGate = linear(p, h, Fs, "shared_gate", key); // the parameters in order: gate, then up
      Value sharedUp = linear(p, h, Fs, "shared_up", key);
      Value gateUp = tx::SwigluOp::create(b, at("shared_swiglu", "activation"), sharedGate, sharedUp);
      Value shared = reshape(linear(p, gateUp, H, "shared_down", key), {T, H}, "shared_tokens", key);
      Value gate = tx::MatmulOp::create(b, at("shared_gate_logit", "moe_shared_expert_gate"), f32({T, 1}), x, p.take(),
                                        UnitAttr(), b.getUnitAttr(), FloatAttr());
      Value gated = tx::GateRowsOp::create(b, at("shared_expert", "moe_shared_expert_gate"), shared, gate);
      y = tx::AddOp::create(b, at("moe_with_shared", key), y, gated);
    }
    return reshape(y, {B, S, H}, "moe_out", "num_experts");
  }

  func::FuncOp buildLayer(StringRef name) {
    SmallVector<Type> inputs{f32({B, S, H})}, outputs{f32({B, S, H})};
    for (Type t : carriedTypes()) {
      inputs.push_back(t);
      outputs.push_back(t);
    }
    for (const LayerParam &p : layerParams)
      inputs.push_back(f32(p.shape));
    auto fn = func::FuncOp::create(b, keyLoc("num_layers"), name, b.getFunctionType(inputs, outputs));
    fn.setPrivate();
    setRole(fn, FunctionRole::Layer);
    OpBuilder::InsertionGuard guard(b);
    Block *body = fn.addEntryBlock();
    body->getArgument(0).setLoc(at("x", "hidden_size"));
    const unsigned firstParam = 1 + carriedTypes().size();
    Carried carry = carried(body->getArguments().slice(1, firstParam - 1)); // what the layers sum
    if (carry.load)
      carry.load.setLoc(at("load_in", "moe_router_load_balancing_type"));
    if (carry.zLoss)
      carry.zLoss.setLoc(at("z_loss_in", "moe_z_loss_coeff"));
    for (auto [arg, p] : llvm::zip_equal(body->getArguments().drop_front(firstParam), layerParams))
      arg.setLoc(at(identifier(blockName(p.name, p.block)), "hidden_size"));
    b.setInsertionPointToEnd(body);
    ArgCursor p{fn.getArguments(), firstParam};
    Value x = fn.getArgument(0);
    int64_t kv = groups * D;
    if (bert) {
      func::ReturnOp::create(b, keyLoc("num_layers"), encoderLayer(p, x));
      return fn;
    }

    Value h = norm(p, x, gpt2 ? "ln_1" : "input_layernorm");
    Value q, k, v;
    if (gpt2) { // weights first, then biases, as in the checkpoint's fused c_attn
      Value wq = p.take(), wk = p.take(), wv = p.take();
      Value bq, bk, bv;
      if (s.addBiasLinear)
        bq = p.take(), bk = p.take(), bv = p.take();
      q = linear(h, wq, bq, Q, "q", "num_attention_heads");
      k = linear(h, wk, bk, kv, "k", "num_query_groups");
      v = linear(h, wv, bv, kv, "v", "num_query_groups");
    } else {
      q = linear(p, h, Q, "q", "num_attention_heads", qkvBias());
      k = linear(p, h, kv, "k", "num_query_groups", qkvBias());
      v = linear(p, h, kv, "v", "num_query_groups", qkvBias());
    }
    Value attn = tx::AttentionOp::create(
        b, at("attn", "num_attention_heads"), f32({B, S, heads, D}), heads4(q, heads, "q", "num_attention_heads"),
        heads4(k, groups, "k", "num_query_groups"), reshape(v, {B, S, groups, D}, "v_heads", "num_query_groups"),
        b.getUnitAttr(), s.slidingWindow ? b.getI64IntegerAttr(s.slidingWindow) : IntegerAttr(),
        b.getF64FloatAttr(1.0 / std::sqrt(static_cast<double>(D))),
        s.attentionDropout > 0.0 ? b.getF64FloatAttr(s.attentionDropout) : FloatAttr());
    Value o = linear(p, reshape(attn, {B, S, Q}, "attn_merged", "num_attention_heads"), H, "attn_proj", "hidden_size");
    o = hiddenDropout(o, names::kAttentionOutputDropoutStream, "attn_proj_dropout");
    Value r1 = tx::AddOp::create(b, at("residual_1", "num_layers"), x, o);

    Value h2 = norm(p, r1, gpt2 ? "ln_2" : "post_attention_layernorm");
    Value m;
    if (experts) {
      m = mixtureOfExperts(p, h2, carry);
    } else if (s.activation == "gelu") {
      Value u = linear(p, h2, F, "fc", "ffn_hidden_size");
      m = linear(p, tx::GeluOp::create(b, at("fc_gelu", "activation"), u, tx::GeluApproximation::Tanh), H, "fc_proj",
                 "ffn_hidden_size");
    } else if (s.activation == "geglu") { // Gemma: gelu_pytorch_tanh(gate) * up
      Value gate = linear(p, h2, F, "gate", "ffn_hidden_size"), up = linear(p, h2, F, "up", "ffn_hidden_size");
      Value gated = tx::GeluOp::create(b, at("gate_gelu", "activation"), gate, tx::GeluApproximation::Tanh);
      m = linear(p, tx::MulOp::create(b, at("geglu", "activation"), gated, up), H, "down", "ffn_hidden_size");
    } else {
      Value gate = linear(p, h2, F, "gate", "ffn_hidden_size"), up = linear(p, h2, F, "up", "ffn_hidden_size");
      m = linear(p, tx::SwigluOp::create(b, at("swiglu", "activation"), gate, up), H, "down", "ffn_hidden_size");
    }
    m = hiddenDropout(m, names::kMlpOutputDropoutStream, "mlp_dropout");
    Value r2 = tx::AddOp::create(b, at("residual_2", "num_layers"), r1, m);
    SmallVector<Value> results{r2};
    results.append(carry.values());
    func::ReturnOp::create(b, keyLoc("num_layers"), results);
    return fn;
  }

  // ---- whole model --------------------------------------------------------------------------

  std::string layerPrefix(int64_t i) {
    return (gpt2 ? "transformer.h." : bert ? "bert.encoder.layer." : "model.layers.") + std::to_string(i) + ".";
  }

  Value finalNorm(Value x) {
    return namedNorm(x, gpt2 ? "transformer.ln_f" : bert ? "bert.encoder.ln" : "model.norm",
                     gpt2 ? "ln_f" : "norm");
  }

  /// A norm outside the layers: its parameters `name`.weight (and .bias), its value `value`.
  Value namedNorm(Value x, const std::string &name, StringRef value) {
    Location loc = at(value, "normalization");
    Value w = declareParam(name + ".weight", {H}, {tx::ParamRole::Norm}, normWeightInit());
    if (s.normalization == "LayerNorm")
      return tx::LayerNormOp::create(b, loc, x.getType(), x, w,
                                     declareParam(name + ".bias", {H}, {tx::ParamRole::Norm}, tx::ParamInit::Zeros),
                                     b.getF64FloatAttr(s.normEpsilon));
    return tx::RmsNormOp::create(b, loc, x.getType(), x, w, b.getF64FloatAttr(s.normEpsilon), normWeightOffset());
  }

  /// BERT's embeddings after words and positions: every token of type 0 (one segment) adds the
  /// type table's row 0; BertForMaskedLM then norms them (MegatronBert does not).
  Value tokenTypes(Value x) {
    Value table = declareParam("bert.embeddings.token_type_embeddings.weight", {s.numTokentypes, H},
                               {tx::ParamRole::PositionEmbedding}, tx::ParamInit::Normal, 0.02);
    Value row = tx::SliceOp::create(b, at("token_type_0", "num_tokentypes"), f32({1, H}), table, 0, 0);
    x = tx::AddOp::create(b, at("embeddings_typed", "num_tokentypes"), x,
                          reshape(row, {H}, "token_type_row", "num_tokentypes"));
    return s.normAfterResidual() ? namedNorm(x, "bert.embeddings.LayerNorm", "embeddings_ln") : x;
  }

  /// BERT's masked-LM head and loss: the transform (dense, GELU, LayerNorm), the decoder tied to
  /// the word embeddings plus its own bias, cross-entropy over the masked positions only (the
  /// others are labelled -100, transformers' ignore_index).
  Value maskedLmLoss(Value x, Value wte, Value labels) {
    Value w = declareParam("cls.predictions.transform.dense.weight", {H, H}, {tx::ParamRole::Norm},
                           tx::ParamInit::Normal, 0.02);
    Value bias = declareParam("cls.predictions.transform.dense.bias", {H}, {tx::ParamRole::Norm}, tx::ParamInit::Zeros);
    Value t = linear(x, w, bias, H, "mlm_transform", "hidden_size");
    t = tx::GeluOp::create(b, at("mlm_gelu", "activation"), t, tx::GeluApproximation::Erf);
    t = namedNorm(t, "cls.predictions.transform.LayerNorm", "mlm_ln");
    Value logits = tx::MatmulOp::create(b, at("logits_gemm", "vocab_size"), f32({B, S, Vp}), t, wte, UnitAttr(),
                                        b.getUnitAttr(), FloatAttr());
    Placement vocab{tx::ParamRole::ColumnParallelBias, 0};
    Value decoderBias = Vp == V ? declareParam("cls.predictions.bias", {V}, vocab, tx::ParamInit::Zeros)
                                : declareParam("cls.predictions.bias", {Vp}, vocab, tx::ParamInit::Zeros,
                                               std::nullopt, {0}, {V}, /*padded=*/true);
    logits = tx::AddOp::create(b, at("logits", "vocab_size"), logits, decoderBias);
    return tx::CrossEntropyOp::create(b, at("loss", "vocab_size"), f32({}), logits, labels,
                                      Vp == V ? IntegerAttr() : b.getI64IntegerAttr(V),
                                      b.getI64IntegerAttr(names::kIgnoredLabel));
  }

  /// The load-balancing loss, trained on beside the language model's: transformers'
  /// load_balancing_loss_func over all layers' loads at once (experts / (tokens x layers)^2), or
  /// the sum of Megatron's per-layer losses; moe_aux_loss_coeff times it joins the objective.
  void addLoadBalancingLoss(Value load) {
    Location loc = at("load_balancing_loss", "moe_router_load_balancing_type");
    if (globalLoad()) {
      const double rows = rankTokens() * double(s.numLayers);
      load = tx::LoadBalancingLossOp::create(b, loc, f32({}), load,
                                             b.getF64FloatAttr(double(s.numExperts) / (rows * rows)));
    }
    tx::MetricOp::create(b, loc, load, tx::Metric::LoadBalancingLoss);
    tx::AddLossOp::create(b, at("aux_loss", "moe_aux_loss_coeff"), load, b.getF64FloatAttr(s.moeAuxLossCoeff));
  }

  void buildForward() {
    auto ids = RankedTensorType::get({B, S}, b.getI32Type());
    auto fn = func::FuncOp::create(b, keyLoc("family"), names::kForwardEntry, b.getFunctionType({ids, ids}, {f32({})}));
    setRole(fn, FunctionRole::Model);
    OpBuilder::InsertionGuard guard(b);
    Block *body = fn.addEntryBlock();
    body->getArgument(0).setLoc(at("ids", "seq_length"));
    body->getArgument(1).setLoc(at("labels", "seq_length"));
    b.setInsertionPointToEnd(body);

    Value wte = vocabTable(gpt2 ? "transformer.wte.weight"
                           : bert ? "bert.embeddings.word_embeddings.weight"
                                  : "model.embed_tokens.weight");
    Value x =
        tx::EmbeddingOp::create(b, at("tokens", "vocab_size"), f32({B, S, H}), wte, fn.getArgument(0), UnitAttr());
    if (s.scalesEmbeddings()) // sqrt(hidden_size) rounded to float32 first, as transformers' normalizer is
      x = tx::ScaleOp::create(b, at("tokens_scaled", "hidden_size"), x,
                              b.getF64FloatAttr(static_cast<float>(std::sqrt(static_cast<double>(H)))));
    if (s.positionEmbeddingType == "learned") {
      int64_t maxPos = s.maxPositionEmbeddings;
      Value wpe = declareParam(bert ? "bert.embeddings.position_embeddings.weight" : "transformer.wpe.weight",
                               {maxPos, H}, {tx::ParamRole::PositionEmbedding}, tx::ParamInit::Normal, 0.02);
      if (maxPos != S) // positions 0 .. S-1 of the table
        wpe = tx::SliceOp::create(b, at("positions", "seq_length"), f32({S, H}), wpe, 0, 0);
      x = tx::AddOp::create(b, at("embeddings", "position_embedding_type"), x, wpe);
    }
    if (bert)
      x = tokenTypes(x);
    x = hiddenDropout(x, names::kEmbeddingDropoutStream, "embeddings_dropout");
    Carried carry;
    if (carriesLoad())
      carry.load = tx::ZerosOp::create(b, at("load", "moe_router_load_balancing_type"), loadType());
    if (carriesZLoss())
      carry.zLoss = tx::ZerosOp::create(b, at("z_loss", "moe_z_loss_coeff"), f32({}));
    for (int64_t i = 0; i < s.numLayers; ++i) {
      const LayerKind &kind = layers[s.isMixtureOfExperts() && !s.isMoeLayer(i) ? 1 : 0];
      SmallVector<Value> operands{x};
      operands.append(carry.values());
      for (const LayerParam &p : kind.params)
        operands.push_back(declareParam(layerPrefix(i) + p.name, p.shape, p.placement, p.init, p.std, p.offsets,
                                        p.fullShape, /*padded=*/false, p.block));
      auto call = func::CallOp::create(b, at("layer_" + std::to_string(i), "num_layers"), kind.fn, operands);
      call->setAttr(names::kLayerIndexAttr, b.getI64IntegerAttr(i));
      x = call.getResult(0);
      carry = carried(call.getResults().drop_front());
    }
    if (bert) {
      func::ReturnOp::create(b, keyLoc("family"), maskedLmLoss(s.normAfterResidual() ? x : finalNorm(x), wte,
                                                                fn.getArgument(1)));
      return;
    }
    x = finalNorm(x);
    Value head = s.tieEmbeddings ? wte : vocabTable("lm_head.weight");
    Value logits =
        tx::MatmulOp::create(b, at("logits", "vocab_size"), f32({B, S, Vp}), x, head, UnitAttr(), b.getUnitAttr(),
                             FloatAttr());
    Value loss = tx::CrossEntropyOp::create(b, at("loss", "vocab_size"), f32({}), logits, fn.getArgument(1),
                                            Vp == V ? IntegerAttr() : b.getI64IntegerAttr(V), IntegerAttr());
    if (carry.load)
      addLoadBalancingLoss(carry.load);
    if (carry.zLoss) { // Megatron's: each layer's, summed
      tx::MetricOp::create(b, at("z_loss", "moe_z_loss_coeff"), carry.zLoss, tx::Metric::ZLoss);
      tx::AddLossOp::create(b, at("z_loss", "moe_z_loss_coeff"), carry.zLoss, b.getF64FloatAttr(s.moeZLossCoeff));
    }
    func::ReturnOp::create(b, keyLoc("family"), loss);
  }

  OpBuilder b;
  const ModelSpec &s;
  bool gpt2; // GPT-2's layout: Conv1D [in, out] weights, transformer.* names
  bool bert; // BERT's encoder: bert.* names, bidirectional attention, the masked-LM head
  int64_t microBatch; // per data-parallel rank
  int64_t B, S, H, heads, groups, D, Q, F, V, Vp; // B: the batch of every data-parallel rank; Q: heads x D
  double outputStd;
  // The layer kind being built (its MLP the mixture of experts) and its parameters.
  bool experts = false;
  std::vector<LayerParam> layerParams;
  struct LayerKind {
    func::FuncOp fn;
    std::vector<LayerParam> params;
  };
  std::vector<LayerKind> layers; // the mixture's (or the dense model's) layer, then a dense one
};

} // namespace

OwningOpRef<ModuleOp> megac::buildModel(MLIRContext &context, const ModelSpec &spec, const ParallelPlan &plan,
                                        int64_t microBatchSize) {
  context.loadDialect<tx::TxDialect, func::FuncDialect, shard::ShardDialect, MegacDialect>();
  // The global batch (every data-parallel rank's): megac-shard-localize makes it one rank's.
  OwningOpRef<ModuleOp> module =
      ModelBuilder(context, spec, microBatchSize, microBatchSize * plan.dp, plan.paddedVocab(spec.vocabSize)).build();
  recordPlan(*module, plan);
  return module;
}
