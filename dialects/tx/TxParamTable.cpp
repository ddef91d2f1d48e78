#include "tx/TxParamTable.h"

#include <set>

using namespace mlir;

llvm::SmallVector<megac::tx::ParamOp> megac::tx::parameterTable(llvm::ArrayRef<func::FuncOp> fns) {
  llvm::SmallVector<ParamOp> table;
  std::set<std::pair<std::string, std::vector<int64_t>>> seen;
  for (func::FuncOp fn : fns)
    fn.walk([&](ParamOp p) {
      std::vector<int64_t> offsets;
      if (p.getOffsets())
        offsets.assign(p.getOffsets()->begin(), p.getOffsets()->end());
      if (seen.insert({p.getName().str(), offsets}).second)
        table.push_back(p);
    });
  return table;
}

int64_t megac::tx::pipelineStages(ModuleOp module) {
  auto pipeline = module->getAttrOfType<DictionaryAttr>("megac.pipeline");
  return pipeline ? cast<IntegerAttr>(pipeline.get("stages")).getInt() : 1;
}

llvm::SmallVector<func::FuncOp> megac::tx::stageFunctions(ModuleOp module, int64_t stage) {
  int64_t stages = pipelineStages(module);
  llvm::SmallVector<std::pair<std::pair<int64_t, bool>, func::FuncOp>> found;
  for (auto fn : module.getOps<func::FuncOp>()) {
    auto chunk = fn->getAttrOfType<IntegerAttr>("megac.chunk");
    if (chunk && chunk.getInt() % stages == stage)
      found.push_back({{chunk.getInt(), isChunkBackward(fn)}, fn});
  }
  llvm::sort(found, [](auto &a, auto &b) { return a.first < b.first; });
  llvm::SmallVector<func::FuncOp> fns;
  for (auto &entry : found)
    fns.push_back(entry.second);
  return fns;
}
