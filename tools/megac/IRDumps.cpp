#include "IRDumps.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/Pass.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"

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
    std::string name = std::string(2 - std::min<size_t>(2, number.size()), '0') + number + "-" +
                       pass->getArgument().str() + ".mlir";
    dumps.write(name, [&](raw_ostream &os) { op->print(os, getOpPrintingFlags()); os << "\n"; });
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
  return write("00-frontend.mlir", [&](raw_ostream &os) { module->print(os, printingFlags()); os << "\n"; });
}

void IRDumps::instrument(PassManager &pm) {
  if (!enabled())
    return;
  llvm::DenseMap<Pass *, unsigned> numbers;
  for (Pass &pass : pm.getPasses())
    numbers[&pass] = numbers.size() + 1;
  pm.getContext()->disableMultithreading(); // printing whole modules needs it (every pass is a module pass)
  pm.enableIRPrinting(std::make_unique<PerPassFiles>(*this, std::move(numbers)));
}

bool IRDumps::write(StringRef name, llvm::function_ref<void(raw_ostream &)> print) {
  if (!enabled())
    return true;
  llvm::SmallString<128> path(dir);
  llvm::sys::path::append(path, name);
  std::error_code ec;
  llvm::ToolOutputFile file(path, ec, llvm::sys::fs::OF_Text); // removed again unless kept
  if (ec) {
    llvm::errs() << "megac compile: error: cannot write " << path << ": " << ec.message() << "\n";
    failed = true;
    return false;
  }
  print(file.os());
  file.keep();
  return true;
}

} // namespace megac
