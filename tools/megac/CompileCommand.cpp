// megac compile: spec + plan -> tx IR -> the training pipeline -> C++ -> OUT/train, dumping the IR
// after each pass.
#include "Commands.h"
#include "IRDumps.h"
#include "PipelineSchedule.h"
#include "TextFile.h"
#include "pipe/ScheduleIR.h"

#include "megac/Config.h"
#include "megac/Frontend/BuildModel.h"
#include "megac/Frontend/HuggingFaceConfig.h"
#include "megac/Frontend/PlanChecks.h"
#include "megac/Target/EmitCpp.h"
#include "megac/Transforms/TrainingPipeline.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"

#include <chrono>

using namespace llvm;
namespace cl = llvm::cl;

namespace megac::cli {
extern cl::SubCommand compile;
} // namespace megac::cli

namespace {
using megac::cli::compile;

cl::opt<std::string> specPath(cl::Positional, cl::Required, cl::desc("SPEC.yaml"), cl::sub(compile));
cl::opt<std::string> outDir("o", cl::Required, cl::desc("output folder; OUT/train is the program"),
                            cl::value_desc("OUT"), cl::sub(compile));
cl::opt<std::string> dumpDir("dump-ir", cl::desc("write the IR after every step into DIR"), cl::value_desc("DIR"),
                             cl::sub(compile));
cl::opt<int64_t> microBatch("micro-batch-size", cl::init(1),
                            cl::desc("microbatch size (shapes are static; OUT/train checks it)"), cl::sub(compile));
cl::opt<int64_t> tp("tensor-model-parallel-size", cl::init(1), cl::desc("tensor parallel size"), cl::sub(compile));
cl::alias tpAlias("tp", cl::aliasopt(tp), cl::desc("alias for --tensor-model-parallel-size"));
cl::opt<int64_t> pp("pipeline-model-parallel-size", cl::init(1), cl::desc("pipeline parallel size"), cl::sub(compile));
cl::alias ppAlias("pp", cl::aliasopt(pp), cl::desc("alias for --pipeline-model-parallel-size"));
cl::opt<int64_t> dp("data-parallel-size", cl::init(1), cl::desc("data parallel size"), cl::sub(compile));
cl::alias dpAlias("dp", cl::aliasopt(dp), cl::desc("alias for --data-parallel-size"));
cl::opt<int64_t> vpp("num-virtual-stages-per-pipeline-rank", cl::init(1),
                     cl::desc("chunks (virtual pipeline stages) per pipeline rank"), cl::sub(compile));
cl::alias vppAlias("vpp", cl::aliasopt(vpp), cl::desc("alias for --num-virtual-stages-per-pipeline-rank"));
cl::opt<int64_t> layersPerVirtualStage("num-layers-per-virtual-pipeline-stage", cl::init(0),
                                       cl::desc("layers per chunk (Megatron's flag; sets --vpp)"), cl::sub(compile));
cl::opt<std::string> pipelineSchedule("pipeline-schedule",
                                      cl::desc("gpipe, 1f1b or interleaved (default: interleaved when --vpp > 1, "
                                               "else 1f1b)"),
                                      cl::sub(compile));
cl::list<int64_t> pipelineLayout("pipeline-layout", cl::CommaSeparated,
                                 cl::desc("layers of each chunk, in chunk order (pp x vpp counts; chunk c runs on "
                                          "pipeline rank c % pp)"),
                                 cl::sub(compile));
cl::opt<int64_t> globalBatch("global-batch-size", cl::init(0),
                             cl::desc("samples per iteration; with pipeline parallelism the schedule is compiled "
                                      "for its microbatches (default: micro batch x dp x pp)"),
                             cl::sub(compile));
cl::opt<double> forwardCost("pipeline-forward-cost", cl::init(1.0),
                            cl::desc("a chunk forward's cost in the simulated schedule (--dump-ir trace)"),
                            cl::sub(compile));
cl::opt<double> backwardCost("pipeline-backward-cost", cl::init(2.0),
                             cl::desc("a chunk backward's cost in the simulated schedule"), cl::sub(compile));
cl::opt<bool> sp("sequence-parallel", cl::desc("sequence parallelism (needs --tp > 1)"), cl::sub(compile));
cl::alias spAlias("sp", cl::aliasopt(sp), cl::desc("alias for --sequence-parallel"));
cl::opt<int64_t> makeVocabDivisible("make-vocab-size-divisible-by", cl::init(128),
                                    cl::desc("pad the vocabulary to a multiple of this x tp (Megatron's flag; 1 = "
                                             "pad only as tp needs)"),
                                    cl::sub(compile));
cl::opt<int64_t> ddpBucketSize("ddp-bucket-size", cl::init(40000000),
                               cl::desc("elements per data-parallel gradient all-reduce (Megatron's flag and default)"),
                               cl::sub(compile));
cl::opt<bool> overlapGradReduce("overlap-grad-reduce",
                                cl::desc("start each data-parallel gradient bucket's all-reduce during the last "
                                         "microbatch's backward, once its gradients are final (Megatron's flag)"),
                                cl::sub(compile));
cl::opt<bool> rankLayout("rank-layout", cl::desc("print which global rank holds which (pp, dp, tp) coordinate"),
                         cl::sub(compile));
cl::opt<bool> noBuild("no-build", cl::desc("write OUT/main.cpp (main.cu) and OUT/CMakeLists.txt but do not build"),
                      cl::sub(compile));
cl::opt<std::string> targetName("target", cl::init("cpu"),
                                cl::desc("cpu (default) or cuda (needs megac built with the CUDA toolkit)"),
                                cl::sub(compile));

int fail(const Twine &message) {
  errs() << "megac compile: error: " << message << "\n";
  return 1;
}

bool writeFile(StringRef path, StringRef text) {
  return megac::writeTextFile(path, [&](raw_ostream &os) { os << text; });
}

#ifdef MEGAC_CUDA_COMPILER
constexpr bool kHaveCuda = true;
#else
constexpr bool kHaveCuda = false;
#endif

/// The program's source file in OUT.
StringRef sourceName(megac::Target target) { return target == megac::Target::Cuda ? "main.cu" : "main.cpp"; }

std::string outputCMake(megac::Target target) {
  bool cuda = target == megac::Target::Cuda;
  std::string text = "# Builds the generated training program against megac's runtime.\n"
                     "# megac compile already built ./train; this is for other machines (set MEGART_DIR).\n"
                     "cmake_minimum_required(VERSION 3.20)\n";
  // Before project(), which fixes nvcc and its default architecture when it enables CUDA.
  if (cuda)
    text += "if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)\n"
            "  set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)\nendif()\n"
            "if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)\n  set(CMAKE_CUDA_ARCHITECTURES 80-real 90)\nendif()\n";
  text += std::string("project(megac_train LANGUAGES C CXX") + (cuda ? " CUDA" : "") + ")\n";
  text += std::string("set(CMAKE_CXX_STANDARD 17)\n") +
          (cuda ? "set(CMAKE_CUDA_STANDARD 17)\n"
                : "set(MEGART_CUDA OFF CACHE BOOL \"a CPU program needs no CUDA backend\" FORCE)\n") +
          "set(MEGART_DIR \"" MEGAC_RUNTIME_SOURCE_DIR "\" CACHE PATH \"megac's runtime/ folder\")\n"
          "add_subdirectory(${MEGART_DIR} megart EXCLUDE_FROM_ALL)\n";
  text += cuda ? "add_executable(train main.cu)\ntarget_link_libraries(train PRIVATE megart-cuda)\n"
               : "add_executable(train main.cpp)\ntarget_link_libraries(train PRIVATE megart)\n";
  // The generated tables initialise their fields by name (C++20 designated initializers).
  text +=
      std::string("set_target_properties(train PROPERTIES CXX_STANDARD 20") + (cuda ? " CUDA_STANDARD 20" : "") + ")\n";
  return text;
}

/// Runs one build command; on failure says which and how it ended.
int run(ArrayRef<std::string> args, const Twine &what) {
  SmallVector<StringRef> argRefs(args.begin(), args.end());
  std::string message;
  int rc = sys::ExecuteAndWait(args[0], argRefs, std::nullopt, {}, 0, 0, &message);
  if (rc == 0)
    return 0;
  std::string cmd;
  for (StringRef a : argRefs)
    cmd += a.str() + " ";
  return fail(what + " failed (" + (message.empty() ? "exit " + std::to_string(rc) : message) +
              "); the command was:\n  " + cmd);
}

void appendSplit(SmallVectorImpl<std::string> &args, StringRef list, StringRef prefix = "") {
  SmallVector<StringRef> items;
  list.split(items, ' ', -1, /*KeepEmpty=*/false);
  for (StringRef item : items)
    args.push_back((prefix + item).str());
}

/// Compiles OUT/main.cpp (main.cu: nvcc, then the host compiler links) against the runtime
/// built alongside megac.
int buildProgram(StringRef out, megac::Target target) {
  SmallString<128> source(out), object(out), binary(out);
  sys::path::append(source, sourceName(target));
  sys::path::append(object, "main.o");
  sys::path::append(binary, "train");
  SmallVector<std::string> link = {MEGAC_CXX_COMPILER, "-fopenmp", "-o", std::string(binary)};
  if (target == megac::Target::Cuda) {
#ifdef MEGAC_CUDA_COMPILER
    // sm_80 (A100) and sm_90 (H100/H200) machine code, and sm_90 PTX for newer GPUs.
    SmallVector<std::string> compile = {MEGAC_CUDA_COMPILER,
                                        "-std=c++20",
                                        "-O2",
                                        "-x",
                                        "cu",
                                        "-c",
                                        "-gencode=arch=compute_80,code=sm_80",
                                        "-gencode=arch=compute_90,code=sm_90",
                                        "-gencode=arch=compute_90,code=compute_90",
                                        "-Xcompiler=-fopenmp",
                                        "-I" MEGAC_RUNTIME_INCLUDE_DIR};
    appendSplit(compile, MEGAC_CUDA_INCLUDE_DIRS, "-I");
    compile.append({std::string(source), "-o", std::string(object)});
    if (int rc = run(compile, "compiling " + source.str() + " with nvcc"))
      return rc;
    link.append({std::string(object), MEGAC_CUDA_RUNTIME_LIBRARY, MEGAC_RUNTIME_LIBRARY});
    appendSplit(link, MEGAC_RUNTIME_LINK);
    appendSplit(link, MEGAC_CUDA_LINK);
#endif
  } else {
    link.append({"-std=c++20", "-O2"});    // the tables' designated initializers
    appendSplit(link, MEGAC_RUNTIME_ARCH); // the runtime's target: -march=native unless MEGART_PORTABLE
    link.append({"-I" MEGAC_RUNTIME_INCLUDE_DIR, std::string(source), MEGAC_RUNTIME_LIBRARY});
    appendSplit(link, MEGAC_RUNTIME_LINK);
  }
  return run(link, "building " + binary.str());
}

/// --target: the CPU unless asked for CUDA (a GPU here says nothing of where OUT/train runs).
Expected<megac::Target> resolveTarget() {
  if (targetName == "cpu")
    return megac::Target::Cpu;
  if (targetName != "cuda")
    return createStringError("--target " + targetName + " is not a target; use cpu or cuda");
  // Writing main.cu needs no toolkit; building OUT/train here does.
  if (!kHaveCuda && !noBuild)
    return createStringError("--target cuda: megac was built without the CUDA toolkit (no nvcc found at build "
                             "time), so it cannot build OUT/train here; install CUDA at /usr/local/cuda and "
                             "rebuild with scripts/build.sh, or add --no-build and build OUT/CMakeLists.txt on "
                             "the GPU machine");
  return megac::Target::Cuda;
}

} // namespace

