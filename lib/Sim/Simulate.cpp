// One iteration: each stage's compute from the cost model, the pipeline's schedule replayed with
// those costs (megac's verified pipe.schedule, not a formula), then the data-parallel traffic
// the plan sends (RankCommunication's bytes) and the optimizer step.
#include "megac/Plan/PlanDialect.h"
#include "megac/Sim/Simulate.h"

#include "CostModel.h"
#include "megac/Analysis/RankCommunication.h"
#include "megac/Analysis/TensorBytes.h"
#include "pipe/PipeOps.h"
#include "pipe/ScheduleIR.h"
#include "tx/TxChunks.h"
#include "tx/TxNames.h"
#include "tx/TxOps.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
using namespace megac;
using namespace megac::sim;

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
// AdamW per element of the rank's shard: reads the parameter, its gradient and both moments,
// writes the parameter and both moments (7 x 4 bytes), and the gradient norm reads the gradient
// once more.
constexpr double kOptimizerBytesPerElement = 8 * 4;

/// The data-parallel link: consecutive dp ranks are tp ranks apart.
const Link &dpLink(const Cluster &cluster, const ParallelPlan &plan) {
  return linkFor(cluster, plan.tp, plan.shardDegree > 1 ? plan.shardDegree : plan.dp);
}

/// What a stage's rank does besides its microbatches: the data-parallel traffic still exposed
/// after `overlappable` seconds of backward, and the optimizer step.
struct StageTail {
  double dp = 0, optimizer = 0;
};

StageTail stageTail(const Cluster &cluster, const ParallelPlan &plan, const SimulationInputs &in,
                    const StageCommunication &sent, const StageStateMemory &memory, int64_t microbatches,
                    double overlappable) {
  StageTail t;
  if (plan.dp > 1) {
    // Without sharding every dp byte is a gradient sum, counted in fp32.
    const double gradientScale = in.gradReduceIn16Bit ? 0.5 : 1.0;
    const double bytes = gradientScale * (sent.perIteration.dp + double(microbatches) * sent.perMicrobatch.dp);
    const double seconds = transferSeconds(dpLink(cluster, plan), bytes, 2 * (plan.dp - 1));
    t.dp = plan.overlapGradReduce ? std::max(0.0, seconds - overlappable) : seconds;
  }
  const double elements = double(memory.optimizerBytes) / 8.0; // two fp32 moments per element
  t.optimizer = elements * kOptimizerBytesPerElement / (cluster.memoryBandwidthGBps * 1e9);
  return t;
}

/// The tail's spans in a trace: the exposed data-parallel sync, then the optimizer step.
void addTail(std::vector<TraceSpan> &trace, int64_t stage, double start, const StageTail &tail) {
  if (tail.dp > 0)
    trace.push_back({stage, "data-parallel sync", "dp_communication", start, start + tail.dp});
  trace.push_back({stage, "optimizer", "optimizer", start + tail.dp, start + tail.dp + tail.optimizer});
}

/// A rank's iteration: `microbatches` x its per-microbatch work, then its waits and its tail.
TimeSplit splitOf(const WorkCost &perMicrobatch, int64_t microbatches, double bubble, const StageTail &tail) {
  TimeSplit t;
  t.compute = microbatches * perMicrobatch.compute;
  t.memory = microbatches * perMicrobatch.memory;
  t.tpComm = microbatches * perMicrobatch.tp;
  t.epComm = microbatches * perMicrobatch.ep;
  t.bubble = bubble;
  t.dpComm = tail.dp;
  t.optimizer = tail.optimizer;
  return t;
}

} // namespace

