// megac-lora: PEFT's LoRA on the frontend's forward (see Passes.td).
#include "megac/Plan/PlanIR.h"
#include "megac/Transforms/Passes.h"
#include "tx/TxLocations.h"
#include "tx/TxNames.h"
#include "tx/TxOps.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

namespace megac {
#define GEN_PASS_DEF_LORA
#include "megac/Transforms/Passes.h.inc"
} // namespace megac

using namespace mlir;
using namespace megac;

namespace {

constexpr StringLiteral kPass = "megac-lora";
/// PEFT's prefix of every adapter tensor (PeftModel wraps the model as base_model.model).
constexpr StringLiteral kPeftPrefix = "base_model.model.";

/// One block of an adapted module's weight: the layer function's argument, the base product
/// that reads it, and the value the adapter is added to (the product, or its bias add).
struct AdaptedBlock {
  unsigned arg;
  tx::MatmulOp product;
  Value output;
  int64_t outStart = 0; // where the block's output features start in the module's
};

/// An adapted module of a layer: its blocks (GPT-2's c_attn has q, k and v) and what its
/// adapters are in Megatron's placement.
struct AdaptedModule {
  std::string path; // "attn.c_attn"
  SmallVector<AdaptedBlock> blocks;
  Value input;
  int64_t in = 0, fullOut = 0;
  bool fused = false;    // blocks of one checkpoint tensor
  bool rowParallel = false;
  unsigned aArg = 0;     // the new arguments: A, then one B per block
};

/// "transformer.h.3.attn.c_attn.weight" of layer 3 -> "attn.c_attn.weight"; "" when the name
/// does not have the layer's index as a component.
StringRef pathInLayer(StringRef name, int64_t layer) {
  const std::string component = "." + std::to_string(layer) + ".";
  size_t at = name.find(component);
  return at == StringRef::npos ? StringRef() : name.drop_front(at + component.size());
}

StringRef layerPrefix(StringRef name, StringRef path) { return name.drop_back(path.size()); }

std::string identifier(StringRef path) {
  std::string id = path.str();
  llvm::replace(id, '.', '_');
  return id;
}

RankedTensorType tensor(Type element, ArrayRef<int64_t> shape) { return RankedTensorType::get(shape, element); }

struct LoraPass : public megac::impl::LoraBase<LoraPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<ParallelPlan> plan = readPlan(module, kPass);
    if (failed(plan))
      return signalPassFailure();
    if (!plan->lora.enabled())
      return markAllAnalysesPreserved();
    lora = plan->lora;
    auto forward = module.lookupSymbol<func::FuncOp>(names::kForwardEntry);
    if (!forward) {
      module.emitError() << kPass << ": no @" << names::kForwardEntry
                         << " to add adapters to (it runs on the frontend's module, before megac-autodiff)";
      return signalPassFailure();
    }
    module.walk([](tx::ParamOp p) { p.setFrozen(true); }); // PEFT freezes the whole base model
    llvm::MapVector<func::FuncOp, SmallVector<func::CallOp>> layers;
    for (auto call : forward.getBody().getOps<func::CallOp>())
      if (call->hasAttr(names::kLayerIndexAttr))
        if (auto fn = module.lookupSymbol<func::FuncOp>(call.getCallee()))
          layers[fn].push_back(call);
    if (layers.empty()) {
      forward.emitOpError() << kPass << ": calls no layer function (a call with " << names::kLayerIndexAttr
                            << ") to add adapters to";
      return signalPassFailure();
    }
    for (auto &[fn, calls] : layers)
      if (failed(adapt(fn, calls)))
        return signalPassFailure();
  }

  LogicalResult adapt(func::FuncOp fn, ArrayRef<func::CallOp> calls) {
    func::CallOp first = calls.front();
    const int64_t layer = first->getAttrOfType<IntegerAttr>(names::kLayerIndexAttr).getInt();
    // Every parameter argument is frozen; the targeted weights are found by their path.
    SmallVector<AdaptedModule> modules;
    for (const std::string &path : lora.modules)
      modules.push_back({path, {}, {}, 0, 0, false, false, 0});
    for (unsigned j = 0; j < first.getNumOperands(); ++j) {
      auto param = first.getOperand(j).getDefiningOp<tx::ParamOp>();
      if (!param)
        continue;
      fn.setArgAttr(j, names::kFrozenArgAttr, UnitAttr::get(fn.getContext()));
      StringRef path = pathInLayer(param.getName(), layer);
      for (AdaptedModule &m : modules)
        if (path == m.path + ".weight" && failed(addBlock(fn, j, param, m)))
          return failure();
    }
    for (AdaptedModule &m : modules)
      if (m.blocks.empty())
        return fn.emitOpError() << kPass << ": lora_target_modules names " << m.path
                                << ", but no argument of the layer is its weight (" << m.path << ".weight)";
    for (auto [index, m] : llvm::enumerate(modules))
      insertAdapter(fn, m, static_cast<int64_t>(index));
    for (func::CallOp call : calls)
      if (failed(passAdapters(call, modules)))
        return failure();
    if (lora.nf4Block > 0)
      quantizeBase(fn, calls);
    return success();
  }

  /// QLoRA: every frozen linear weight of the layer (a column- or row-parallel matrix) is kept in
  /// NF4 (its tx.params get `nf4`), and each product that reads it reads a tx.nf4_dequantize
  /// made just before it.
  void quantizeBase(func::FuncOp fn, ArrayRef<func::CallOp> calls) {
    Builder attrs(fn.getContext());
    func::CallOp first = calls.front();
    for (unsigned j = 0; j < first.getNumOperands(); ++j) {
      auto param = first.getOperand(j).getDefiningOp<tx::ParamOp>();
      std::optional<tx::ParamRole> role = param ? param.getRole() : std::nullopt;
      if (!param || !param.getFrozen() || param.getType().getRank() != 2 ||
          (role != tx::ParamRole::ColumnParallelWeight && role != tx::ParamRole::RowParallelWeight))
        continue;
      for (func::CallOp call : calls)
        if (auto p = call.getOperand(j).getDefiningOp<tx::ParamOp>())
          p.setNf4BlockAttr(attrs.getI64IntegerAttr(lora.nf4Block));
      Value weight = fn.getArgument(j);
      for (OpOperand &use : llvm::make_early_inc_range(weight.getUses())) {
        OpBuilder b(use.getOwner());
        Value dequantized = tx::Nf4DequantizeOp::create(
            b, tx::derivedLoc(weight, tx::valueName(weight).str() + "_dequantized", kPass), weight);
        use.set(dequantized);
      }
    }
  }

  /// Block `arg` of module `m`: its base product and where the adapter's output goes.
  LogicalResult addBlock(func::FuncOp fn, unsigned arg, tx::ParamOp param, AdaptedModule &m) {
    Value weight = fn.getArgument(arg);
    auto products = llvm::to_vector(weight.getUsers());
    auto product = products.size() == 1 ? dyn_cast<tx::MatmulOp>(products[0]) : tx::MatmulOp();
    if (!product || product.getRhs() != weight || product.getTransposeLhs() || product.getScale())
      return fn.emitOpError() << kPass << ": " << param.getName()
                              << " must be read by exactly one tx.matmul as its (untransposed) weight to be adapted";
    std::optional<tx::ParamRole> role = param.getRole();
    if (role != tx::ParamRole::ColumnParallelWeight && role != tx::ParamRole::RowParallelWeight)
      return param.emitOpError() << kPass << ": " << m.path << " is not a linear layer's weight (role "
                                 << (role ? tx::stringifyParamRole(*role) : "none") << ")";
    if (m.input && m.input != product.getLhs())
      return product.emitOpError() << kPass << ": the blocks of " << m.path << " read different inputs";
    ArrayRef<int64_t> w = param.getType().getShape();
    const unsigned outDim = product.getTransposeRhs() ? 0 : 1;
    AdaptedBlock block{arg, product, product.getResult()};
    // The bias add after the product (PEFT adds the adapter to the base layer's whole output).
    if (product->hasOneUse())
      if (auto add = dyn_cast<tx::AddOp>(*product->getUsers().begin());
          add && add.getLhs() == product.getResult() && cast<RankedTensorType>(add.getRhs().getType()).getRank() == 1)
        block.output = add.getResult();
    m.input = product.getLhs();
    m.in = w[1 - outDim];
    m.rowParallel = role == tx::ParamRole::RowParallelWeight;
    if (param.getOffsets()) { // a block of a fused checkpoint tensor
      block.outStart = (*param.getOffsets())[outDim];
      m.fullOut = (*param.getFullShape())[outDim];
      m.fused = true;
    } else {
      m.fullOut = w[outDim];
    }
    m.blocks.push_back(block);
    return success();
  }

  /// y + (dropout(x) A^T B^T) * scaling in the layer function, A and B new arguments.
  void insertAdapter(func::FuncOp fn, AdaptedModule &m, int64_t index) {
    // Read again: an adapter inserted before this one may have rewired the module's input (a
    // module reading another adapted module's output reads it adapted, as PEFT computes it).
    m.input = m.blocks.front().product.getLhs();
    Type element = cast<RankedTensorType>(m.input.getType()).getElementType();
    const std::string id = identifier(m.path);
    m.aArg = fn.getNumArguments();
    Location argLoc = tx::derivedLoc(fn.getArgument(m.blocks.front().arg), id + "_lora_A_weight", kPass);
    (void)fn.insertArgument(m.aArg, tensor(element, {lora.rank, m.in}), {}, argLoc);
    for (const AdaptedBlock &block : m.blocks) {
      int64_t out = cast<RankedTensorType>(block.output.getType()).getShape().back();
      // A fused module's blocks as the base's are named: attn_c_attn_weight_q -> ..._lora_B_weight_q.
      StringRef baseName = tx::valueName(fn.getArgument(block.arg));
      std::string suffix = baseName.starts_with(id + "_weight") ? baseName.drop_front(id.size() + 7).str() : "";
      Location loc = tx::derivedLoc(fn.getArgument(block.arg), id + "_lora_B_weight" + suffix, kPass);
      (void)fn.insertArgument(fn.getNumArguments(), tensor(element, {out, lora.rank}), {}, loc);
    }
    // x A^T once, right after the module's first product (every block's input is defined there).
    tx::MatmulOp earliest = m.blocks.front().product;
    for (const AdaptedBlock &b : m.blocks)
      if (b.product->isBeforeInBlock(earliest))
        earliest = b.product;
    OpBuilder b(earliest->getContext());
    b.setInsertionPointAfter(earliest);
    Value x = m.input;
    if (lora.dropout > 0)
      x = tx::DropoutOp::create(b, tx::derivedLoc(m.input, id + "_lora_dropout", kPass), x,
                                b.getF64FloatAttr(lora.dropout), b.getI64IntegerAttr(names::kLoraDropoutStream + index));
    SmallVector<int64_t> shape(cast<RankedTensorType>(x.getType()).getShape());
    shape.back() = lora.rank;
    Value down = tx::MatmulOp::create(b, tx::derivedLoc(m.input, id + "_lora_a", kPass), tensor(element, shape), x,
                                      fn.getArgument(m.aArg), UnitAttr(), b.getUnitAttr(), FloatAttr());
    for (auto [i, block] : llvm::enumerate(m.blocks)) {
      Operation *after = block.output.getDefiningOp();
      b.setInsertionPointAfter(after->isBeforeInBlock(down.getDefiningOp()) ? down.getDefiningOp() : after);
      std::string name = tx::valueName(block.output).str();
      Value up = tx::MatmulOp::create(b, tx::derivedLoc(block.output, name + "_lora_b", kPass), block.output.getType(),
                                      down, fn.getArgument(m.aArg + 1 + i), UnitAttr(), b.getUnitAttr(),
                                      b.getF64FloatAttr(lora.scaling()));
      auto sum = tx::AddOp::create(b, tx::derivedLoc(block.output, name + "_lora", kPass), block.output, up);
      block.output.replaceAllUsesExcept(sum.getResult(), sum);
    }
  }

  /// The call's layer gets its own adapters: new tx.params before the call, named as PEFT saves
  /// them, placed with the base layer (B split on a column-parallel output, A on a row-parallel
  /// input).
  LogicalResult passAdapters(func::CallOp call, ArrayRef<AdaptedModule> modules) {
    const int64_t layer = call->getAttrOfType<IntegerAttr>(names::kLayerIndexAttr).getInt();
    OpBuilder b(call);
    MLIRContext *context = call.getContext();
    SmallVector<Value> operands(call.getOperands());
    for (const AdaptedModule &m : modules) {
      auto base = call.getOperand(m.blocks.front().arg).getDefiningOp<tx::ParamOp>();
      StringRef path = pathInLayer(base ? base.getName() : "", layer);
      if (!base || path != m.path + ".weight")
        return call.emitOpError() << kPass << ": layer " << layer << " passes no " << m.path
                                  << ".weight where the first layer does";
      const std::string prefix = kPeftPrefix.str() + layerPrefix(base.getName(), path).str() + m.path;
      auto role = [&](tx::ParamRole r) { return tx::ParamRoleAttr::get(context, r); };
      const std::string aName = prefix + ".lora_A.weight";
      operands.push_back(tx::ParamOp::create(
          b, NameLoc::get(b.getStringAttr(aName), base.getLoc()), tensor(base.getType().getElementType(), {lora.rank, m.in}),
          b.getStringAttr(aName), DenseI64ArrayAttr(), DenseI64ArrayAttr(), UnitAttr(),
          m.rowParallel ? role(tx::ParamRole::RowParallelWeight) : tx::ParamRoleAttr(),
          m.rowParallel ? b.getI64IntegerAttr(1) : IntegerAttr(),
          tx::ParamInitAttr::get(context, tx::ParamInit::KaimingUniform), FloatAttr(), UnitAttr(), IntegerAttr()));
      const std::string bName = prefix + ".lora_B.weight";
      for (const AdaptedBlock &block : m.blocks) {
        auto blockParam = call.getOperand(block.arg).getDefiningOp<tx::ParamOp>();
        StringRef blockName = tx::valueName(blockParam.getResult());
        std::string suffix = blockName.starts_with(blockParam.getName().str() + ".")
                                 ? blockName.drop_front(blockParam.getName().size()).str()
                                 : "";
        int64_t out = cast<RankedTensorType>(block.output.getType()).getShape().back();
        operands.push_back(tx::ParamOp::create(
            b, NameLoc::get(b.getStringAttr(bName + suffix), blockParam.getLoc()),
            tensor(base.getType().getElementType(), {out, lora.rank}), b.getStringAttr(bName),
            m.fused ? b.getDenseI64ArrayAttr({block.outStart, 0}) : DenseI64ArrayAttr(),
            m.fused ? b.getDenseI64ArrayAttr({m.fullOut, lora.rank}) : DenseI64ArrayAttr(), UnitAttr(),
            m.rowParallel ? tx::ParamRoleAttr() : role(tx::ParamRole::ColumnParallelWeight),
            m.rowParallel ? IntegerAttr() : b.getI64IntegerAttr(0),
            tx::ParamInitAttr::get(context, tx::ParamInit::Zeros), FloatAttr(), UnitAttr(), IntegerAttr()));
      }
    }
    call->setOperands(operands);
    return success();
  }

  LoraPlan lora;
};

} // namespace
