// megac compile: spec + plan -> tx IR -> the training pipeline -> C++ -> OUT/train, dumping the IR
// after each pass.
#include "BuildProgram.h"
#include "Commands.h"
#include "IRDumps.h"
#include "MegacPaths.h"
#include "PipelineSchedule.h"
#include "RepeatedFlags.h"
#include "RunCommand.h"
#include "SimulationFlags.h"
#include "SpecSource.h"
#include "StagedOutput.h"
#include "TextFile.h"
#include "pipe/ScheduleIR.h"

#include "megac/Config.h"
#include "megac/Driver/Compile.h"
#include "megac/Frontend/BuildModel.h"
#include "megac/Frontend/HuggingFaceConfig.h"
#include "megac/Frontend/ModelSize.h"
#include "megac/Limits.h"
#include "megac/Plan/PlanLimits.h"
#include "megac/Plan/LoraFlags.h"
#include "megac/Plan/RecomputeFlags.h"
#include "megac/Plan/ShardingFlags.h"
#include "megac/Analysis/RankCommunication.h"
#include "megac/Analysis/RankMemory.h"
#include "megac/Transforms/TrainingPipeline.h"
#include "megac/Target/EmitCpp.h"
#include "megac/Frontend/ModelFlops.h"
#include "megac/Sim/Simulate.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"

#include <chrono>
#include <cmath>

using namespace llvm;
namespace cl = llvm::cl;

namespace megac::cli {
extern cl::SubCommand compile;
extern cl::SubCommand simulate;
extern cl::SubCommand plan;
} // namespace megac::cli

