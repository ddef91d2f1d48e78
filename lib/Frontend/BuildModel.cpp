// Spec -> `tx` IR. Parameter names and layouts follow Hugging Face's GPT2LMHeadModel and
// LlamaForCausalLM, so checkpoints load in `transformers` without conversion.
#include "megac/Frontend/BuildModel.h"
#include "megac/Frontend/ModelFlops.h"
#include "megac/Frontend/PlanIR.h"
#include "tx/TxNames.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/IR/Builders.h"
#include "tx/TxOps.h"

#include <cmath>
#include <optional>

using namespace mlir;
using namespace megac;

namespace {

/// A parameter of the layer function: its name after the layer prefix, and where it sits in
/// its checkpoint tensor when that tensor is fused (GPT-2's c_attn holds q, k and v).
/// A parameter's role in Megatron's tensor-parallel placement and the dimension it splits.
struct Placement {
  tx::ParamRole role;
  std::optional<int64_t> dim;
};

struct LayerParam {
  std::string name;
  SmallVector<int64_t> shape;
  Placement placement;
  tx::ParamInit init;
  std::optional<double> std;
  SmallVector<int64_t> offsets, fullShape;
};

class ModelBuilder {
public:
  ModelBuilder(MLIRContext &context, const ModelSpec &spec, int64_t microBatch, int64_t paddedVocab)
      : b(&context), loc(b.getUnknownLoc()), s(spec), gpt2(spec.family == "gpt2"),
        B(microBatch), S(spec.seqLength), H(spec.hiddenSize), heads(spec.numAttentionHeads),
        groups(spec.numQueryGroups), D(spec.headDim()), F(spec.ffnHiddenSize), V(spec.vocabSize), Vp(paddedVocab),
        outputStd(0.02 / std::sqrt(2.0 * spec.numLayers)) {}

  OwningOpRef<ModuleOp> build() {
    OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
    module->getOperation()->setAttr(names::kModelAttr, modelAttr());
    b.setInsertionPointToEnd(module->getBody());
    collectLayerParams();
    func::FuncOp layer = buildLayer();
    buildForward(layer);
    return module;
  }

private:
  RankedTensorType f32(ArrayRef<int64_t> shape) { return RankedTensorType::get(shape, b.getF32Type()); }

  DictionaryAttr modelAttr() {
    auto i64 = [&](int64_t v) { return b.getI64IntegerAttr(v); };
    return b.getDictionaryAttr({
        b.getNamedAttr("family", b.getStringAttr(s.family)),
        b.getNamedAttr("num_layers", i64(s.numLayers)),
        b.getNamedAttr("hidden_size", i64(H)),
        b.getNamedAttr("seq_length", i64(S)),
        b.getNamedAttr("vocab_size", i64(V)),
        b.getNamedAttr("micro_batch_size", i64(B)),
        // A count of multiply-adds: an integer, printed as one.
        b.getNamedAttr("flops_per_sample", i64(std::llround(modelFlopsPerSample(s)))),
    });
  }

  // ---- parameters ---------------------------------------------------------------------------

  void addParam(std::string name, ArrayRef<int64_t> shape, Placement placement, tx::ParamInit init,
                std::optional<double> std = std::nullopt, ArrayRef<int64_t> offsets = {},
                ArrayRef<int64_t> fullShape = {}) {
    layerParams.push_back({std::move(name), SmallVector<int64_t>(shape), placement, init, std,
                           SmallVector<int64_t>(offsets), SmallVector<int64_t>(fullShape)});
  }

