// megac simulate: a plan's iteration time on a cluster, from the compiled per-rank program itself
// (every op, collective and pipeline step the IR holds) and a cost model: GEMMs and attention at
// the device's peak x a size-dependent efficiency, everything else at its memory bandwidth, each
// kernel a launch cost, collectives as bytes each rank sends (the ring count RankCommunication
// uses) over the link the group spans. docs/simulate.md explains the model and its limits.
#pragma once

#include "megac/Plan/ParallelPlan.h"
#include "megac/Sim/Cluster.h"
#include "megac/Analysis/RankMemory.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>
#include <vector>

namespace megac::sim {

/// Seconds of one iteration spent on each kind of work, on the rank that finishes last.
struct TimeSplit {
  double compute = 0;   // GEMMs and attention
  double memory = 0;    // memory-bound kernels (norms, activations, elementwise, loss) and launches
  double tpComm = 0;    // tensor-parallel collectives (on the critical path)
  double epComm = 0;    // expert parallelism's all-to-all exchanges (on the critical path)
  double bubble = 0;    // pipeline: waiting for other stages (and their messages)
  double dpComm = 0;    // data-parallel collectives not hidden behind backward
  double optimizer = 0; // the optimizer step and the gradient norm
  double total() const { return compute + memory + tpComm + epComm + bubble + dpComm + optimizer; }
};

/// One span of a rank class's iteration in a trace: a chunk's forward or backward (pipeline), a
/// microbatch's step (no pipeline), or the tail's data-parallel sync and optimizer step.
struct TraceSpan {
  int64_t stage = 0; // the rank class: its pp stage (tp and dp ranks of a stage do the same)
  std::string name, category;
  double start = 0, end = 0; // seconds from the iteration's start
  int64_t chunk = -1, microbatch = -1;
};

struct Simulation {
  double iterationSeconds = 0;
  double tokensPerSecond = 0;
  double tflopsPerDevice = 0; // model FLOPs (megac's count, as the training log) / time / devices
  double mfu = 0;             // of the cluster's 16-bit or fp32 peak, as the program computes
  TimeSplit split;
  int64_t slowestStage = 0;
  // One microbatch through every chunk of the model (its compute, memory-bound kernels and tp
  // collectives, summed over the stages): the same however pp splits the layers, so a plan that
  // differs only in pp, vpp or dp takes at least microbatches x this / pp (megac plan's bound).
  double microbatchSeconds = 0;
  std::vector<double> memoryGiBPerStage; // the memory plan's peak per rank of each stage
  bool fits = true;
  std::vector<TraceSpan> trace; // filled when SimulationInputs::trace is set
  // With a token budget: the training time at the simulated tokens/s, and Megatron's estimate
  // 6TP/(nX) (P parameters, n devices, X the simulated model FLOP/s per device; the PTD-P paper's
  // 8TP/(nX) counts X with full recomputation's extra forward, the same time).
  double trainTokens = 0, trainSeconds = 0, trainEstimateSeconds = 0;
};

struct SimulationInputs {
  int64_t globalBatch = 0;     // samples per iteration
  int64_t microBatch = 1;
  int64_t seqLength = 0;
  double modelFlopsPerSample = 0;
  bool sixteenBitGemms = false; // the GEMMs run at the 16-bit peak
  // Attention costed as Megatron's unfused kernels (the s x s scores written out, a softmax
  // kernel, batched GEMMs) instead of the cluster's fused attention efficiency.
  bool unfusedAttention = false;
  // The data-parallel gradient sums travel in 16 bits (--grad-reduce-in-bf16; plain DDP only).
  bool gradReduceIn16Bit = false;
  bool trace = false; // keep every span for --trace
  double trainTokens = 0; // --train-tokens: a token budget to time (0: none)
  int64_t parameters = 0; // the model's, for Megatron's 6TP/(nX) cross-check
};

/// Simulates one iteration of `module` (after the whole pass pipeline) under `plan` on `cluster`;
/// `memory` is the per-stage plan megac compile prints (stateMemory + addProgramBuffers).
Simulation simulate(mlir::ModuleOp module, const ParallelPlan &plan, const Cluster &cluster,
                    const SimulationInputs &inputs, llvm::ArrayRef<StageStateMemory> memory);

/// --trace: `s.trace` as a Chrome / Perfetto trace (JSON), one process per rank class (pp stage),
/// times in microseconds.
std::string traceJson(const Simulation &s, const Cluster &cluster);

/// The figures for a person, each line starting with `prefix`.
void printSimulation(const Simulation &s, const Cluster &cluster, llvm::StringRef prefix, llvm::raw_ostream &os);
/// The same as one JSON object (iteration_time_s, tokens_per_s, tflops_per_gpu, mfu,
/// memory_gib_per_gpu, fits, time_split_s).
llvm::json::Object simulationJson(const Simulation &s, const Cluster &cluster);

} // namespace megac::sim
