#include "tx/TxParamTable.h"
#include "tx/TxNames.h"

using namespace mlir;

namespace megac::tx {

ParamTable::Key ParamTable::keyOf(ParamOp p) {
  std::vector<int64_t> offsets;
  if (p.getOffsets())
    offsets.assign(p.getOffsets()->begin(), p.getOffsets()->end());
  return {p.getName().str(), std::move(offsets)};
}

ParamTable::ParamTable(llvm::ArrayRef<func::FuncOp> fns) {
  for (func::FuncOp fn : fns)
    fn.walk([&](ParamOp p) {
      if (index.emplace(keyOf(p), size()).second)
        entries.push_back(p);
    });
}

std::optional<int64_t> ParamTable::find(ParamOp p) const {
  auto it = index.find(keyOf(p));
  return it == index.end() ? std::nullopt : std::optional<int64_t>(it->second);
}

std::optional<int64_t> ParamTable::firstIn(func::FuncOp fn) const {
  std::optional<int64_t> first;
  fn.walk([&](ParamOp p) {
    if (std::optional<int64_t> i = find(p); i && (!first || *i < *first))
      first = i;
  });
  return first;
}

int64_t pipelineStages(ModuleOp module) {
  auto pipeline = module->getAttrOfType<DictionaryAttr>(names::kPipelineAttr);
  return pipeline ? cast<IntegerAttr>(pipeline.get("stages")).getInt() : 1;
}

bool isChunkFunction(func::FuncOp fn) { return fn->hasAttr(names::kChunkAttr); }

llvm::SmallVector<func::FuncOp> stageFunctions(ModuleOp module, int64_t stage) {
  int64_t stages = pipelineStages(module);
  llvm::SmallVector<std::pair<std::pair<int64_t, bool>, func::FuncOp>> found;
  for (auto fn : module.getOps<func::FuncOp>()) {
    auto chunk = fn->getAttrOfType<IntegerAttr>(names::kChunkAttr);
    if (chunk && chunk.getInt() % stages == stage)
      found.push_back({{chunk.getInt(), names::isBackwardHalf(fn.getName())}, fn});
  }
  llvm::sort(found, [](auto &a, auto &b) { return a.first < b.first; });
  llvm::SmallVector<func::FuncOp> fns;
  for (auto &entry : found)
    fns.push_back(entry.second);
  return fns;
}

} // namespace megac::tx
