#include "ProgramTables.h"

#include "tx/TxNames.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"

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
    static const char *inits[] = {"Normal", "Zeros", "Ones"};
    os << "    {.name = " << cString(op.getName()) << ", .rank = " << shape.size() << ", .shape = ";
    list(shape);
    os << ", .offsets = ";
    list(offsets);
    os << ", .full_shape = ";
    list(full);
    os << ",\n     .init = megart::ParamInit::" << inits[static_cast<int>(op.getInit())]
       << ", .init_std = " << floatLiteral(op.getStd() ? op.getStd()->convertToDouble() : 0.02)
       << ", .weight_decay = " << (shape.size() >= 2 ? "true" : "false") << ", .tp_split_dim = " << tpSplitDim(op)
       << ", .padded = " << (op.getPadded() ? "true" : "false") << "},\n";
  }
  os << "};\n\n";
}

/// @sync_gradients (@sync_gradients_stage<s>): each bucket (read, all-reduce over dp, write back) becomes one
/// dp sum over the contiguous gradients of its parameters, started on the runtime's GradSync (which sums in
/// fp32 or bf16, --grad-reduce-in-bf16) and finished by the runtime after the function returns.
LogicalResult emitSyncGradients(func::FuncOp fn, const tx::ParamTable &table, llvm::raw_ostream &os) {
  os << "void " << fn.getName() << "(const megart::StepContext &ctx, float *const *grads) {\n";
  for (Operation &op : fn.getBody().front().without_terminator()) {
    if (isa<shard::AllReduceOp, tx::SetGradBucketOp>(op))
      continue; // handled with their bucket
    auto bucket = dyn_cast<tx::GradBucketOp>(op);
    auto sum = bucket && bucket->hasOneUse() ? dyn_cast<shard::AllReduceOp>(*bucket->getUsers().begin()) : nullptr;
    auto store = sum && sum->hasOneUse() ? dyn_cast<tx::SetGradBucketOp>(*sum->getUsers().begin()) : nullptr;
    if (!store || store.getFirst() != bucket.getFirst() || store.getLast() != bucket.getLast())
      return op.emitOpError("in @sync_gradients must be a bucket read, all-reduced and written back");
    int64_t first = bucket.getFirst(), last = bucket.getLast();
    if (auto rule = sum->getAttrOfType<StringAttr>(names::kRuleAttr))
      os << "  // " << rule.getValue() << "\n";
    emitBucketStart(os, "  ", first, last, table[last].getType().getNumElements());
  }
  os << "}\n\n";
  return success();
}

} // namespace megac::emit
