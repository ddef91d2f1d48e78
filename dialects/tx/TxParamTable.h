// The program's parameter table: the order in which generated code (params[i], grads[i]) and the
// runtime number the parameters. Passes that refer to parameters by index (the data-parallel
// buckets) and the emitters use this one definition.
#pragma once

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "tx/TxOps.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace megac::tx {

/// Whether `p` is one expert-parallel rank's block of stacked experts (megac-expert-parallel): its
/// dimension 0 split over the ep ranks, rank r's block r blocks further.
bool holdsExpertBlock(ParamOp p);

/// The distinct parameter blocks (checkpoint name + block offsets) of some functions, numbered
/// in order of first appearance. GPT-2's fused c_attn is three blocks of one checkpoint tensor;
/// a parameter cloned into several functions (pipeline chunks) is one entry. A table holds the
/// trainable parameters (params[i], grads[i]) or, with `frozen`, the frozen ones (the base model
/// under LoRA: ctx.frozen[i], no gradient, no optimizer state); never both.
class ParamTable {
public:
  ParamTable() = default;
  explicit ParamTable(llvm::ArrayRef<mlir::func::FuncOp> fns, bool frozen = false);

  /// `p`'s entry, or none when `p` is a block no function of the table declares.
  std::optional<int64_t> find(ParamOp p) const;
  /// The smallest entry among the parameters `fn` declares.
  std::optional<int64_t> firstIn(mlir::func::FuncOp fn) const;
  bool holdsFrozen() const { return frozen; }

  int64_t size() const { return static_cast<int64_t>(entries.size()); }
  ParamOp operator[](int64_t i) const { return entries[i]; }
  llvm::ArrayRef<ParamOp> all() const { return entries; }

private:
  using Key = std::pair<std::string, std::vector<int64_t>>;
  static Key keyOf(ParamOp p);
  bool frozen = false;
  std::vector<ParamOp> entries;
  std::map<Key, int64_t> index;
};

} // namespace megac::tx
