// megac-gradcheck FILE.mlir: checks every VJP megac-autodiff uses on FILE's
// @forward(ids, labels) -> loss against finite differences, in double precision.
// Exit code 1 if any parameter's gradient is off (or the file cannot be checked).
#include "GradCheck.h"

#include "megac/Transforms/Passes.h"
#include "tx/TxDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"

namespace cl = llvm::cl;

static cl::opt<std::string> inputFile(cl::Positional, cl::desc("<input .mlir>"), cl::init("-"));
static cl::opt<unsigned long long> seed("seed", cl::desc("seed of the random parameters, ids and labels"),
                                        cl::init(1));
static cl::opt<double> step("step", cl::desc("finite-difference step, relative to max(1, |x|)"),
                            cl::init(1e-6));
static cl::opt<double> tolerance("tolerance", cl::desc("largest accepted max abs error / max |gradient|"),
                                 cl::init(1e-6));

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::ParseCommandLineOptions(argc, argv, "megac gradient checker\n");

  mlir::DialectRegistry registry;
  registry.insert<megac::tx::TxDialect, mlir::func::FuncDialect>();
  mlir::MLIRContext context(registry);
  context.disableMultithreading(); // deterministic diagnostics; the modules are tiny
  context.printOpOnDiagnostic(false); // the location already points at the op

  llvm::SourceMgr sourceMgr;
  mlir::SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  std::string error;
  auto file = mlir::openInputFile(inputFile, &error);
  if (!file) {
    llvm::errs() << "megac-gradcheck: " << error << "\n";
    return 1;
  }
  sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::parseSourceFile<mlir::ModuleOp>(sourceMgr, &context);
  if (!module)
    return 1;

  megac::gradcheck::Options options;
  options.seed = seed;
  options.step = step;
  options.tolerance = tolerance;
  return mlir::failed(megac::gradcheck::checkGradients(*module, options, llvm::outs())) ? 1 : 0;
}
