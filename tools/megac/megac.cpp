// megac: the compiler driver. Subcommands: compile, simulate, plan, calibrate, data, generate.
#include "Commands.h"
#include "Help.h"
#include "MegacPaths.h"
#include "UnknownFlags.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

namespace megac::cli {
llvm::cl::SubCommand compile("compile", "Compile a model spec (a YAML, or a Hugging Face model folder) and a "
                                        "parallel plan into OUT/train");
llvm::cl::SubCommand data("data", "Tokenize text or JSON lines into Megatron indexed datasets");
llvm::cl::SubCommand simulate("simulate", "Predict a plan's iteration time, throughput and memory on a cluster");
llvm::cl::SubCommand plan("plan", "Search the parallel plans of a model on a cluster for the fastest that fits");
llvm::cl::SubCommand calibrate("calibrate", "Measure this machine and write a cluster file for megac simulate");
llvm::cl::SubCommand generate("generate", "Continue a text with a model (its program compiled once, then cached)");
} // namespace megac::cli

namespace {
llvm::ArrayRef<const char *> typedArgs;
llvm::cl::opt<bool> printPaths("print-paths", llvm::cl::desc("print where this megac finds its runtime, tokenizer "
                                                             "script, clusters and Python, then exit"));
} // namespace

llvm::ArrayRef<const char *> megac::invocation() { return typedArgs; }

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  typedArgs = llvm::ArrayRef<const char *>(argv, argc);
  if (std::optional<std::string> unknown = megac::findUnknownFlag(llvm::ArrayRef<const char *>(argv, argc))) {
    llvm::errs() << "megac: error: " << *unknown << "\n";
    return 1;
  }
  const char *overview = "megac: trains transformers the Megatron-LM way, compiled\n\n"
                         "  megac compile SPEC.yaml|HF_FOLDER -o OUT [plan flags]\n"
                         "  megac simulate SPEC.yaml --cluster NAME|FILE.yaml --global-batch-size B [plan flags]\n"
                         "  megac plan SPEC.yaml --gpus N --cluster NAME --global-batch-size B\n"
                         "  megac calibrate --target cpu -o FILE.yaml\n"
                         "  megac generate CHECKPOINT --prompt TEXT [--max-new-tokens N --top-k K ...]\n"
                         "  megac data --input FILE... --output-prefix PREFIX [--tokenizer-type T ...]\n"
                         "  megac --print-paths   (where this megac finds its runtime, clusters and tokenizer)\n";
  if (megac::printHelpIfAsked(llvm::ArrayRef<const char *>(argv, argc), overview))
    return 0;
  llvm::cl::ParseCommandLineOptions(argc, argv, overview);
  if (printPaths) {
    megac::printMegacPaths(llvm::outs());
    return 0;
  }
  if (megac::cli::compile || megac::cli::simulate)
    return megac::runCompile();
  if (megac::cli::data)
    return megac::runData();
  if (megac::cli::calibrate)
    return megac::runCalibrate();
  if (megac::cli::generate)
    return megac::runGenerate();
  if (megac::cli::plan)
    return megac::runPlan();
  llvm::errs() << "megac: say what to do: `megac compile SPEC.yaml -o OUT` or `megac data ...` "
                  "(`megac --help` lists both)\n";
  return 1;
}