  void addNorm(StringRef name) {
    addParam((name + ".weight").str(), {H}, {tx::ParamRole::Norm}, tx::ParamInit::Ones);
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

  void addLinear(StringRef name, int64_t in, int64_t out, double std, Parallel parallel) {
    addParam((name + ".weight").str(), gpt2 ? SmallVector<int64_t>{in, out} : SmallVector<int64_t>{out, in},
             weightPlacement(parallel), tx::ParamInit::Normal, std);
    if (s.addBiasLinear)
      addParam((name + ".bias").str(), {out}, biasPlacement(parallel), tx::ParamInit::Zeros);
  }

  void collectLayerParams() {
    int64_t kv = groups * D;
    if (gpt2) {
      addNorm("ln_1");
      // c_attn [H, H + 2 kv] holds [q | k | v] by columns: one block each.
      int64_t fused = H + 2 * kv;
      int64_t start[3] = {0, H, H + kv}, width[3] = {H, kv, kv};
      for (int i = 0; i < 3; ++i)
        addParam("attn.c_attn.weight", {H, width[i]}, weightPlacement(Parallel::Column), tx::ParamInit::Normal, 0.02,
                 {0, start[i]}, {H, fused});
      if (s.addBiasLinear)
        for (int i = 0; i < 3; ++i)
          addParam("attn.c_attn.bias", {width[i]}, biasPlacement(Parallel::Column), tx::ParamInit::Zeros,
                   std::nullopt, {start[i]}, {fused});
      addLinear("attn.c_proj", H, H, outputStd, Parallel::Row);
      addNorm("ln_2");
      addLinear("mlp.c_fc", H, F, 0.02, Parallel::Column);
      addLinear("mlp.c_proj", F, H, outputStd, Parallel::Row);
    } else {
      addNorm("input_layernorm");
      addLinear("self_attn.q_proj", H, H, 0.02, Parallel::Column);
      addLinear("self_attn.k_proj", H, kv, 0.02, Parallel::Column);
      addLinear("self_attn.v_proj", H, kv, 0.02, Parallel::Column);
      addLinear("self_attn.o_proj", H, H, outputStd, Parallel::Row);
      addNorm("post_attention_layernorm");
      addLinear("mlp.gate_proj", H, F, 0.02, Parallel::Column);
      addLinear("mlp.up_proj", H, F, 0.02, Parallel::Column);
      addLinear("mlp.down_proj", F, H, outputStd, Parallel::Row);
    }
  }

  /// A [vocab, hidden] table with the padded vocabulary's rows; the checkpoint has V of them.
  /// VocabParallelEmbedding's table: split on the vocabulary.
  Value vocabTable(const std::string &name) {
    Placement vocab{tx::ParamRole::VocabEmbedding, 0};
    if (Vp == V)
      return declareParam(name, {V, H}, vocab, tx::ParamInit::Normal, 0.02);
    return declareParam(name, {Vp, H}, vocab, tx::ParamInit::Normal, 0.02, {0, 0}, {V, H}, /*padded=*/true);
  }

  Value declareParam(const std::string &name, ArrayRef<int64_t> shape, Placement placement, tx::ParamInit init,
                     std::optional<double> std = std::nullopt, ArrayRef<int64_t> offsets = {},
                     ArrayRef<int64_t> fullShape = {}, bool padded = false) {
    DenseI64ArrayAttr offsetsAttr, fullAttr;
    if (!offsets.empty()) {
      offsetsAttr = b.getDenseI64ArrayAttr(offsets);
      fullAttr = b.getDenseI64ArrayAttr(fullShape);
    }
    FloatAttr stdAttr = std ? b.getF64FloatAttr(*std) : FloatAttr();
    return tx::ParamOp::create(b, loc, f32(shape), b.getStringAttr(name), offsetsAttr, fullAttr,
                               padded ? b.getUnitAttr() : UnitAttr(),
                               tx::ParamRoleAttr::get(b.getContext(), placement.role),
                               placement.dim ? b.getI64IntegerAttr(*placement.dim) : IntegerAttr(), IntegerAttr(),
                               tx::ParamInitAttr::get(b.getContext(), init), stdAttr);
  }

  // ---- layer --------------------------------------------------------------------------------

  /// Takes the layer function's parameter arguments in the order collectLayerParams made them.
  struct ArgCursor {
    Block::BlockArgListType args;
    unsigned next = 1; // 0 is x
    Value take() { return args[next++]; }
  };

  Value norm(ArgCursor &p, Value x) {
    Value w = p.take();
    if (s.normalization == "LayerNorm")
      return tx::LayerNormOp::create(b, loc, x.getType(), x, w, p.take(), b.getF64FloatAttr(s.normEpsilon));
    return tx::RmsNormOp::create(b, loc, x.getType(), x, w, b.getF64FloatAttr(s.normEpsilon));
  }

  Value linear(Value x, Value w, Value bias, int64_t out) {
    SmallVector<int64_t> shape(cast<RankedTensorType>(x.getType()).getShape());
    shape.back() = out;
    Value y = tx::MatmulOp::create(b, loc, f32(shape), x, w, UnitAttr(),
                                   gpt2 ? UnitAttr() : b.getUnitAttr());
    return bias ? tx::AddOp::create(b, loc, y, bias).getResult() : y;
  }

  Value linear(ArgCursor &p, Value x, int64_t out) {
    Value w = p.take();
    return linear(x, w, s.addBiasLinear ? p.take() : Value(), out);
  }

  Value reshape(Value x, ArrayRef<int64_t> shape) { return tx::ReshapeOp::create(b, loc, f32(shape), x); }

  Value heads4(Value x, int64_t n) {
    Value y = reshape(x, {B, S, n, D});
    if (s.positionEmbeddingType == "rope")
      y = tx::RopeOp::create(b, loc, y.getType(), y, b.getF64FloatAttr(s.rotaryBase), UnitAttr());
    return y;
  }

  func::FuncOp buildLayer() {
    SmallVector<Type> inputs{f32({B, S, H})};
    for (const LayerParam &p : layerParams)
      inputs.push_back(f32(p.shape));
    auto fn = func::FuncOp::create(b, loc, "transformer_layer", b.getFunctionType(inputs, {f32({B, S, H})}));
    fn.setPrivate();
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToEnd(fn.addEntryBlock());
    ArgCursor p{fn.getArguments()};
    Value x = fn.getArgument(0);
    int64_t kv = groups * D;

    Value h = norm(p, x);
    Value q, k, v;
    if (gpt2) { // weights first, then biases, as in the checkpoint's fused c_attn
      Value wq = p.take(), wk = p.take(), wv = p.take();
      Value bq, bk, bv;
      if (s.addBiasLinear)
        bq = p.take(), bk = p.take(), bv = p.take();
      q = linear(h, wq, bq, H), k = linear(h, wk, bk, kv), v = linear(h, wv, bv, kv);
    } else {
      q = linear(p, h, H), k = linear(p, h, kv), v = linear(p, h, kv);
    }
    Value attn = tx::AttentionOp::create(b, loc, f32({B, S, heads, D}), heads4(q, heads), heads4(k, groups),
                                         reshape(v, {B, S, groups, D}), b.getUnitAttr(),
                                         b.getF64FloatAttr(1.0 / std::sqrt(static_cast<double>(D))));
    Value o = linear(p, reshape(attn, {B, S, H}), H);
    Value r1 = tx::AddOp::create(b, loc, x, o);

    Value h2 = norm(p, r1);
    Value m;
    if (s.activation == "gelu") {
      Value u = linear(p, h2, F);
      m = linear(p, tx::GeluOp::create(b, loc, u, tx::GeluApproximation::Tanh), H);
    } else {
      Value gate = linear(p, h2, F), up = linear(p, h2, F);
      m = linear(p, tx::SwigluOp::create(b, loc, gate, up), H);
    }
    Value r2 = tx::AddOp::create(b, loc, r1, m);
    func::ReturnOp::create(b, loc, r2);
    return fn;
  }

  // ---- whole model --------------------------------------------------------------------------

  std::string layerPrefix(int64_t i) {
    return (gpt2 ? "transformer.h." : "model.layers.") + std::to_string(i) + ".";
  }

  Value finalNorm(Value x) {
    std::string name = gpt2 ? "transformer.ln_f" : "model.norm";
    Value w = declareParam(name + ".weight", {H}, {tx::ParamRole::Norm}, tx::ParamInit::Ones);
    if (s.normalization == "LayerNorm")
      return tx::LayerNormOp::create(b, loc, x.getType(), x, w,
                                     declareParam(name + ".bias", {H}, {tx::ParamRole::Norm}, tx::ParamInit::Zeros),
                                     b.getF64FloatAttr(s.normEpsilon));
    return tx::RmsNormOp::create(b, loc, x.getType(), x, w, b.getF64FloatAttr(s.normEpsilon));
  }

  void buildForward(func::FuncOp layer) {
    auto ids = RankedTensorType::get({B, S}, b.getI32Type());
    auto fn = func::FuncOp::create(b, loc, "forward", b.getFunctionType({ids, ids}, {f32({})}));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToEnd(fn.addEntryBlock());

    Value wte = vocabTable(gpt2 ? "transformer.wte.weight" : "model.embed_tokens.weight");
    Value x = tx::EmbeddingOp::create(b, loc, f32({B, S, H}), wte, fn.getArgument(0), UnitAttr());
    if (s.positionEmbeddingType == "learned") {
      int64_t maxPos = s.maxPositionEmbeddings;
      Value wpe = declareParam("transformer.wpe.weight", {maxPos, H}, {tx::ParamRole::PositionEmbedding},
                               tx::ParamInit::Normal, 0.02);
      if (maxPos != S) // positions 0 .. S-1 of the table
        wpe = tx::SliceOp::create(b, loc, f32({S, H}), wpe, 0, 0);
      x = tx::AddOp::create(b, loc, x, wpe);
    }
    for (int64_t i = 0; i < s.numLayers; ++i) {
      SmallVector<Value> operands{x};
      for (const LayerParam &p : layerParams)
        operands.push_back(
            declareParam(layerPrefix(i) + p.name, p.shape, p.placement, p.init, p.std, p.offsets, p.fullShape));
      x = func::CallOp::create(b, loc, layer, operands).getResult(0);
    }
    x = finalNorm(x);
    Value head = s.tieEmbeddings ? wte : vocabTable("lm_head.weight");
    Value logits = tx::MatmulOp::create(b, loc, f32({B, S, Vp}), x, head, UnitAttr(), b.getUnitAttr());
    Value loss = tx::CrossEntropyOp::create(b, loc, f32({}), logits, fn.getArgument(1),
                                            Vp == V ? IntegerAttr() : b.getI64IntegerAttr(V));
    func::ReturnOp::create(b, loc, loss);
  }

  OpBuilder b;
  Location loc;
  const ModelSpec &s;
  bool gpt2;
  int64_t B, S, H, heads, groups, D, F, V, Vp;
  double outputStd;
  std::vector<LayerParam> layerParams;
};

} // namespace

OwningOpRef<ModuleOp> megac::buildModel(MLIRContext &context, const ModelSpec &spec, const ParallelPlan &plan,
                                        int64_t microBatchSize) {
  context.loadDialect<tx::TxDialect, func::FuncDialect, shard::ShardDialect>();
  OwningOpRef<ModuleOp> module = ModelBuilder(context, spec, microBatchSize, plan.paddedVocab(spec.vocabSize)).build();
  recordPlan(*module, plan);
  return module;
}