namespace {
using megac::cli::compile;
using megac::cli::simulate;
using megac::cli::plan;

// A list, so that a stray second argument is named in the error rather than refused generically.
cl::list<std::string> specPaths(cl::Positional, cl::OneOrMore,
                                cl::desc("SPEC.yaml"),
                                cl::sub(compile), cl::sub(simulate));
cl::opt<int64_t> seqLength("seq-length",
                           cl::desc("tokens per sample the program is compiled for (Megatron's flag; default: the "
                                    "spec's seq_length, a config.json's max_position_embeddings)"),
                           cl::sub(compile), cl::sub(simulate), cl::sub(plan),
                           megac::recordValues<int64_t>("--seq-length"));
cl::opt<double> hiddenDropout("hidden-dropout",
                              cl::desc("dropout on the embeddings and before each residual add (Megatron's flag; "
                                       "default: the spec's hidden_dropout)"),
                              cl::sub(compile), cl::sub(simulate), cl::sub(plan),
                              megac::recordValues<double>("--hidden-dropout"));
cl::opt<double> attentionDropout("attention-dropout",
                                 cl::desc("dropout on the attention probabilities (Megatron's flag; default: the "
                                          "spec's attention_dropout)"),
                                 cl::sub(compile), cl::sub(simulate), cl::sub(plan),
                                 megac::recordValues<double>("--attention-dropout"));
cl::opt<std::string> outDir("o", cl::Required, cl::desc("output folder; OUT/train is the program"),
                            cl::value_desc("OUT"), cl::sub(compile),
                            megac::recordValues<std::string>("-o"));
cl::opt<std::string> dumpDir("dump-ir", cl::desc("write the IR after every step into DIR"), cl::value_desc("DIR"),
                             cl::sub(compile), megac::recordValues<std::string>("--dump-ir"));
cl::opt<int64_t> microBatch("micro-batch-size", cl::init(1),
                            cl::desc("microbatch size (shapes are static; OUT/train checks it)"), cl::sub(compile), cl::sub(simulate),
                            megac::recordValues<int64_t>("--micro-batch-size"));
cl::opt<int64_t> tp("tensor-model-parallel-size", cl::init(1), cl::desc("tensor parallel size"), cl::sub(compile), cl::sub(simulate),
                    megac::recordValues<int64_t>("--tensor-model-parallel-size (--tp)"));
cl::alias tpAlias("tp", cl::aliasopt(tp), cl::desc("alias for --tensor-model-parallel-size"));
cl::opt<int64_t> pp("pipeline-model-parallel-size", cl::init(1), cl::desc("pipeline parallel size"), cl::sub(compile), cl::sub(simulate),
                    megac::recordValues<int64_t>("--pipeline-model-parallel-size (--pp)"));
cl::alias ppAlias("pp", cl::aliasopt(pp), cl::desc("alias for --pipeline-model-parallel-size"));
cl::opt<int64_t> dp("data-parallel-size", cl::init(1), cl::desc("data parallel size"), cl::sub(compile), cl::sub(simulate),
                    megac::recordValues<int64_t>("--data-parallel-size (--dp)"));
cl::alias dpAlias("dp", cl::aliasopt(dp), cl::desc("alias for --data-parallel-size"));
cl::opt<int64_t> ep("expert-model-parallel-size", cl::init(1),
                    cl::desc("expert parallel size: groups of this many data-parallel ranks split the experts"),
                    cl::sub(compile), cl::sub(simulate),
                    megac::recordValues<int64_t>("--expert-model-parallel-size (--ep)"));
cl::alias epAlias("ep", cl::aliasopt(ep), cl::desc("alias for --expert-model-parallel-size"));
cl::opt<int64_t> etp("expert-tensor-parallel-size", cl::init(0),
                     cl::desc("tensor parallel size of the experts: 1 (each expert whole on every tensor-parallel "
                              "rank) or the tensor parallel size (the default, Megatron's: each expert's ffn split)"),
                     cl::sub(compile), cl::sub(simulate),
                     megac::recordValues<int64_t>("--expert-tensor-parallel-size"));
cl::opt<int64_t> vpp("num-virtual-stages-per-pipeline-rank", cl::init(1),
                     cl::desc("chunks (virtual pipeline stages) per pipeline rank"), cl::sub(compile), cl::sub(simulate),
                     megac::recordValues<int64_t>("--num-virtual-stages-per-pipeline-rank (--vpp)"));
cl::alias vppAlias("vpp", cl::aliasopt(vpp), cl::desc("alias for --num-virtual-stages-per-pipeline-rank"));
cl::opt<int64_t> layersPerVirtualStage("num-layers-per-virtual-pipeline-stage", cl::init(0),
                                       cl::desc("layers per chunk (Megatron's flag; sets --vpp)"), cl::sub(compile), cl::sub(simulate),
                                       megac::recordValues<int64_t>("--num-layers-per-virtual-pipeline-stage"));
cl::opt<std::string> pipelineSchedule("pipeline-schedule",
                                      cl::desc("gpipe, 1f1b or interleaved (default: interleaved when --vpp > 1, "
                                               "else 1f1b)"),
                                      cl::sub(compile), cl::sub(simulate), megac::recordValues<std::string>("--pipeline-schedule"));
cl::list<int64_t> pipelineLayout("pipeline-layout", cl::CommaSeparated,
                                 cl::desc("layers of each chunk, in chunk order (pp x vpp counts; chunk c runs on "
                                          "pipeline rank c % pp)"),
                                 cl::sub(compile), cl::sub(simulate));
cl::opt<int64_t> globalBatch("global-batch-size", cl::init(0),
                             cl::desc("samples per iteration; with pipeline parallelism the schedule is compiled "
                                      "for its microbatches (default: micro batch x dp x pp)"),
                             cl::sub(compile), cl::sub(simulate), cl::sub(plan),
                             megac::recordValues<int64_t>("--global-batch-size"));
cl::opt<double> forwardCost("pipeline-forward-cost", cl::init(1.0),
                            cl::desc("a chunk forward's cost in the simulated schedule (--dump-ir trace)"),
                            cl::sub(compile), megac::recordValues<double>("--pipeline-forward-cost"));
cl::opt<double> backwardCost("pipeline-backward-cost", cl::init(2.0),
                             cl::desc("a chunk backward's cost in the simulated schedule"), cl::sub(compile),
                             megac::recordValues<double>("--pipeline-backward-cost"));
cl::opt<bool> sp("sequence-parallel", cl::desc("sequence parallelism (needs --tp > 1)"), cl::sub(compile), cl::sub(simulate),
                 megac::recordValues<bool>("--sequence-parallel (--sp)"));
cl::alias spAlias("sp", cl::aliasopt(sp), cl::desc("alias for --sequence-parallel"));
cl::opt<int64_t> makeVocabDivisible("make-vocab-size-divisible-by", cl::init(128),
                                    cl::desc("pad the vocabulary to a multiple of this x tp (Megatron's flag; 1 = "
                                             "pad only as tp needs)"),
                                    cl::sub(compile), cl::sub(simulate), megac::recordValues<int64_t>("--make-vocab-size-divisible-by"));
cl::opt<int64_t> ddpBucketSize("ddp-bucket-size", cl::init(40000000),
                               cl::desc("elements per data-parallel gradient all-reduce (Megatron's flag and default)"),
                               cl::sub(compile), cl::sub(simulate), megac::recordValues<int64_t>("--ddp-bucket-size"));
cl::opt<bool> overlapGradReduce("overlap-grad-reduce",
                                cl::desc("start each data-parallel gradient bucket's all-reduce during the last "
                                         "microbatch's backward, once its gradients are final (Megatron's flag)"),
                                cl::sub(compile), cl::sub(simulate), megac::recordValues<bool>("--overlap-grad-reduce"));
cl::opt<bool> useDistributedOptimizer(
    "use-distributed-optimizer",
    cl::desc("shard the optimizer state over the data-parallel ranks, gradients reduce-scattered (Megatron's "
             "flag; = --data-parallel-sharding-strategy optim)"),
    cl::sub(compile), cl::sub(simulate), megac::recordValues<bool>("--use-distributed-optimizer"));
cl::opt<std::string> shardingStrategy(
    "data-parallel-sharding-strategy",
    cl::desc("no_shard, optim (ZeRO-1), optim_grads (ZeRO-2) or optim_grads_params (ZeRO-3 / FSDP): the training "
             "state sharded over the data-parallel ranks (Megatron-FSDP's flag)"),
    cl::sub(compile), cl::sub(simulate), megac::recordValues<std::string>("--data-parallel-sharding-strategy"));
cl::opt<int64_t> shardDegree("data-parallel-shard-degree", cl::init(0),
                             cl::desc("dp ranks one copy of the sharded state spreads over (torchtitan's flag; "
                                      "dp = shard x replicate; -1 = the rest of dp)"),
                             cl::sub(compile), cl::sub(simulate), megac::recordValues<int64_t>("--data-parallel-shard-degree"));
cl::opt<int64_t> replicateDegree("data-parallel-replicate-degree", cl::init(0),
                                 cl::desc("copies of the sharded state, each over dp / replicate ranks (torchtitan's "
                                          "flag: hybrid sharding)"),
                                 cl::sub(compile), cl::sub(simulate), megac::recordValues<int64_t>("--data-parallel-replicate-degree"));
cl::opt<int64_t> optimizerInstances("num-distributed-optimizer-instances", cl::init(0),
                                    cl::desc("copies of the distributed optimizer's state, each sharded over dp / N "
                                             "ranks (Megatron's flag)"),
                                    cl::sub(compile), cl::sub(simulate),
                                    megac::recordValues<int64_t>("--num-distributed-optimizer-instances"));
cl::opt<bool> overlapParamGather("overlap-param-gather",
                                 cl::desc("prefetch the next parameter all-gather while the current layer computes "
                                          "(Megatron's flag; needs sharding and --overlap-grad-reduce)"),
                                 cl::sub(compile), cl::sub(simulate), megac::recordValues<bool>("--overlap-param-gather"));
cl::opt<std::string> reshardAfterForward(
    "fsdp-reshard-after-forward",
    cl::desc("optim_grads_params: free gathered parameters after forward: default (always, never under pipeline "
             "parallelism), always or never (torchtitan's option)"),
    cl::sub(compile), cl::sub(simulate), megac::recordValues<std::string>("--fsdp-reshard-after-forward"));
cl::opt<bool> optimizerCpuOffload("optimizer-cpu-offload",
                                  cl::desc("ZeRO-Offload: step the distributed optimizer's shards on the host, their "
                                           "master weights and moments in host memory (Megatron's flag)"),
                                  cl::sub(compile), cl::sub(simulate), megac::recordValues<bool>("--optimizer-cpu-offload"));
cl::opt<std::string> offloadFraction("optimizer-offload-fraction",
                                     cl::desc("with --optimizer-cpu-offload: the share of each rank's shard stepped on "
                                              "the host, above 0 and at most 1 (default 1; Megatron's flag)"),
                                     cl::sub(compile), cl::sub(simulate), megac::recordValues<std::string>("--optimizer-offload-fraction"));
cl::opt<std::string> recomputeGranularity(
    "recompute-granularity",
    cl::desc("full (each layer recomputed in backward from its stashed input) or selective (the modules of "
             "--recompute-modules recomputed inside each layer) (Megatron's flag)"),
    cl::sub(compile), cl::sub(simulate), megac::recordValues<std::string>("--recompute-granularity"));
cl::opt<bool> recomputeActivations("recompute-activations",
                                   cl::desc("= --recompute-granularity selective (Megatron's flag)"), cl::sub(compile), cl::sub(simulate),
                                   megac::recordValues<bool>("--recompute-activations"));
cl::opt<std::string> recomputeMethod("recompute-method",
                                     cl::desc("full recomputation: uniform (groups of --recompute-num-layers layers, "
                                              "each stashing its input) or block (the first --recompute-num-layers "
                                              "layers of each pipeline chunk) (Megatron's flag)"),
                                     cl::sub(compile), cl::sub(simulate), megac::recordValues<std::string>("--recompute-method"));
cl::opt<int64_t> recomputeNumLayers("recompute-num-layers", cl::init(0),
                                    cl::desc("full recomputation: N of --recompute-method (Megatron's flag)"),
                                    cl::sub(compile), cl::sub(simulate), megac::recordValues<int64_t>("--recompute-num-layers"));
cl::list<std::string> recomputeModules("recompute-modules", cl::CommaSeparated,
                                       cl::desc("selective recomputation: core_attn (default), mlp, layernorm, "
                                                "comma-separated (Megatron's flag)"),
                                       cl::sub(compile), cl::sub(simulate));
cl::opt<bool> distributeSavedActivations(
    "distribute-saved-activations",
    cl::desc("full recomputation with tp: split each stashed layer input over the tensor-parallel ranks, gathered "
             "again before it is recomputed (Megatron's flag)"),
    cl::sub(compile), cl::sub(simulate), megac::recordValues<bool>("--distribute-saved-activations"));
cl::opt<int64_t> loraRank("lora-rank", cl::init(0),
                          cl::desc("LoRA fine-tuning: freeze the model and train rank-r adapters on its linear layers "
                                   "(PEFT's r, e.g. 8; 0: off)"),
                          cl::sub(compile), cl::sub(simulate), megac::recordValues<int64_t>("--lora-rank"));
cl::opt<double> loraAlpha("lora-alpha", cl::desc("LoRA: the adapters are scaled by alpha / rank (PEFT's lora_alpha; "
                                                 "default: the rank)"),
                          cl::sub(compile), cl::sub(simulate), megac::recordValues<double>("--lora-alpha"));
cl::opt<double> loraDropout("lora-dropout", cl::init(0.0),
                            cl::desc("LoRA: dropout on each adapter's input (PEFT's lora_dropout, default 0)"),
                            cl::sub(compile), cl::sub(simulate), megac::recordValues<double>("--lora-dropout"));
cl::list<std::string> loraTargetModules(
    "lora-target-modules", cl::CommaSeparated,
    cl::desc("LoRA: the linear layers to adapt, by Hugging Face module name (q_proj,v_proj; c_attn) or all-linear "
             "(every one but the output layer); default PEFT's for the architecture (gpt2: c_attn; llama: "
             "q_proj,v_proj)"),
    cl::sub(compile), cl::sub(simulate));
cl::opt<bool> useRslora("use-rslora", cl::desc("LoRA: scale by alpha / sqrt(rank) (rank-stabilised LoRA, PEFT's flag)"),
                        cl::sub(compile), cl::sub(simulate), megac::recordValues<bool>("--use-rslora"));
cl::opt<bool> qlora("qlora", cl::desc("QLoRA: keep the frozen base's linear weights in 4-bit NormalFloat with double "
                                      "quantization (bitsandbytes' NF4), dequantized before each GEMM; with --lora-rank"),
                    cl::sub(compile), cl::sub(simulate), megac::recordValues<bool>("--qlora"));
cl::opt<int64_t> qloraBlockSize("qlora-block-size", cl::desc("QLoRA: elements per NF4 block (default 64, as QLoRA)"),
                                cl::sub(compile), cl::sub(simulate), megac::recordValues<int64_t>("--qlora-block-size"));
cl::opt<bool> bf16("bf16",
                   cl::desc("store activations and their gradients in bf16 (autocast rules: GEMM inputs and outputs, "
                            "norms' outputs, attention); loss, softmax statistics, parameters, their gradients and "
                            "the optimizer stay fp32 (Megatron's flag, compile-time: OUT/train runs in bf16)"),
                   cl::sub(compile), cl::sub(simulate), cl::sub(plan), megac::recordValues<bool>("--bf16"));
cl::opt<bool> fp16("fp16", cl::desc("as --bf16 in fp16 (OUT/train scales the loss dynamically) (Megatron's flag)"),
                   cl::sub(compile), cl::sub(simulate), cl::sub(plan), megac::recordValues<bool>("--fp16"));
cl::opt<std::string> clusterFile("cluster", cl::desc("the cluster to simulate on: a cluster file (docs/simulate.md) or the name of one in clusters/"),
                                 cl::value_desc("NAME|FILE.yaml"), cl::sub(simulate), cl::sub(plan),
                                 megac::recordValues<std::string>("--cluster"));
cl::opt<std::string> attentionBackend("attention-backend",
                                      cl::desc("how attention is costed: flash (a fused kernel at the cluster's "
                                               "attention_efficiency, default) or unfused (Megatron's unfused path: "
                                               "batched GEMMs and a softmax over the s x s scores)"),
                                      cl::value_desc("flash|unfused"), cl::init("flash"), cl::sub(simulate),
                                      cl::sub(plan));
cl::opt<bool> gradReduceIn16Bit("grad-reduce-in-bf16",
                                cl::desc("cost the data-parallel gradient sums at 2 bytes per element (as OUT/train "
                                         "--grad-reduce-in-bf16 runs them; plain data parallelism only)"),
                                cl::sub(simulate), cl::sub(plan));
cl::opt<std::string> tracePath("trace",
                               cl::desc("write the simulated iteration as a Perfetto / Chrome trace, one process "
                                        "per rank class (pp stage)"),
                               cl::value_desc("FILE.json"), cl::sub(simulate), megac::recordValues<std::string>("--trace"));
cl::opt<double> trainTokens("train-tokens",
                            cl::desc("a token budget: print how long training it takes (e.g. 3e11)"), cl::init(0),
                            cl::sub(simulate), megac::recordValues<double>("--train-tokens"));
cl::opt<bool> simulationJson("json", cl::desc("print the simulation as one JSON object"), cl::sub(simulate));
cl::opt<bool> rankLayout("rank-layout", cl::desc("print which global rank holds which (pp, dp, tp) coordinate"),
                         cl::sub(compile));
cl::opt<bool> noBuild("no-build", cl::desc("write OUT/main.cpp (main.cu) and OUT/CMakeLists.txt but do not build"),
                      cl::sub(compile));
cl::opt<std::string> targetName("target", cl::init("cpu"),
                                cl::desc("cpu (default) or cuda (needs megac built with the CUDA toolkit)"),
                                cl::sub(compile), megac::recordValues<std::string>("--target"));

int fail(const Twine &message) {
  errs() << (megac::cli::simulate ? "megac simulate" : "megac compile") << ": error: " << message << "\n";
  return 1;
}

bool writeFile(StringRef path, StringRef text) {
  return megac::writeTextFile(path, [&](raw_ostream &os) { os << text; });
}

/// The simulated schedule adds the costs up over every (chunk, microbatch).
constexpr double kMaxScheduleCost = 1e12;

#ifdef MEGAC_CUDA_COMPILER
constexpr bool kHaveCuda = true;
#else
constexpr bool kHaveCuda = false;
#endif

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

/// The flags on their own: given once, sizes and costs within megac/Limits.h. Plan sizes are
/// checked with the plan (planFromFlags).
Error checkFlags() {
  if (std::optional<std::string> conflict = megac::conflictingFlagValues())
    return createStringError(*conflict);
  if (specPaths.size() > 1) {
    if (llvm::is_contained(megac::kRecomputeModules, StringRef(specPaths[1])))
      return createStringError("megac compile takes one SPEC.yaml, but also got '" + specPaths[1] +
                               "'; --recompute-modules takes its modules comma-separated, e.g. "
                               "--recompute-modules core_attn,mlp");
    return createStringError("megac compile takes one SPEC.yaml, but also got '" + specPaths[1] +
                             "'; remove it (flags start with --, and a flag's value follows it)");
  }
  // One --pipeline-layout: a second would silently append to the first.
  for (unsigned i = 1; i < pipelineLayout.size(); ++i)
    if (pipelineLayout.getPosition(i) != pipelineLayout.getPosition(0))
      return createStringError("--pipeline-layout is given more than once; give every chunk's layer count in one "
                               "comma-separated list, e.g. --pipeline-layout 2,3,3");
  if (microBatch < 1 || microBatch > megac::limits::kMicroBatch)
    return megac::sizeOutOfRange("--micro-batch-size", microBatch, 1, megac::limits::kMicroBatch,
                                 "samples per microbatch");
  for (auto [flag, cost] : {std::pair{"--pipeline-forward-cost", double(forwardCost)},
                            {"--pipeline-backward-cost", double(backwardCost)}})
    if (!std::isfinite(cost) || cost <= 0 || cost > kMaxScheduleCost) {
      std::string value;
      raw_string_ostream(value) << format("%g", cost);
      return createStringError(std::string(flag) + " is " + value +
                               "; it must be a finite number > 0 and at most 1e12 (a relative time, e.g. 1.5)");
    }
  if (globalBatch < 0)
    return createStringError("--global-batch-size is " + std::to_string(globalBatch) +
                             "; give a positive number of samples (or leave it out: micro batch x dp x pp)");
  return Error::success();
}

/// --bf16 / --fp16, one at most.
Expected<megac::ActivationPrecision> precisionFromFlags() {
  if (bf16 && fp16)
    return createStringError("--bf16 and --fp16 are both given; choose one: --bf16 (fp32's exponent range, no loss "
                             "scaling) or --fp16 (dynamic loss scaling)");
  return bf16 ? megac::ActivationPrecision::Bf16 : fp16 ? megac::ActivationPrecision::Fp16
                                                        : megac::ActivationPrecision::Fp32;
}

/// The plan the flags give: sizes within megac/Limits.h before anything multiplies them, and
/// --global-batch-size turned into microbatches.
Expected<megac::ParallelPlan> planFromFlags() {
  megac::ParallelPlan plan;
  if (etp.getNumOccurrences() && etp < 1) // 0 stands for "not given" in the plan
    return createStringError(inconvertibleErrorCode(), "--expert-tensor-parallel-size is " + std::to_string(etp) +
                                                           "; it must be 1 or the tensor parallel size (" +
                                                           std::to_string(tp) + ")");
  plan.pp = pp, plan.dp = dp, plan.tp = tp, plan.ep = ep, plan.etp = etp;
  plan.sp = sp;
  plan.makeVocabSizeDivisibleBy = makeVocabDivisible;
  plan.vpp = vpp;
  plan.layersPerVirtualStage = layersPerVirtualStage;
  plan.pipelineLayout.assign(pipelineLayout.begin(), pipelineLayout.end());
  if (!pipelineSchedule.empty()) {
    plan.pipelineSchedule = megac::pipeline::parseScheduleKind(pipelineSchedule);
    if (!plan.pipelineSchedule)
      return createStringError(inconvertibleErrorCode(), "--pipeline-schedule " + pipelineSchedule +
                                                             " is not a schedule; use gpipe, 1f1b or interleaved");
  }
  plan.ddpBucketSize = ddpBucketSize;
  plan.overlapGradReduce = overlapGradReduce;
  if (Error e = megac::checkPlanLimits(plan, megac::kPlanFlagNames))
    return std::move(e);
  // 0 is the flags' "not given": said explicitly, it asks for no shard or no copy at all.
  for (auto [opt, name] : {std::pair{&optimizerInstances, "--num-distributed-optimizer-instances"},
                           {&shardDegree, "--data-parallel-shard-degree"},
                           {&replicateDegree, "--data-parallel-replicate-degree"}})
    if (opt->getNumOccurrences() > 0 && *opt == 0)
      return createStringError(inconvertibleErrorCode(),
                               Twine(name) + " is 0; it must be at least 1 (or left out: its default follows from "
                                             "--data-parallel-size)");
  megac::ShardingFlags sharding{shardingStrategy,   useDistributedOptimizer, optimizerInstances,
                                shardDegree,        replicateDegree,         overlapParamGather,
                                reshardAfterForward, optimizerCpuOffload,    offloadFraction};
  if (Error e = megac::resolveSharding(plan, sharding))
    return std::move(e);
  megac::RecomputeFlags recompute{recomputeGranularity, recomputeActivations, recomputeMethod, recomputeNumLayers,
                                  {recomputeModules.begin(), recomputeModules.end()}, distributeSavedActivations};
  if (Error e = megac::resolveRecompute(plan, recompute))
    return std::move(e);
  Expected<megac::ActivationPrecision> precision = precisionFromFlags();
  if (!precision)
    return precision.takeError();
  plan.precision = *precision;
  if (globalBatch == 0)
    return plan;
  const int64_t perIteration = microBatch * dp; // both < 2^21
  if (globalBatch % perIteration != 0)
    return createStringError("--global-batch-size " + std::to_string(globalBatch) +
                             " is not a positive multiple of micro batch x dp = " + std::to_string(perIteration) +
                             "; use " + std::to_string(std::max<int64_t>(1, globalBatch / perIteration) * perIteration));
  if (pp == 1 && !megac::cli::simulate)
    return createStringError("--global-batch-size is compiled in only with pipeline parallelism; without it pass it "
                             "to OUT/train instead");
  const int64_t microbatches = globalBatch / perIteration;
  if (microbatches > megac::limits::kMicrobatches)
    return createStringError("--global-batch-size " + std::to_string(globalBatch) + " makes " +
                             std::to_string(microbatches) + " microbatches per iteration (global batch / (micro batch " +
                             std::to_string(microBatch) + " x dp " + std::to_string(dp) + ")), more than the " +
                             std::to_string(megac::limits::kMicrobatches) +
                             " an iteration may have; lower --global-batch-size or raise --micro-batch-size");
  if (pp == 1) // megac simulate: simulated for that batch, compiled for one microbatch
    return plan;
  plan.numMicrobatches = microbatches;
  return plan;
}

/// The comment header's rank layout: every rank for a small world; for a large one a line that
/// says how to list them (the table grows with the world: 2^20 ranks would be 30 MB of comments).
std::string headerRankLayout(const megac::ParallelPlan &plan) {
  constexpr int64_t kRanksListed = 64;
  if (plan.worldSize() > kRanksListed)
    return "// rank layout: " + std::to_string(plan.worldSize()) +
           " ranks, tp fastest, then dp, then pp (`megac compile --rank-layout` lists them)\n";
  std::string header;
  SmallVector<StringRef> layoutLines;
  std::string layout = plan.rankLayout();
  StringRef(layout).rtrim().split(layoutLines, '\n');
  for (StringRef line : layoutLines)
    header += ("// " + line.rtrim() + "\n").str();
  return header;
}

/// Files megac compile writes into OUT (a recompile replaces or removes each).
constexpr StringRef kOutputFiles[] = {"main.cpp",        "main.cu",          "main.o", "CMakeLists.txt",
                                      "memory-plan.txt", "rank-memory.json", "rank-communication.json", "train"};

/// megac simulate: the compiled module's iteration on `cluster`, printed (or as JSON).
int simulatePlan(mlir::ModuleOp module, const megac::ParallelPlan &plan, const megac::ModelSpec &spec,
                 const megac::SimulationFlags &flags) {
  const megac::sim::Cluster &cluster = flags.cluster;
  megac::sim::SimulationInputs options = flags.options;
  options.trace = !tracePath.empty();
  options.trainTokens = trainTokens;
  options.parameters = megac::parameterCount(spec);
  const megac::sim::Simulation result =
      megac::simulate(module, plan, spec, microBatch, globalBatch, cluster, options);
  if (!tracePath.empty() &&
      !megac::writeTextFile(tracePath, [&](raw_ostream &os) { os << megac::sim::traceJson(result, cluster) << "\n"; }))
    return 1;
  if (simulationJson)
    outs() << formatv("{0:2}", json::Value(megac::sim::simulationJson(result, cluster))) << "\n";
  else
    megac::sim::printSimulation(result, cluster, "megac: ", outs());
  return 0;
}

} // namespace