int megac::runCompile() {
  auto start = std::chrono::steady_clock::now();
  if (ddpBucketSize < 1)
    return fail("--ddp-bucket-size must be >= 1 element, got " + Twine(ddpBucketSize));
  if (microBatch < 1)
    return fail("--micro-batch-size must be >= 1, got " + Twine(microBatch));
  ScheduleCosts costs{forwardCost, backwardCost};
  if (!(costs.forward > 0) || !(costs.backward > 0))
    return fail("--pipeline-forward-cost and --pipeline-backward-cost must be > 0, got " +
                std::to_string(costs.forward) + " and " + std::to_string(costs.backward));
  Expected<megac::Target> target = resolveTarget();
  if (!target)
    return fail(toString(target.takeError()));

  auto file = MemoryBuffer::getFile(specPath);
  if (!file)
    return fail("cannot read spec " + specPath + ": " + file.getError().message());
  Expected<ModelSpec> spec = parseModelSpec((*file)->getBuffer(), specPath);
  if (!spec)
    return fail(toString(spec.takeError()));

  ParallelPlan plan;
  plan.pp = pp, plan.dp = dp, plan.tp = tp;
  plan.sp = sp;
  plan.makeVocabSizeDivisibleBy = makeVocabDivisible;
  plan.vpp = vpp;
  plan.layersPerVirtualStage = layersPerVirtualStage;
  plan.pipelineLayout.assign(pipelineLayout.begin(), pipelineLayout.end());
  plan.pipelineSchedule = pipelineSchedule;
  plan.ddpBucketSize = ddpBucketSize;
  plan.overlapGradReduce = overlapGradReduce;
  if (globalBatch != 0) {
    int64_t perIteration = microBatch * std::max<int64_t>(dp, 1);
    if (globalBatch < 0 || globalBatch % perIteration != 0)
      return fail("--global-batch-size " + Twine(globalBatch) +
                  " is not a positive multiple of micro batch x dp = " + Twine(perIteration) + "; use " +
                  Twine(std::max<int64_t>(1, globalBatch / perIteration) * perIteration));
    if (pp == 1)
      return fail("--global-batch-size is compiled in only with pipeline parallelism; without it pass it to "
                  "OUT/train instead");
    plan.numMicrobatches = globalBatch / perIteration;
  }
  if (overlapGradReduce && dp == 1)
    errs() << "megac compile: note: --overlap-grad-reduce has nothing to overlap without data parallelism "
              "(--dp 1); the program is the same without it\n";
  if (Error e = resolvePipeline(plan, *spec))
    return fail(specPath + ": " + toString(std::move(e)));
  if (Error e = validatePlan(plan, *spec))
    return fail(specPath + ": " + toString(std::move(e)));
  if (rankLayout)
    outs() << plan.rankLayout();

  if (!dumpDir.empty())
    if (std::error_code ec = sys::fs::create_directories(dumpDir))
      return fail("cannot create --dump-ir folder " + dumpDir + ": " + ec.message());
  if (std::error_code ec = sys::fs::create_directories(outDir))
    return fail("cannot create output folder " + outDir + ": " + ec.message());

  mlir::MLIRContext context;
  int64_t paddedVocab = plan.paddedVocab(spec->vocabSize);
  std::string padding;
  if (paddedVocab != spec->vocabSize)
    padding = "padded vocabulary " + std::to_string(spec->vocabSize) + " -> " + std::to_string(paddedVocab) +
              " (make-vocab-size-divisible-by " + std::to_string(plan.makeVocabSizeDivisibleBy) + " x tp " +
              std::to_string(plan.tp) + "; padding excluded from the softmax)";
  mlir::OwningOpRef<mlir::ModuleOp> module = buildModel(context, *spec, plan, microBatch);
  if (failed(mlir::verify(*module)))
    return fail("internal: the frontend built invalid IR for " + specPath);
  IRDumps dumps(dumpDir);
  if (!dumps.removeStale() || !dumps.writeFrontend(*module))
    return 1;

  mlir::PassManager pm(&context);
  buildTrainingPipeline(pm);
  dumps.instrument(pm);
  if (failed(pm.run(*module)))
    return fail("the pass pipeline failed (see the error above)");
  if (!dumps.ok())
    return 1;
  for (pipe::ScheduleOp scheduleOp : module->getOps<pipe::ScheduleOp>()) {
    Expected<pipeline::Schedule> schedule = pipe::scheduleFromOp(scheduleOp);
    if (!schedule)
      return fail("internal: " + toString(schedule.takeError()));
    if (!reportPipelineSchedule(plan, *schedule, dumps, costs))
      return 1;
  }

  std::string header = "// Generated by `megac compile " + specPath +
                       "`; do not edit.\n"
                       "// Plan: " +
                       plan.summary() + " (" + std::to_string(plan.worldSize()) + " ranks); micro batch " +
                       std::to_string(microBatch) + ".\n";
  SmallVector<StringRef> layoutLines;
  std::string layout = plan.rankLayout();
  StringRef(layout).rtrim().split(layoutLines, '\n');
  for (StringRef line : layoutLines)
    header += ("// " + line.rtrim() + "\n").str();
  header += "\n";
  std::string summary = spec->family + " " + std::to_string(spec->numLayers) + " layers, hidden " +
                        std::to_string(spec->hiddenSize) + ", " + std::to_string(spec->numAttentionHeads) +
                        " heads, seq " + std::to_string(spec->seqLength) + ", vocab " +
                        std::to_string(spec->vocabSize) + "; plan " + plan.summary() + "; micro batch " +
                        std::to_string(microBatch) + (padding.empty() ? "" : "; " + padding);
  std::string code, memoryPlan;
  raw_string_ostream codeOs(code), planOs(memoryPlan);
  const HuggingFaceConfig hfConfig = huggingFaceConfig(*spec);
  const EmitOptions emitOptions{header, summary, hfConfig.json, (*file)->getBuffer().str(), *target};
  if (failed(emitTrainingProgram(*module, emitOptions, codeOs, planOs)))
    return fail("emitting C++ failed (see the error above)");
  if (!dumps.write("memory-plan.txt", [&](raw_ostream &os) { os << memoryPlan; }))
    return 1;

  SmallString<128> mainPath(outDir), cmakePath(outDir), planPath(outDir);
  sys::path::append(mainPath, sourceName(*target));
  sys::path::append(cmakePath, "CMakeLists.txt");
  sys::path::append(planPath, "memory-plan.txt");
  if (!writeFile(mainPath, code) || !writeFile(cmakePath, outputCMake(*target)) || !writeFile(planPath, memoryPlan))
    return 1;
  if (!noBuild)
    if (int rc = buildProgram(outDir, *target))
      return rc;
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  outs() << "megac: " << summary << "\n"
         << "megac: target " << (*target == megac::Target::Cuda ? "cuda" : "cpu") << "\n"
         << (hfConfig.json.empty() ? "megac: checkpoints get no Hugging Face config.json: " + hfConfig.whyNone + "\n"
                                   : std::string())
         << "megac: wrote " << outDir << "/" << (noBuild ? sourceName(*target) : StringRef("train")) << " in "
         << format("%.1f", seconds) << " s\n";
  return 0;
}
