// megac-pipeline-split: @train_step -> per-chunk forward and backward functions (see Passes.td).
#include "megac/Plan/PlanDialect.h"
#include "megac/Plan/PlanIR.h"
#include "megac/Transforms/Passes.h"
#include "tx/TxLocations.h"
#include "tx/TxNames.h"
#include "tx/TxOps.h"

#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "megac-pipeline-split"

namespace megac {
#define GEN_PASS_DEF_PIPELINESPLIT
#include "megac/Transforms/Passes.h.inc"
} // namespace megac

using namespace mlir;
using namespace megac;

namespace {

enum class Phase { Forward, Backward };

/// Where each op of @train_step goes: its chunk and phase. Ops without operands (parameters,
/// zeros) are "free": cloned into every function that uses them.
struct Placement {
  DenseMap<Operation *, int64_t> chunk;
  DenseMap<Operation *, Phase> phase;
  bool isFree(Operation *op) const { return op->getNumOperands() == 0; }
  bool placed(Value v) const { return v.getDefiningOp() && chunk.count(v.getDefiningOp()); }
};

/// The ops and boundary values of one chunk. What crosses a boundary is the residual stream and
/// what the layers carry besides it (a mixture of experts' router load): several values travel
/// packed into one flat tensor (the runtime sends one buffer each way).
struct ChunkPlan {
  SmallVector<Operation *> forwardOps, backwardOps;
  llvm::SetVector<Value> inputs, outputs;         // in from chunk - 1 / out to chunk + 1 (none at the ends)
  llvm::SetVector<Value> outputGrads, inputGrads; // their gradients in (from chunk + 1) / out (to chunk - 1)
  llvm::SetVector<Value> stash;
};

class Splitter {
public:
  Splitter(ModuleOp module, func::FuncOp entry, int64_t pp, ArrayRef<int64_t> layersPerChunk)
      : module(module), entry(entry), pp(pp), layersPerChunk(layersPerChunk),
        numChunks(static_cast<int64_t>(layersPerChunk.size())) {}

  LogicalResult run();

private:
  LogicalResult place();
  LogicalResult splitTiedGradient(tx::ParamGradOp grad, tx::AddOp sum);
  LogicalResult collectBoundaries();
  func::FuncOp buildForward(int64_t c);
  func::FuncOp buildBackward(int64_t c);
  /// A function taking `inputs` then `boundaryIn` (several values arrive packed in one
  /// argument), running clones of `ops` and returning `boundaryOut` (packed likewise) then
  /// `outputs`.
  func::FuncOp buildChunkFunction(StringRef name, ArrayRef<Value> inputs, ArrayRef<Value> boundaryIn,
                                  ArrayRef<Operation *> ops, ArrayRef<Value> boundaryOut, ArrayRef<Value> outputs);
  /// Clones `ops` into `fn`'s body; values in `map` are already there, free ops are cloned
  /// on first use.
  void cloneInto(OpBuilder &b, ArrayRef<Operation *> ops, IRMapping &map);
  InFlightDiagnostic crossChunkError(Operation *user, Value v, int64_t from, int64_t to);