/// `megac compile ...` as typed, shell-quoted, without --data-parallel-size / --dp and their
/// value (nor --no-build): OUT/train started on another number of ranks prints it with the --dp
/// that fits.
static std::string commandWithoutDataParallelSize(llvm::ArrayRef<const char *> args) {
  auto quoted = [](StringRef arg) {
    if (!arg.empty() && arg.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                              "-_./=:,+@%") == StringRef::npos)
      return arg.str();
    std::string q = "'";
    for (char c : arg)
      q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
  };
  std::string command;
  for (size_t i = 0; i < args.size(); ++i) {
    StringRef name = StringRef(args[i]).ltrim('-');
    if (i > 0 && StringRef(args[i]).starts_with("-") && (name == "dp" || name == "data-parallel-size")) {
      ++i; // its value
      continue;
    }
    if (i > 0 && StringRef(args[i]).starts_with("-") &&
        (name.starts_with("dp=") || name.starts_with("data-parallel-size=") || name == "no-build"))
      continue; // --no-build too: the command is to build a program
    command += (command.empty() ? "" : " ") + quoted(args[i]);
  }
  return command;
}

megac::SpecOverrides megac::specOverrideFlags() {
  SpecOverrides o;
  if (seqLength.getNumOccurrences())
    o.seqLength = seqLength;
  if (hiddenDropout.getNumOccurrences())
    o.hiddenDropout = hiddenDropout;
  if (attentionDropout.getNumOccurrences())
    o.attentionDropout = attentionDropout;
  return o;
}

