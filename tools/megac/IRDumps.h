// --dump-ir DIR: the IR after every step of `megac compile`, one file per pass with the same
// name whatever the plan.
#pragma once

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace megac {

class IRDumps {
public:
  /// An empty `dir` writes nothing.
  explicit IRDumps(llvm::StringRef dir) : dir(dir.str()) {}

  bool enabled() const { return !dir.empty(); }
  /// How every dump prints: locations (the spec key or the pass each op comes from) and values
  /// named after what they hold.
  static mlir::OpPrintingFlags printingFlags();

  /// Removes the dumps an earlier compile left in DIR (false, having said why, if it cannot).
  bool removeStale();
  /// DIR/00-frontend.mlir.
  bool writeFrontend(mlir::ModuleOp module);
  /// After each pass of `pm` that changes the module: DIR/NN-<pass argument>.mlir, NN its place
  /// in `pm` counted from 01 (the training pipeline has every pass for every plan, so a pass
  /// keeps its number; one with nothing to do for a plan writes no file).
  void instrument(mlir::PassManager &pm);
  /// Whether every file so far was written (instrumented passes cannot report it themselves).
  bool ok() const { return !failed; }
  /// Another artifact of the compile (the schedule text, the memory plan) as DIR/`name`.
  bool write(llvm::StringRef name, llvm::function_ref<void(llvm::raw_ostream &)> print);

private:
  std::string dir;
  bool failed = false;
};

} // namespace megac
