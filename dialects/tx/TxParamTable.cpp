#include "tx/TxParamTable.h"

using namespace mlir;

namespace megac::tx {

bool holdsExpertBlock(ParamOp p) {
  std::optional<ArrayRef<int64_t>> full = p.getFullShape();
  return p.getRole() == ParamRole::ExpertWeight && full && !full->empty() && (*full)[0] > p.getType().getShape()[0];
}

ParamTable::Key ParamTable::keyOf(ParamOp p) {
  std::vector<int64_t> offsets;
  if (p.getOffsets())
    offsets.assign(p.getOffsets()->begin(), p.getOffsets()->end());
  return {p.getName().str(), std::move(offsets)};
}

ParamTable::ParamTable(llvm::ArrayRef<func::FuncOp> fns, bool frozen) : frozen(frozen) {
  for (func::FuncOp fn : fns)
    fn.walk([&](ParamOp p) {
      if (p.getFrozen() == frozen && index.emplace(keyOf(p), size()).second)
        entries.push_back(p);
    });
}

std::optional<int64_t> ParamTable::find(ParamOp p) const {
  if (p.getFrozen() != frozen)
    return std::nullopt;
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

} // namespace megac::tx
