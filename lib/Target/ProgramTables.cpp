#include "ProgramTables.h"

#include "tx/TxNames.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "llvm/ADT/StringSwitch.h"

using namespace mlir;

namespace megac::emit {

/// The dimension megac-tensor-parallel split `p` along, -1 when every tp rank holds it whole.
static int64_t tpSplitDim(tx::ParamOp p) {
  tx::ShardingAttr sharding = tx::recordedSharding(p.getResult());
  std::optional<int64_t> dim = sharding ? sharding.splitDim(names::kTensorAxis) : std::nullopt;
  return dim.value_or(-1);
}

void emitParamTable(StringRef name, const tx::ParamTable &params, llvm::raw_ostream &os) {
  os << "const megart::ParamDesc " << name << "[] = {\n";
  for (tx::ParamOp op : params.all()) {
    ArrayRef<int64_t> shape = op.getType().getShape();
    SmallVector<int64_t> offsets(shape.size(), 0), full(shape);
    if (op.getOffsets()) {
      offsets.assign(op.getOffsets()->begin(), op.getOffsets()->end());
      full.assign(op.getFullShape()->begin(), op.getFullShape()->end());
    }
    auto list = [&](ArrayRef<int64_t> v) {
      os << "{";
      llvm::interleaveComma(v, os);
      os << "}";
    };
    static const char *inits[] = {"Normal", "Zeros", "Ones", "KaimingUniform"};
    os << "    {.name = " << cString(op.getName()) << ", .rank = " << shape.size() << ", .shape = ";
    list(shape);
    os << ", .offsets = ";
    list(offsets);
    os << ", .full_shape = ";
    list(full);
    os << ",\n     .init = megart::ParamInit::" << inits[static_cast<int>(op.getInit())]
       << ", .init_std = " << floatLiteral(op.getStd() ? op.getStd()->convertToDouble() : 0.02)
       << ", .weight_decay = " << (shape.size() >= 2 ? "true" : "false") << ", .tp_split_dim = " << tpSplitDim(op)
       << (tx::holdsExpertBlock(op) ? ", .ep_split_dim = 0" : "")
       << ", .padded = " << (op.getPadded() ? "true" : "false");
    if (std::optional<uint64_t> block = op.getNf4Block())
      os << ", .nf4_block = " << *block;
    os << "},\n";
  }
  os << "};\n\n";
}

/// @sync_gradients (@sync_gradients_stage<s>): each bucket (read, all-reduce over dp, write back) becomes one
/// dp sum over the contiguous gradients of its parameters, started on the runtime's GradSync (which sums in
/// fp32 or bf16, --grad-reduce-in-bf16) and finished by the runtime after the function returns.
LogicalResult emitSyncGradients(func::FuncOp fn, const tx::ParamTable &table, llvm::raw_ostream &os) {
  os << "void " << fn.getName() << "(const megart::StepContext &ctx, float *const *grads) {\n";
  for (Operation &op : fn.getBody().front().without_terminator()) {
    if (isa<shard::AllReduceOp, tx::SetGradBucketOp, shard::ReduceScatterOp, tx::SetGradShardOp>(op))
      continue; // handled with their bucket (an all-reduce after a reduce-scatter: with the scatter)
    auto bucket = dyn_cast<tx::GradBucketOp>(op);
    auto scatter = bucket && bucket->hasOneUse() ? dyn_cast<shard::ReduceScatterOp>(*bucket->getUsers().begin())
                                                 : nullptr;
    if (scatter) {
      // The distributed optimizer: in place, this rank's shard of the sum to the bucket's start
      // (with hybrid sharding then summed across the replicas, in place too).
      Operation *last = scatter;
      auto across = scatter->hasOneUse() ? dyn_cast<shard::AllReduceOp>(*scatter->getUsers().begin()) : nullptr;
      if (across)
        last = across;
      auto keep = last->hasOneUse() ? dyn_cast<tx::SetGradShardOp>(*last->getUsers().begin()) : nullptr;
      const std::string shardComm = communicatorName(scatter.getGrid(), scatter.getGridAxes());
      const std::string replicaComm = across ? communicatorName(across.getGrid(), across.getGridAxes()) : "";
      if (!keep || keep.getFirst() != bucket.getFirst() || keep.getLast() != bucket.getLast() || shardComm.empty() ||
          (across && replicaComm.empty()))
        return op.emitOpError("in a sharded @sync_gradients must be reduce-scattered (and summed across replicas) "
                              "and kept by tx.set_grad_shard");
      if (auto rule = scatter->getAttrOfType<StringAttr>(names::kRuleAttr))
        os << "  // " << rule.getValue() << "\n";
      // Parameters lie in reverse table order: the bucket starts at its last parameter.
      const int64_t m = cast<RankedTensorType>(scatter.getType()).getNumElements();
      os << "  " << shardComm << "->reduce_scatter_sum(grads[" << bucket.getLast() << "], grads[" << bucket.getLast()
         << "], " << m << ");\n";
      if (across) {
        if (auto rule = across->getAttrOfType<StringAttr>(names::kRuleAttr))
          os << "  // " << rule.getValue() << "\n";
        os << "  " << replicaComm << "->all_reduce_sum(grads[" << bucket.getLast() << "], " << m << ");\n";
      }
      continue;
    }
    auto sum = bucket && bucket->hasOneUse() ? dyn_cast<shard::AllReduceOp>(*bucket->getUsers().begin()) : nullptr;
    auto store = sum && sum->hasOneUse() ? dyn_cast<tx::SetGradBucketOp>(*sum->getUsers().begin()) : nullptr;
    if (!store || store.getFirst() != bucket.getFirst() || store.getLast() != bucket.getLast())
      return op.emitOpError("in @sync_gradients must be a bucket read, all-reduced and written back");
    int64_t first = bucket.getFirst(), last = bucket.getLast();
    if (auto rule = sum->getAttrOfType<StringAttr>(names::kRuleAttr))
      os << "  // " << rule.getValue() << "\n";
    // The experts' buckets sum over the ranks holding the same experts (@ep_grid), the rest over dp.
    const bool experts = sum.getGrid() == names::kEpGrid;
    const std::string group = communicatorName(sum.getGrid(), sum.getGridAxes());
    if (group.empty() || (!experts && sum.getGrid() != names::kGrid))
      return op.emitOpError("in @sync_gradients must be all-reduced over @grid's dp axis or @ep_grid's expert_dp axis");
    emitBucketStart(os, "  ", first, last, table[last].getType().getNumElements(), experts ? group : "");
  }
  os << "}\n\n";
  return success();
}

LogicalResult emitGatherParams(func::FuncOp fn, llvm::raw_ostream &os) {
  os << "void " << fn.getName() << "(const megart::StepContext &ctx, float *const *params) {\n";
  for (Operation &op : fn.getBody().front().without_terminator()) {
    if (isa<shard::AllGatherOp, tx::SetParamBucketOp>(op))
      continue; // handled with their shard
    auto mine = dyn_cast<tx::ParamShardOp>(op);
    auto all = mine && mine->hasOneUse() ? dyn_cast<shard::AllGatherOp>(*mine->getUsers().begin()) : nullptr;
    auto store = all && all->hasOneUse() ? dyn_cast<tx::SetParamBucketOp>(*all->getUsers().begin()) : nullptr;
    if (!store || store.getFirst() != mine.getFirst() || store.getLast() != mine.getLast())
      return op.emitOpError("in @gather_params must be a parameter shard all-gathered into its bucket");
    const std::string comm = communicatorName(all.getGrid(), all.getGridAxes());
    if (comm.empty())
      return op.emitOpError("in @gather_params must be all-gathered over @grid's dp axis, @dp_grid's shard axis or "
                            "@ep_grid's expert_dp axis");
    if (auto rule = all->getAttrOfType<StringAttr>(names::kRuleAttr))
      os << "  // " << rule.getValue() << "\n";
    const int64_t m = mine.getType().getNumElements();
    os << "  " << comm << "->all_gather(params[" << mine.getLast() << "], params[" << mine.getLast() << "] + " << comm
       << "->rank() * " << m << ", " << m << ");\n";
  }
  os << "}\n\n";
  return success();
}

void emitFlatLayout(StringRef name, DictionaryAttr layout, llvm::raw_ostream &os) {
  auto offsets = cast<DenseI64ArrayAttr>(layout.get("param_offsets")).asArrayRef();
  auto buckets = cast<DenseI64ArrayAttr>(layout.get("buckets")).asArrayRef();
  auto experts = layout.getAs<DenseI64ArrayAttr>("expert_buckets");
  auto expertDegree = layout.getAs<IntegerAttr>("expert_shard_degree");
  auto sharding = layout.getAs<StringAttr>("sharding");
  // The runtime's names of the strategies a flat layout serves.
  const StringRef strategy = llvm::StringSwitch<StringRef>(sharding ? sharding.getValue() : "optim")
                                 .Case("optim_grads", "OptimGrads")
                                 .Case("optim_grads_params", "OptimGradsParams")
                                 .Default("Optim");
  os << "const int64_t " << name << "ParamOffsets[] = {";
  llvm::interleaveComma(offsets, os);
  os << "};\nconst megart::FlatBucket " << name << "Buckets[] = {";
  for (size_t i = 0; i + 1 < buckets.size(); i += 2)
    os << (i ? ", " : "") << "{" << buckets[i] << ", " << buckets[i + 1]
       << (experts && llvm::is_contained(experts.asArrayRef(), int64_t(i / 2)) ? ", /*experts=*/true" : "") << "}";
  os << "};\nconst megart::FlatLayoutDesc " << name << " = {.param_offsets = " << name
     << "ParamOffsets, .buckets = " << name << "Buckets, .num_buckets = " << buckets.size() / 2
     << ", .numel = " << cast<IntegerAttr>(layout.get("numel")).getInt()
     << ", .shard_degree = " << cast<IntegerAttr>(layout.get("shard_degree")).getInt()
     << ", .sharding = megart::DataParallelSharding::" << strategy;
  if (expertDegree)
    os << ", .expert_shard_degree = " << expertDegree.getInt();
  if (auto offloaded = layout.getAs<IntegerAttr>("offloaded_numel"); offloaded && offloaded.getInt() > 0)
    os << ", .offloaded_numel = " << offloaded.getInt();
  os << "};\n\n";
}

FailureOr<std::string> emitShardedFields(ModuleOp module, func::FuncOp syncFn, StringRef gatherName,
                                         StringRef prefix, llvm::raw_ostream &os) {
  auto layout = syncFn->getAttrOfType<DictionaryAttr>(names::kFlatLayoutAttr);
  if (!layout)
    return std::string();
  // ZeRO-3 keeps the updated shards (its functions gather what they use): nothing to gather.
  auto sharding = layout.getAs<StringAttr>("sharding");
  const bool paramsSharded = sharding && sharding.getValue() == "optim_grads_params";
  auto gatherFn = module.lookupSymbol<func::FuncOp>(gatherName);
  if (!gatherFn && !paramsSharded)
    return syncFn.emitOpError() << "has a flat layout but the module has no @" << gatherName;
  if (gatherFn && failed(emitGatherParams(gatherFn, os)))
    return failure();
  emitFlatLayout((prefix + "FlatLayout").str(), layout, os);
  return (", .flat_layout = &" + prefix + "FlatLayout, .gather_params = " + (gatherFn ? gatherName : "nullptr"))
      .str();
}

} // namespace megac::emit