Simulation megac::sim::simulate(ModuleOp module, const ParallelPlan &plan, const Cluster &cluster,
                                const SimulationInputs &in, ArrayRef<StageStateMemory> memory) {
  CostModel model(module, plan, cluster, in.sixteenBitGemms, in.unfusedAttention);
  const SmallVector<StageCommunication> sent = communicationPlan(module, plan);
  const int64_t microbatches = std::max<int64_t>(1, in.globalBatch / (in.microBatch * plan.dp));
  Simulation s;
  double slowest = -1;
  if (plan.pp == 1) {
    // One chunk, forward then backward per microbatch; --overlap-grad-reduce's bucket syncs can
    // hide behind the last microbatch's backward.
    const std::string chunk = names::chunkName(0);
    const WorkCost forward = model.function(module.lookupSymbol<func::FuncOp>(names::forwardHalf(chunk)));
    const WorkCost backward = model.function(module.lookupSymbol<func::FuncOp>(names::backwardHalf(chunk)));
    WorkCost one = forward;
    one += backward;
    s.microbatchSeconds = one.seconds();
    StageTail tail = stageTail(cluster, plan, in, sent[0], memory[0], microbatches, backward.seconds());
    s.split = splitOf(one, microbatches, 0.0, tail);
    slowest = s.split.total();
    if (in.trace) {
      for (int64_t m = 0; m < microbatches; ++m)
        s.trace.push_back({0, "step " + std::to_string(m), "step", m * one.seconds(), (m + 1) * one.seconds(), -1, m});
      addTail(s.trace, 0, microbatches * one.seconds(), tail);
    }
  } else {
    // Each chunk's forward and backward from its functions; a message takes the boundary tensor
    // over the pipeline link.
    auto ops = module.getOps<pipe::ScheduleOp>();
    llvm::Expected<pipeline::Schedule> schedule = pipe::scheduleFromOp(*ops.begin());
    if (!schedule) {
      llvm::consumeError(schedule.takeError());
      return s;
    }
    const int64_t chunks = plan.pp * plan.vpp;
    std::vector<WorkCost> forward(chunks), backward(chunks);
    std::vector<double> boundaryBytes(chunks, 0.0); // chunk c's output (= chunk c + 1's input)
    for (auto fn : module.getOps<func::FuncOp>()) {
      std::optional<int64_t> c = tx::chunkOf(fn);
      if (!c || *c >= chunks)
        continue;
      const bool isBackward = megac::isBackward(roleOf(fn));
      (isBackward ? backward : forward)[*c] = model.function(fn);
      if (!isBackward && *c + 1 < chunks)
        boundaryBytes[*c] = double(tensorBytes(fn.getResultTypes()[0]));
    }
    for (int64_t c = 0; c < chunks; ++c)
      s.microbatchSeconds += forward[c].seconds() + backward[c].seconds();
    const Link &ppLink = linkFor(cluster, plan.tp * plan.dp, plan.pp);
    pipeline::ActionCosts costs{
        [&](const pipeline::Action &a) {
          return (a.kind == pipeline::ActionKind::Forward ? forward : backward)[a.chunk].seconds();
        },
        [&](const pipeline::Action &a) {
          // An activation leaves chunk c for c + 1; a gradient leaves chunk c for c - 1.
          const bool activation = a.kind == pipeline::ActionKind::SendActivation;
          const int64_t boundary = activation ? a.chunk : a.chunk - 1;
          return boundary < 0 ? 0.0 : transferSeconds(ppLink, boundaryBytes[boundary], 1);
        }};
    pipeline::Simulation run = pipeline::simulate(*schedule, costs);
    std::vector<double> finish(plan.pp, 0.0), busy(plan.pp, 0.0);
    for (const pipeline::SimEvent &e : run.events) {
      finish[e.rank] = std::max(finish[e.rank], e.end);
      const bool forwardOrBackward = e.kind == pipeline::ActionKind::Forward || e.kind == pipeline::ActionKind::Backward;
      if (!forwardOrBackward)
        continue;
      busy[e.rank] += e.end - e.start;
      if (in.trace) {
        const bool isForward = e.kind == pipeline::ActionKind::Forward;
        s.trace.push_back({e.rank,
                           (isForward ? "F" : "B") + std::to_string(e.chunk) + "." + std::to_string(e.microbatch),
                           isForward ? "forward" : "backward", e.start, e.end, e.chunk, e.microbatch});
      }
    }
    for (int64_t stage = 0; stage < plan.pp; ++stage) {
      WorkCost work;
      for (int64_t c = stage; c < chunks; c += plan.pp) {
        work += forward[c];
        work += backward[c];
      }
      StageTail tail = stageTail(cluster, plan, in, sent[stage], memory[stage], microbatches, 0.0);
      const double total = finish[stage] + tail.dp + tail.optimizer;
      if (in.trace)
        addTail(s.trace, stage, finish[stage], tail);
      if (total <= slowest)
        continue;
      slowest = total;
      s.slowestStage = stage;
      s.split = splitOf(work, microbatches, finish[stage] - busy[stage], tail);
    }
  }
  s.iterationSeconds = slowest;
  const double samples = double(in.globalBatch);
  s.tokensPerSecond = samples * double(in.seqLength) / s.iterationSeconds;
  s.tflopsPerDevice = in.modelFlopsPerSample * samples / s.iterationSeconds / double(plan.worldSize()) / 1e12;
  s.mfu = s.tflopsPerDevice / (in.sixteenBitGemms ? cluster.peakTflops16 : cluster.peakTflops32);
  if (in.trainTokens > 0) {
    s.trainTokens = in.trainTokens;
    s.trainSeconds = in.trainTokens / s.tokensPerSecond;
    s.trainEstimateSeconds =
        6.0 * in.trainTokens * double(in.parameters) / (double(plan.worldSize()) * s.tflopsPerDevice * 1e12);
  }
  for (const StageStateMemory &m : memory) {
    s.memoryGiBPerStage.push_back(double(m.totalBytes()) / kGiB);
    s.fits = s.fits && s.memoryGiBPerStage.back() <= cluster.memoryGiB;
  }
  return s;
}