  ModuleOp module;
  func::FuncOp entry;
  int64_t pp;
  ArrayRef<int64_t> layersPerChunk;
  int64_t numChunks;
  Placement where;
  std::vector<ChunkPlan> chunks;
  Value ids, labels, dloss, loss;
};

int64_t chunkOfLayer(ArrayRef<int64_t> layersPerChunk, int64_t layer) {
  for (auto [c, n] : llvm::enumerate(layersPerChunk)) {
    if (layer < n)
      return static_cast<int64_t>(c);
    layer -= n;
  }
  return -1;
}

LogicalResult Splitter::place() {
  Block &body = entry.getBody().front();
  llvm::DenseSet<Value> backwardValues = {dloss};
  int64_t layer = 0, numLayers = 0;
  for (int64_t n : layersPerChunk)
    numLayers += n;
  SmallVector<Operation *> dead;
  for (Operation &op : llvm::make_early_inc_range(body.without_terminator())) {
    if (where.isFree(&op) || llvm::is_contained(dead, &op))
      continue;
    // A layer's forward rerun for its backward (megac-recompute) belongs to the backward.
    auto rerunOf = op.getAttrOfType<IntegerAttr>(names::kRecomputeAttr);
    bool backward = isa<tx::ParamGradOp>(op) || rerunOf ||
                    llvm::any_of(op.getOperands(), [&](Value v) { return backwardValues.contains(v); });
    for (Value r : op.getResults())
      if (backward)
        backwardValues.insert(r);
    // The chunks of the operands computed in each phase.
    int64_t maxForward = -1, minBackward = numChunks, maxBackward = -1;
    for (Value v : op.getOperands()) {
      if (!where.placed(v))
        continue;
      Operation *def = v.getDefiningOp();
      int64_t c = where.chunk.lookup(def);
      // A rerun layer's activations place the backward that reads them as the forward's would.
      if (where.phase.lookup(def) == Phase::Forward || def->hasAttr(names::kRecomputeAttr))
        maxForward = std::max(maxForward, c);
      else
        minBackward = std::min(minBackward, c), maxBackward = std::max(maxBackward, c);
    }
    int64_t c;
    auto call = dyn_cast<func::CallOp>(op);
    auto savedFor = op.getAttrOfType<IntegerAttr>(names::kSavedForAttr); // in the forward of that layer's chunk
    if (rerunOf || savedFor) {
      c = chunkOfLayer(layersPerChunk, (rerunOf ? rerunOf : savedFor).getInt());
      if (c < 0)
        return op.emitOpError() << "belongs to layer " << (rerunOf ? rerunOf : savedFor).getInt()
                                << " but the plan's pipeline_layout places only "
                                << numLayers << " layers";
    } else if (!backward && call && call->hasAttr(names::kLayerAttr)) {
      if (layer >= numLayers)
        return call.emitOpError() << "is transformer layer " << layer << " but the plan's pipeline_layout places only "
                                  << numLayers << " layers";
      c = chunkOfLayer(layersPerChunk, layer++);
    } else if (maxForward >= 0) {
      // A forward op follows the latest chunk it reads; a backward op sits with the forward
      // values it differentiates (its incoming gradient may come from a later chunk).
      c = maxForward;
    } else if (maxBackward >= 0) {
      if (minBackward != maxBackward) {
        auto grad = op.hasOneUse() ? dyn_cast<tx::ParamGradOp>(*op.getUsers().begin()) : nullptr;
        auto sum = dyn_cast<tx::AddOp>(op);
        if (!grad || !sum)
          return op.emitOpError() << "combines backward values of chunks " << minBackward << " and " << maxBackward
                                  << "; megac-pipeline-split can only split a parameter "
                                  << "gradient summed over chunks (a tied weight)";
        if (failed(splitTiedGradient(grad, sum)))
          return failure();
        dead.push_back(grad);
        dead.push_back(sum);
        continue;
      }
      c = maxBackward;
    } else {
      c = backward ? numChunks - 1 : 0; // reads only arguments: the loss's gradient / the ids
    }
    where.chunk[&op] = c;
    where.phase[&op] = backward ? Phase::Backward : Phase::Forward;
    LLVM_DEBUG(llvm::dbgs() << DEBUG_TYPE ": " << op.getName() << " " << op.getLoc() << " -> chunk " << c
                            << (backward ? " backward\n" : " forward\n"));
  }
  if (layer != numLayers)
    return entry.emitOpError() << "calls " << layer << " transformer layers but the plan's pipeline_layout places "
                               << numLayers;
  for (Operation *op : dead)
    op->erase();
  return success();
}

/// grad(p) = a + b with a, b from different chunks: param_grad accumulates, so each chunk adds
/// its own part (into its stage's copy of p; the runtime sums the copies).
LogicalResult Splitter::splitTiedGradient(tx::ParamGradOp grad, tx::AddOp sum) {
  if (sum.getLhs().getType() != sum.getRhs().getType())
    return sum.emitOpError("sums a broadcast gradient over chunks; megac-pipeline-split cannot split it");
  OpBuilder b(sum);
  for (Value part : {sum.getLhs(), sum.getRhs()}) {
    auto partGrad = tx::ParamGradOp::create(b, grad.getLoc(), grad.getParam(), part);
    Operation *def = part.getDefiningOp();
    where.chunk[partGrad] = def ? where.chunk.lookup(def) : numChunks - 1;
    where.phase[partGrad] = Phase::Backward;
  }
  return success();
}

InFlightDiagnostic Splitter::crossChunkError(Operation *user, Value v, int64_t from, int64_t to) {
  return user->emitOpError() << "in chunk " << to << " reads a value of chunk " << from << " (" << v.getType()
                             << ") that is not passed between neighbouring chunks; megac-pipeline-split passes "
                             << "values only from a chunk to the next (and their gradients back)";
}

/// The bytes of `values`, and their one element type (null when they differ).
std::pair<int64_t, Type> boundaryBytes(ArrayRef<Value> values) {
  int64_t bytes = 0;
  Type element;
  for (Value v : values) {
    auto t = cast<RankedTensorType>(v.getType());
    bytes += t.getNumElements() * t.getElementTypeBitWidth() / 8;
    element = !element || element == t.getElementType() ? t.getElementType() : Type();
    if (!element)
      return {bytes, Type()};
  }
  return {bytes, element};
}

/// The type `values` cross a boundary as: one value its own, several one flat [elements] tensor
/// (of their one element type: collectBoundaries checked it).
Type packedType(ArrayRef<Value> values) {
  if (values.size() == 1)
    return values.front().getType();
  int64_t total = 0;
  for (Value v : values)
    total += cast<RankedTensorType>(v.getType()).getNumElements();
  return RankedTensorType::get({total}, cast<RankedTensorType>(values.front().getType()).getElementType());
}

/// `values` flattened and laid end to end in one packedType tensor (each padded to its place and
/// added up); one value is sent as it is.
Value packBoundary(OpBuilder &b, Location loc, ArrayRef<Value> values) {
  if (values.size() == 1)
    return values.front();
  auto packedTensor = cast<RankedTensorType>(packedType(values));
  Type element = packedTensor.getElementType();
  Value packed;
  int64_t offset = 0;
  for (Value v : values) {
    const int64_t n = cast<RankedTensorType>(v.getType()).getNumElements();
    Value flat = tx::ReshapeOp::create(b, loc, RankedTensorType::get({n}, element), v);
    Value placed = tx::PadOp::create(b, loc, packedTensor, flat, 0, offset);
    packed = packed ? tx::AddOp::create(b, loc, packed, placed).getResult() : placed;
    offset += n;
  }
  return packed;
}

/// The values packBoundary laid out in `packed`, of `types`.
SmallVector<Value> unpackBoundary(OpBuilder &b, Location loc, Value packed, TypeRange types) {
  if (types.size() == 1)
    return {packed};
  SmallVector<Value> values;
  int64_t offset = 0;
  for (Type type : types) {
    auto t = cast<RankedTensorType>(type);
    const int64_t n = t.getNumElements();
    Value flat = tx::SliceOp::create(b, loc, RankedTensorType::get({n}, t.getElementType()), packed, 0, offset);
    values.push_back(tx::ReshapeOp::create(b, loc, t, flat));
    offset += n;
  }
  return values;
}

LogicalResult Splitter::collectBoundaries() {
  chunks.resize(numChunks);
  Block &body = entry.getBody().front();
  for (Operation &op : body.without_terminator()) {
    if (where.isFree(&op))
      continue;
    int64_t c = where.chunk.lookup(&op);
    bool backward = where.phase.lookup(&op) == Phase::Backward;
    (backward ? chunks[c].backwardOps : chunks[c].forwardOps).push_back(&op);
    for (Value v : op.getOperands()) {
      if (!where.placed(v))
        continue;
      Operation *def = v.getDefiningOp();
      int64_t from = where.chunk.lookup(def);
      bool fromBackward = where.phase.lookup(def) == Phase::Backward;
      if (!backward) {
        if (from == c)
          continue;
        if (from != c - 1)
          return crossChunkError(&op, v, from, c);
        chunks[c].inputs.insert(v);
        chunks[from].outputs.insert(v);
        continue;
      }
      if (fromBackward) {
        if (from == c)
          continue;
        if (from != c + 1)
          return crossChunkError(&op, v, from, c);
        chunks[c].outputGrads.insert(v);
        chunks[from].inputGrads.insert(v);
        continue;
      }
      // A forward value the backward reads: stashed by this chunk's forward (its own value or
      // one it received).
      if (from != c && !chunks[c].inputs.contains(v))
        return crossChunkError(&op, v, from, c);
      chunks[c].stash.insert(v);
    }
  }
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  if (ret.getNumOperands() != 1 || !where.placed(ret.getOperand(0)) ||
      where.chunk.lookup(ret.getOperand(0).getDefiningOp()) != numChunks - 1)
    return entry.emitOpError("must return the loss, computed in the last chunk");
  loss = ret.getOperand(0);
  for (int64_t c = 0; c < numChunks; ++c) {
    bool first = c == 0, last = c == numChunks - 1;
    if (!first && (chunks[c].inputs.empty() || chunks[c].inputGrads.empty()))
      return entry.emitOpError() << "chunk " << c << " receives no residual stream or sends back no gradient";
    if (!last && (chunks[c].outputs.empty() || chunks[c].outputGrads.empty()))
      return entry.emitOpError() << "chunk " << c << " sends no residual stream or receives no gradient";
    if (last)
      continue;
    // The runtime sends the values and their gradients in buffers of one size, each one type.
    auto [forward, forwardType] = boundaryBytes(chunks[c].outputs.getArrayRef());
    auto [backward, backwardType] = boundaryBytes(chunks[c].outputGrads.getArrayRef());
    if (!forwardType || !backwardType || forward != backward)
      return entry.emitOpError() << "chunk " << c << " sends " << chunks[c].outputs.size() << " values (" << forward
                                 << " bytes) and gets " << chunks[c].outputGrads.size() << " gradients (" << backward
                                 << " bytes) back; megac-pipeline-split packs several into one buffer of one element "
                                 << "type, as many bytes each way";
  }
  return success();
}

void Splitter::cloneInto(OpBuilder &b, ArrayRef<Operation *> ops, IRMapping &map) {
  for (Operation *op : ops) {
    for (Value v : op->getOperands())
      if (!map.contains(v) && v.getDefiningOp() && where.isFree(v.getDefiningOp()))
        b.clone(*v.getDefiningOp(), map);
    b.clone(*op, map);
  }
}

func::FuncOp Splitter::buildChunkFunction(StringRef name, ArrayRef<Value> inputs, ArrayRef<Value> boundaryIn,
                                          ArrayRef<Operation *> ops, ArrayRef<Value> boundaryOut,
                                          ArrayRef<Value> outputs) {
  SmallVector<Type> args, results; // several boundary values travel as one packed tensor
  for (Value v : inputs)
    args.push_back(v.getType());
  if (!boundaryIn.empty())
    args.push_back(packedType(boundaryIn));
  if (!boundaryOut.empty())
    results.push_back(packedType(boundaryOut));
  for (Value v : outputs)
    results.push_back(v.getType());
  OpBuilder b(module.getBodyRegion());
  b.setInsertionPoint(entry);
  Location loc = FusedLoc::get(b.getContext(), {entry.getLoc()}, b.getStringAttr("megac-pipeline-split"));
  auto fn = func::FuncOp::create(b, loc, name, b.getFunctionType(args, results));
  Block *block = fn.addEntryBlock();
  IRMapping map;
  SmallVector<Value> unpacked(inputs);
  unpacked.append(boundaryIn.begin(), boundaryIn.end());
  const bool packedIn = boundaryIn.size() > 1, packedOut = boundaryOut.size() > 1;
  // Each argument is named after the value it brings (a result of a layer call by what the
  // layer returns there: layer_1_fc_gelu).
  for (auto [arg, v] : llvm::zip(block->getArguments(), unpacked)) {
    auto result = dyn_cast<OpResult>(v);
    std::string name = result ? tx::resultName(result) : tx::valueName(v).str();
    arg.setLoc(name.empty() || name == tx::valueName(v) ? v.getLoc() : tx::derivedLoc(v, name, "megac-pipeline-split"));
  }
  b.setInsertionPointToEnd(block);
  map.map(inputs, block->getArguments().take_front(inputs.size()));
  if (packedIn) {
    Location at = NameLoc::get(b.getStringAttr("boundary_in"), loc);
    block->getArguments().back().setLoc(at);
    SmallVector<Type> types;
    for (Value v : boundaryIn)
      types.push_back(v.getType());
    map.map(boundaryIn, unpackBoundary(b, at, block->getArguments().back(), types));
  } else if (!boundaryIn.empty()) {
    map.map(boundaryIn.front(), block->getArguments().back());
  }
  cloneInto(b, ops, map);
  SmallVector<Value> mapped, boundary;
  for (Value v : boundaryOut)
    boundary.push_back(map.lookup(v));
  if (!boundary.empty())
    mapped.push_back(packBoundary(b, NameLoc::get(b.getStringAttr("boundary_out"), loc), boundary));
  for (Value v : outputs)
    mapped.push_back(map.lookup(v));
  func::ReturnOp::create(b, loc, mapped);
  // The boundary values keep the shardings megac-tensor-parallel recorded (a packed one has none).
  SmallVector<Value> argValues(inputs), resultValues;
  if (!boundaryIn.empty())
    argValues.push_back(packedIn ? Value() : boundaryIn.front());
  if (!boundaryOut.empty())
    resultValues.push_back(packedOut ? Value() : boundaryOut.front());
  resultValues.append(outputs.begin(), outputs.end());
  for (auto [i, v] : llvm::enumerate(argValues))
    if (tx::ShardingAttr sharding = v ? tx::recordedSharding(v) : tx::ShardingAttr())
      fn.setArgAttr(i, names::kShardingAttr, sharding);
  for (auto [i, v] : llvm::enumerate(resultValues))
    if (tx::ShardingAttr sharding = v ? tx::recordedSharding(v) : tx::ShardingAttr())
      fn.setResultAttr(i, names::kShardingAttr, sharding);
  return fn;
}

func::FuncOp Splitter::buildForward(int64_t c) {
  ChunkPlan &chunk = chunks[c];
  SmallVector<Value> boundaryOut =
      c == numChunks - 1 ? SmallVector<Value>{loss} : SmallVector<Value>(chunk.outputs.getArrayRef());
  func::FuncOp fn = buildChunkFunction(names::forwardHalf(names::chunkName(c)), {ids, labels},
                                       chunk.inputs.getArrayRef(), chunk.forwardOps, boundaryOut,
                                       chunk.stash.getArrayRef());
  setRole(fn, FunctionRole::ChunkForward);
  return fn;
}

func::FuncOp Splitter::buildBackward(int64_t c) {
  ChunkPlan &chunk = chunks[c];
  SmallVector<Value> inputs = {ids, labels, dloss};
  inputs.append(chunk.stash.begin(), chunk.stash.end());
  func::FuncOp fn = buildChunkFunction(names::backwardHalf(names::chunkName(c)), inputs,
                                       chunk.outputGrads.getArrayRef(), chunk.backwardOps,
                                       chunk.inputGrads.getArrayRef(), {});
  setRole(fn, FunctionRole::ChunkBackward);
  return fn;
}

LogicalResult Splitter::run() {
  if (entry.getNumArguments() != 3)
    return entry.emitOpError("must take (ids, labels, dloss); run megac-autodiff first");
  ids = entry.getArgument(0), labels = entry.getArgument(1), dloss = entry.getArgument(2);
  if (numChunks < pp || numChunks % pp != 0)
    return module.emitError() << "megac-pipeline-split: the plan's pipeline_layout has " << numChunks
                              << " entries; it needs pp x vpp (a multiple of pp = " << pp << ")";
  for (auto [c, n] : llvm::enumerate(layersPerChunk))
    if (n < 1 && numChunks > 1)
      return module.emitError() << "megac-pipeline-split: chunk " << c << " has " << n
                                << " layers; every chunk needs at least one";
  if (failed(place()) || failed(collectBoundaries()))
    return failure();
  auto i64 = [&](int64_t v) { return IntegerAttr::get(IntegerType::get(module.getContext(), 64), v); };
  for (int64_t c = 0; c < numChunks; ++c) {
    LLVM_DEBUG(llvm::dbgs() << DEBUG_TYPE ": chunk " << c << ": " << chunks[c].forwardOps.size() << " forward ops, "
                            << chunks[c].backwardOps.size() << " backward ops, " << chunks[c].stash.size()
                            << " stashed values\n");
    for (func::FuncOp fn : {buildForward(c), buildBackward(c)}) {
      fn->setAttr(names::kChunkAttr, i64(c));
      fn->setAttr(names::kStashAttr, i64(static_cast<int64_t>(chunks[c].stash.size())));
    }
  }
  entry.erase();
  return success();
}

/// The transformer layers @train_step's forward calls (a rerun for the backward is not one).
int64_t numLayerCalls(func::FuncOp entry) {
  int64_t n = 0;
  entry.walk([&](func::CallOp call) {
    if (call->hasAttr(names::kLayerAttr) && !call->hasAttr(names::kRecomputeAttr))
      ++n;
  });
  return n;
}

struct PipelineSplitPass : public megac::impl::PipelineSplitBase<PipelineSplitPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<ParallelPlan> plan = readPlan(module, getArgument());
    if (failed(plan))
      return signalPassFailure();
    auto entry = module.lookupSymbol<func::FuncOp>(names::kTrainStep);
    if (!entry) {
      module.emitError() << getArgument() << ": needs @" << names::kTrainStep << " (run megac-autodiff first)";
      return signalPassFailure();
    }
    // pp = 1 is one stage with one chunk holding every layer: its iteration runs on the same
    // executor as a pipeline's.
    SmallVector<int64_t> layout(plan->pipelineLayout.begin(), plan->pipelineLayout.end());
    if (layout.empty())
      layout.push_back(numLayerCalls(entry));
    if (failed(Splitter(module, entry, plan->pp, layout).run()))
      signalPassFailure();
  }
};

} // namespace
