#include "IRDumps.h"
#include "TextFile.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/Pass.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Regex.h"

using llvm::raw_ostream;
using llvm::StringRef;
using mlir::Operation;
using mlir::Pass;
using mlir::PassManager;

namespace megac {

namespace {

/// MLIR's IR-printing instrumentation, printing each changed module into its own file.
class PerPassFiles : public PassManager::IRPrinterConfig {
public:
  PerPassFiles(IRDumps &dumps, llvm::DenseMap<Pass *, unsigned> numbers)
      : IRPrinterConfig(/*printModuleScope=*/true, /*printAfterOnlyOnChange=*/true, /*printAfterOnlyOnFailure=*/false,
                        IRDumps::printingFlags()),
        dumps(dumps), numbers(std::move(numbers)) {}

  void printAfterIfEnabled(Pass *pass, Operation *op, PrintCallbackFn) override {
    std::string number = std::to_string(numbers.lookup(pass));
    std::string name =
        std::string(2 - std::min<size_t>(2, number.size()), '0') + number + "-" + pass->getArgument().str() + ".mlir";
    dumps.write(name, [&](raw_ostream &os) {
      op->print(os, getOpPrintingFlags());
      os << "\n";
    });
  }

private:
  IRDumps &dumps;
  llvm::DenseMap<Pass *, unsigned> numbers;
};

} // namespace

mlir::OpPrintingFlags IRDumps::printingFlags() {
  return mlir::OpPrintingFlags().enableDebugInfo(/*enable=*/true, /*prettyForm=*/false).printNameLocAsPrefix();
}

bool IRDumps::writeFrontend(mlir::ModuleOp module) {
  return write("00-frontend.mlir", [&](raw_ostream &os) {
    module->print(os, printingFlags());
    os << "\n";
  });
}

void IRDumps::instrument(PassManager &pm) {
  if (!enabled())
    return;
  llvm::DenseMap<Pass *, unsigned> numbers;
  unsigned next = 1;
  for (Pass &pass : pm.getPasses())
    numbers[&pass] = next++;
  pm.getContext()->disableMultithreading(); // printing whole modules needs it (every pass is a module pass)
  pm.enableIRPrinting(std::make_unique<PerPassFiles>(*this, std::move(numbers)));
}

bool IRDumps::removeStale() {
  if (!enabled())
    return true;
  // What an earlier compile into the same folder wrote: a pass with nothing to do now writes no
  // file, so an old one would pass for this plan's.
  llvm::Regex ours("^([0-9][0-9]-.*\\.mlir|decode-step\\.mlir|memory-plan\\.txt|pipeline-schedule\\.txt|pipeline-trace\\.json)$");
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec; it.increment(ec)) {
    if (!ours.match(llvm::sys::path::filename(it->path())))
      continue;
    if (std::error_code removed = llvm::sys::fs::remove(it->path())) {
      llvm::errs() << "megac compile: error: cannot remove the old dump " << it->path() << ": " << removed.message()
                   << "\n";
      return false;
    }
  }
  if (ec) {
    llvm::errs() << "megac compile: error: cannot list --dump-ir folder " << dir << ": " << ec.message() << "\n";
    return false;
  }
  return true;
}

bool IRDumps::write(StringRef name, llvm::function_ref<void(raw_ostream &)> print) {
  if (!enabled())
    return true;
  llvm::SmallString<128> path(dir);
  llvm::sys::path::append(path, name);
  if (writeTextFile(path, print))
    return true;
  failed = true;
  return false;
}

} // namespace megac
