#include "tx/TxChunks.h"
#include "megac/Plan/PlanDialect.h"
#include "tx/TxNames.h"

using namespace mlir;

namespace megac::tx {

std::optional<int64_t> chunkOf(func::FuncOp fn) {
  auto chunk = fn->getAttrOfType<IntegerAttr>(names::kChunkAttr);
  return chunk ? std::optional<int64_t>(chunk.getInt()) : std::nullopt;
}

bool hasChunkFunctions(ModuleOp module) {
  return llvm::any_of(module.getOps<func::FuncOp>(), [](func::FuncOp fn) { return chunkOf(fn).has_value(); });
}

llvm::SmallVector<func::FuncOp> stageFunctions(ModuleOp module, int64_t stage, int64_t stages) {
  llvm::SmallVector<std::pair<std::pair<int64_t, bool>, func::FuncOp>> found;
  for (auto fn : module.getOps<func::FuncOp>())
    if (std::optional<int64_t> chunk = chunkOf(fn); chunk && *chunk % stages == stage)
      found.push_back({{*chunk, isBackward(roleOf(fn))}, fn});
  llvm::sort(found, [](auto &a, auto &b) { return a.first < b.first; });
  llvm::SmallVector<func::FuncOp> fns;
  for (auto &entry : found)
    fns.push_back(entry.second);
  return fns;
}

} // namespace megac::tx
