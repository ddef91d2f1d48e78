#include "tx/TxParamTable.h"

#include <set>

using namespace mlir;

llvm::SmallVector<megac::tx::ParamOp> megac::tx::parameterTable(func::FuncOp entry) {
  llvm::SmallVector<ParamOp> table;
  std::set<std::pair<std::string, std::vector<int64_t>>> seen;
  entry.walk([&](ParamOp p) {
    std::vector<int64_t> offsets;
    if (p.getOffsets())
      offsets.assign(p.getOffsets()->begin(), p.getOffsets()->end());
    if (seen.insert({p.getName().str(), offsets}).second)
      table.push_back(p);
  });
  return table;
}