int megac::runCompile() {
  auto start = std::chrono::steady_clock::now();
  const bool simulating = static_cast<bool>(megac::cli::simulate);
  if (Error e = checkFlags())
    return fail(toString(std::move(e)));
  std::optional<SimulationFlags> simulation;
  if (simulating) {
    if (globalBatch == 0)
      return fail("megac simulate needs --global-batch-size B: the samples of one iteration");
    if (!std::isfinite(trainTokens) || trainTokens < 0 || trainTokens > 1e18) {
      std::string value;
      raw_string_ostream(value) << format("%g", double(trainTokens));
      return fail("--train-tokens is " + value + "; give a number of tokens, e.g. 3e11 (at most 1e18)");
    }
    Expected<SimulationFlags> flags = simulationFlags();
    if (!flags)
      return fail(toString(flags.takeError()));
    simulation = std::move(*flags);
  }
  Expected<megac::Target> target = resolveTarget();
  if (!target)
    return fail(toString(target.takeError()));
  const std::string &specPath = specPaths.front();
  const ScheduleCosts costs{forwardCost, backwardCost};

  Expected<SpecSource> source = readSpecSource(specPath, megac::specOverrideFlags());
  if (!source)
    return fail(toString(source.takeError()));
  const std::string *specText = &source->text;
  Expected<ModelSpec> spec = parseModelSpec(*specText, source->origin);
  if (!spec)
    return fail(toString(spec.takeError()));

  Expected<ParallelPlan> flagsPlan = planFromFlags();
  if (!flagsPlan)
    return fail(toString(flagsPlan.takeError()));
  ParallelPlan plan = std::move(*flagsPlan);
  if (overlapGradReduce && dp == 1)
    errs() << "megac compile: note: --overlap-grad-reduce has nothing to overlap without data parallelism "
              "(--dp 1); the program is the same without it\n";
  if (Error e = megac::checkPlanAgainstSpec(plan, *spec, microBatch))
    return fail(specPath + ": " + toString(std::move(e)));
  megac::LoraFlags loraFlags{loraRank, std::nullopt, loraDropout, {loraTargetModules.begin(), loraTargetModules.end()},
                             useRslora};
  if (loraAlpha.getNumOccurrences())
    loraFlags.alpha = loraAlpha;
  loraFlags.qlora = qlora;
  if (qloraBlockSize.getNumOccurrences())
    loraFlags.qloraBlockSize = qloraBlockSize;
  if (qlora && *target == megac::Target::Cuda)
    return fail("--qlora with --target cuda: the CUDA kernel that dequantizes NF4 weights is not built yet; "
                "train QLoRA on the CPU target, or LoRA (without --qlora) on CUDA");
  if (Error e = megac::resolveLora(plan, loraFlags, spec->family))
    return fail(toString(std::move(e)));
  if (simulating && gradReduceIn16Bit && plan.sharding != ShardingStrategy::NoShard)
    return fail("--grad-reduce-in-bf16 with --data-parallel-sharding-strategy " +
                std::string(shardingStrategyName(plan.sharding)) +
                ": OUT/train sums 16-bit gradients only without sharding; drop one of the two");
  if (rankLayout)
    outs() << plan.rankLayout();
  // The precision OUT/train runs in. The CUDA kernels take fp32 activations only so far: there
  // the GEMMs run in 16 bits and the activations stay fp32.
  const ActivationPrecision precision = plan.precision;
  if (*target == megac::Target::Cuda && precision != ActivationPrecision::Fp32) {
    errs() << "megac compile: note: --target cuda keeps the activations in fp32 for now (16-bit activation "
              "storage on CUDA is not built yet); the GEMMs run in "
           << activationPrecisionName(precision) << "\n";
    plan.precision = ActivationPrecision::Fp32;
  }

  if (!dumpDir.empty())
    if (std::error_code ec = sys::fs::create_directories(dumpDir))
      return fail("cannot create --dump-ir folder " + dumpDir + ": " + ec.message());

  mlir::MLIRContext context;
  int64_t paddedVocab = plan.paddedVocab(spec->vocabSize);
  std::string padding;
  if (paddedVocab != spec->vocabSize)
    padding = "padded vocabulary " + std::to_string(spec->vocabSize) + " -> " + std::to_string(paddedVocab) +
              " (make-vocab-size-divisible-by " + std::to_string(plan.makeVocabSizeDivisibleBy) + " x tp " +
              std::to_string(plan.tp) + "; padding excluded from the softmax)";
  IRDumps dumps(dumpDir);
  if (!dumps.removeStale())
    return 1;
  CompileOptions compileOptions;
  compileOptions.microBatch = microBatch;
  compileOptions.onFrontend = [&](mlir::ModuleOp frontend) { return dumps.writeFrontend(frontend); };
  compileOptions.instrument = [&](mlir::PassManager &pm) { dumps.instrument(pm); };
  Expected<mlir::OwningOpRef<mlir::ModuleOp>> compiled = compile(context, *spec, plan, compileOptions);
  if (!compiled)
    return fail(toString(compiled.takeError()));
  mlir::OwningOpRef<mlir::ModuleOp> module = std::move(*compiled);
  if (!dumps.ok())
    return 1;
  if (simulating)
    return simulatePlan(*module, plan, *spec, *simulation);
  // The report is about a pipeline's bubble and stashes: pp = 1's one-chunk schedule has neither.
  for (pipe::ScheduleOp scheduleOp : module->getOps<pipe::ScheduleOp>()) {
    if (plan.pp == 1)
      break;
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
                       std::to_string(microBatch) + ".\n" + headerRankLayout(plan) + "\n";
  std::string summary = spec->family + " " + std::to_string(spec->numLayers) + " layers, hidden " +
                        std::to_string(spec->hiddenSize) + ", " + std::to_string(spec->numAttentionHeads) +
                        " heads, seq " + std::to_string(spec->seqLength) + ", vocab " +
                        std::to_string(spec->vocabSize) + "; plan " + plan.summary() + "; micro batch " +
                        std::to_string(microBatch) + (padding.empty() ? "" : "; " + padding);
  std::string code, memoryPlan;
  raw_string_ostream codeOs(code), planOs(memoryPlan);
  const HuggingFaceConfig hfConfig = huggingFaceConfig(*spec);
  EmitOptions emitOptions{header, summary, hfConfig.json, *specText, *target, precision};
  emitOptions.recompileCommand = commandWithoutDataParallelSize(megac::invocation());
  if (plan.lora.enabled())
    emitOptions.adapterConfigJson = megac::peftAdapterConfig(plan.lora, spec->family);
  // Generation's decode_step (one position with a KV cache): the same model built for one
  // position, where one rank computes in fp32 on the CPU (as logits_step).
  mlir::OwningOpRef<mlir::ModuleOp> decodeModule;
  // Past max_position_embeddings, dynamic rope scaling gives each length its own base: one
  // position at a time would not rotate as the whole window does (generation reruns the window).
  const bool ropeFollowsLength = spec->rotaryBaseFor(spec->seqLength) != spec->rotaryBase;
  if (plan.worldSize() == 1 && precision == ActivationPrecision::Fp32 && *target == megac::Target::Cpu &&
      !plan.lora.enabled() && !ropeFollowsLength && !spec->isEncoder()) { // an encoder does not generate
    ModelSpec onePosition = *spec;
    onePosition.seqLength = 1;
    decodeModule = buildModel(context, onePosition, plan, microBatch);
    if (failed(mlir::verify(*decodeModule)))
      return fail("internal: the frontend built invalid decode IR for " + specPath);
    mlir::PassManager decodePasses(&context);
    buildDecodePipeline(decodePasses);
    if (failed(decodePasses.run(*decodeModule)))
      return fail("deriving decode_step failed (see the error above)");
    if (!dumps.write("decode-step.mlir", [&](raw_ostream &os) {
          decodeModule->print(os, IRDumps::printingFlags());
          os << "\n";
        }))
      return 1;
    emitOptions.decodeModule = *decodeModule;
  }
  if (failed(emitTrainingProgram(*module, emitOptions, codeOs, planOs)))
    return fail("emitting C++ failed (see the error above)");
  if (!dumps.write("memory-plan.txt", [&](raw_ostream &os) { os << memoryPlan; }))
    return 1;
  FailureOr<SmallVector<StageBuffers>> buffers = stageBuffers(*module);
  if (failed(buffers))
    return fail("sizing the program's buffers failed (see the error above)");
  SmallVector<StageStateMemory> stateBytes = stateMemory(*module, plan);
  addProgramBuffers(stateBytes, *buffers);
  const SmallVector<megac::LayerActivations> layerStash = megac::layerActivations(*module);
  const std::string rankMemoryJson = stateMemoryJson(stateBytes, plan, layerStash);
  if (!dumps.write("rank-memory.json", [&](raw_ostream &os) { os << rankMemoryJson; }))
    return 1;
  const SmallVector<StageCommunication> sent = communicationPlan(*module, plan);
  const std::string rankCommunicationJson = communicationJson(sent, plan);
  if (!dumps.write("rank-communication.json", [&](raw_ostream &os) { os << rankCommunicationJson; }))
    return 1;

  // Everything goes to a staging folder first; OUT changes only once all of it succeeded. A stop
  // signal ends the compiler it runs and removes the staging folder before megac ends.
  megac::StopSignals stop;
  Expected<std::unique_ptr<StagedOutput>> staged = StagedOutput::create(outDir);
  if (!staged)
    return fail(toString(staged.takeError()));
  StringRef dir = (*staged)->dir();
  auto file = [&](StringRef name) { return (dir + "/" + name).str(); };
  if (!writeFile(file(sourceName(*target)), code) || !writeFile(file("CMakeLists.txt"), outputCMake(*target)) ||
      !writeFile(file("memory-plan.txt"), memoryPlan) || !writeFile(file("rank-memory.json"), rankMemoryJson) ||
      !writeFile(file("rank-communication.json"), rankCommunicationJson))
    return 1;
  if (!noBuild)
    if (int rc = buildProgram(dir, *target))
      return rc;
  if (Error e = (*staged)->commit(kOutputFiles))
    return fail(toString(std::move(e)));
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  outs() << "megac: " << summary << "\n";
  printStateMemory(stateBytes, plan, "megac: ", outs());
  megac::printLayerActivations(layerStash, "megac: ", outs());
  printCommunication(sent, plan, "megac: ", outs());
  outs() << "megac: target " << (*target == megac::Target::Cuda ? "cuda" : "cpu") << "\n"
         << (hfConfig.json.empty() ? "megac: checkpoints get no Hugging Face config.json: " + hfConfig.whyNone + "\n"
                                   : std::string())
         << "megac: wrote " << outDir << "/" << (noBuild ? sourceName(*target) : StringRef("train")) << " in "
         << format("%.1f", seconds) << " s\n";
  return 0;
}

Expected<megac::SimulationFlags> megac::simulationFlags() {
  const char *command = megac::cli::simulate ? "megac simulate" : "megac plan";
  if (clusterFile.empty())
    return createStringError(Twine(command) + " needs --cluster NAME|FILE.yaml: the machine to simulate on "
                                              "(selene-a100, dgx-h100, or a file: docs/simulate.md)");
  if (attentionBackend != "flash" && attentionBackend != "unfused")
    return createStringError("--attention-backend " + attentionBackend + " is not known; give flash or unfused");
  Expected<ActivationPrecision> precision = precisionFromFlags();
  if (!precision)
    return precision.takeError();
  Expected<sim::Cluster> cluster = sim::loadCluster(clusterFile, megacPaths().clusterDir);
  if (!cluster)
    return cluster.takeError();
  SimulationFlags flags{std::move(*cluster), {}, *precision, globalBatch};
  flags.options.unfusedAttention = attentionBackend == "unfused";
  flags.options.gradReduceIn16Bit = gradReduceIn16Bit;
  return flags;
}
