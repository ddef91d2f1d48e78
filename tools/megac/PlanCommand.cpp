// megac plan SPEC.yaml --gpus N --cluster C --global-batch-size B: searches tp, pp, vpp, dp, sp,
// micro batch, recomputation, the sharding strategy and, for a mixture of experts, ep (each
// divisor of dp that divides the experts) for the plan megac simulate predicts the
// most tokens/s for, among those the compiler accepts and whose memory plan fits, and prints the
// best few with the `megac compile` command for each.
//
// Every candidate that is simulated is compiled and simulated exactly as `megac simulate` would
// (megac/Driver/Compile.h). What keeps the search short is what it does not simulate:
// - tp stays inside a node (at most devices_per_node, as the PTD-P paper advises); sp is on
//   whenever tp > 1 (the same bytes on the wire, less memory and fewer memory-bound kernels);
// - the distributed optimizer (optim) is always used with dp > 1 (the same bytes as an
//   all-reduce, a smaller optimizer step and less memory); ZeRO-3 (optim_grads_params) and
//   recomputation only add work, so they are tried in that order, and a candidate is skipped once
//   a cheaper variant of the same (tp, pp, vpp, micro batch, ep) fits;
// - a memory lower bound (the layers' weights, their gradients and sharded optimizer state,
//   nothing else) rejects a candidate before it is compiled, and so does a smaller micro batch of
//   the same layout, recomputation and sharding that did not fit (every activation, stash and
//   buffer grows with the micro batch; the microbatches in flight hold at least as many samples);
// - a time lower bound: a pipeline of pp stages runs m microbatches in at least
//   (m + (pp - 1) / vpp) stage-times (the 1F1B and interleaved schedules' bubble, PTD-P section
//   2.2), a stage-time being one microbatch through the whole model (Simulation::microbatchSeconds,
//   the same however pp splits it) over pp. The microbatch's time is the simulated one once a plan
//   with the same tp, micro batch and ep and as much recomputation or less has been simulated,
//   before that its GEMMs' FLOPs over tp devices at peak. The candidates are tried in the order of
//   that bound (the most promising first), and one is skipped when 0.9 x its bound is already
//   slower than the best plans found.
// A candidate's IR is not verified (CompileOptions::verifyResult): it is only simulated, and the
// printed plan is verified when megac compile builds it.
#include "Commands.h"
#include "EverySecond.h"
#include "RepeatedFlags.h"
#include "SimulationFlags.h"
#include "SpecSource.h"
#include "megac/Driver/Compile.h"
#include "TextFile.h"

#include "megac/Frontend/ModelFlops.h"
#include "megac/Frontend/ModelSize.h"
#include "megac/Frontend/ModelSpec.h"
#include "megac/NumberText.h"
#include "megac/Plan/PlanLimits.h"
#include "megac/Plan/RecomputeFlags.h"
#include "megac/Plan/ShardingFlags.h"
#include "megac/Sim/Cluster.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <tuple>
#include <vector>

using namespace llvm;

namespace megac::cli {
extern cl::SubCommand plan;
} // namespace megac::cli

namespace {

using megac::cli::plan;

// --cluster, --global-batch-size, --bf16 / --fp16, --attention-backend and --grad-reduce-in-bf16
// are megac simulate's (simulationFlags()).
cl::opt<std::string> planSpecPath(cl::Positional, cl::desc("SPEC.yaml"), cl::sub(plan));
cl::opt<double> maxMemory("max-memory", cl::desc("GiB a GPU may use (default: the cluster's memory)"),
                          cl::init(0), cl::sub(plan), megac::recordValues<double>("--max-memory"));
cl::opt<int64_t> gpus("gpus", cl::desc("the GPUs the plan must use (tp x pp x dp)"), cl::init(0), cl::sub(plan),
                      megac::recordValues<int64_t>("--gpus"));
cl::opt<int64_t> top("top", cl::desc("how many of the best plans to print"), cl::init(5), cl::sub(plan),
                     megac::recordValues<int64_t>("--top"));

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

int fail(const Twine &message) {
  errs() << "megac plan: error: " << message << "\n";
  return 1;
}

std::string shortNumber(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", v);
  return text;
}

std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> d;
  for (int64_t i = 1; i <= n; ++i)
    if (n % i == 0)
      d.push_back(i);
  return d;
}

enum class Recompute { None, Selective, Full };
/// Ordered by the work they add: plain data parallelism (only with --grad-reduce-in-bf16, or dp
/// 1), the distributed optimizer, ZeRO-3.
enum class Sharding { None, Optim, OptimGradsParams };
const char *recomputeName(Recompute r) {
  return r == Recompute::None ? "none" : r == Recompute::Selective ? "selective" : "full";
}

/// One point of the search: the flags megac compile would take.
struct Candidate {
  int64_t tp = 1, pp = 1, vpp = 1, dp = 1, microBatch = 1;
  Recompute recompute = Recompute::None;
  Sharding sharding = Sharding::None;
  int64_t ep = 1; // a mixture of experts: groups of ep dp ranks split the experts

  std::vector<std::string> flags() const {
    std::vector<std::string> f = {"--tp", std::to_string(tp), "--pp", std::to_string(pp), "--dp", std::to_string(dp),
                                  "--micro-batch-size", std::to_string(microBatch)};
    if (ep > 1)
      f.insert(f.end(), {"--ep", std::to_string(ep)});
    if (tp > 1)
      f.push_back("--sp");
    if (vpp > 1)
      f.insert(f.end(), {"--vpp", std::to_string(vpp)});
    if (sharding != Sharding::None)
      f.insert(f.end(), {"--data-parallel-sharding-strategy", shardingName()});
    if (recompute == Recompute::Selective)
      f.insert(f.end(), {"--recompute-granularity", "selective", "--recompute-modules", "mlp,layernorm"});
    if (recompute == Recompute::Full)
      f.insert(f.end(), {"--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers",
                         "1"});
    return f;
  }
  const char *shardingName() const {
    return sharding == Sharding::None ? "no_shard" : sharding == Sharding::Optim ? "optim" : "optim_grads_params";
  }
};

/// The plan megac compile makes of the candidate's flags (its checks included).
Expected<megac::ParallelPlan> planOf(const Candidate &c, int64_t globalBatch, megac::ActivationPrecision precision) {
  megac::ParallelPlan p;
  p.tp = c.tp, p.pp = c.pp, p.dp = c.dp, p.vpp = c.vpp, p.sp = c.tp > 1, p.ep = c.ep;
  if (c.pp > 1)
    p.numMicrobatches = globalBatch / (c.microBatch * c.dp);
  if (Error e = megac::checkPlanLimits(p, megac::kPlanFlagNames))
    return std::move(e);
  megac::ShardingFlags sharding;
  if (c.sharding != Sharding::None)
    sharding.strategy = c.shardingName();
  if (Error e = megac::resolveSharding(p, sharding))
    return std::move(e);
  megac::RecomputeFlags recompute;
  if (c.recompute == Recompute::Selective)
    recompute.granularity = "selective", recompute.modules = {"mlp", "layernorm"};
  if (c.recompute == Recompute::Full)
    recompute.granularity = "full", recompute.method = "uniform", recompute.numLayers = 1;
  if (Error e = megac::resolveRecompute(p, recompute))
    return std::move(e);
  p.precision = precision;
  return p;
}

/// A lower bound on a rank's memory: its share of the layers' parameters (at most 1/tp of each
/// layer: norms are not split; at most 1/ep with expert parallelism: only the experts are; no
/// embedding), their fp32 gradients and the AdamW moments, sharded as the candidate shards them (at
/// most over dp: the experts' state shards over dp / ep); no activations or buffers.
double memoryLowerBoundBytes(const megac::ModelSpec &spec, const Candidate &c) {
  const double params =
      double(megac::layerParameters(spec)) * double(spec.numLayers / c.pp) / double(c.tp) / double(c.ep);
  const double d = double(c.dp);
  // fp32 parameters (4) + gradients (4) + two moments (8), per strategy.
  // (optim_grads_params under pp keeps the parameters gathered: optim_grads' state).
  const double perParam = c.sharding == Sharding::None                     ? 16.0
                          : c.sharding == Sharding::Optim                  ? 8.0 + 8.0 / d
                          : c.pp == 1                                      ? 16.0 / d
                                                                           : 4.0 + 12.0 / d;
  return params * perParam;
}

/// Stage-times an iteration takes at least: m microbatches and the pipeline's bubble,
/// (m + (pp - 1) / vpp) / pp of one microbatch's time through the whole model.
double pipelineFactor(const Candidate &c, int64_t globalBatch) {
  const double microbatches = double(globalBatch / (c.dp * c.microBatch));
  return (microbatches + double(c.pp - 1) / double(c.vpp)) / double(c.pp);
}

/// A lower bound on one microbatch's time through the whole model: its GEMMs' FLOPs (the model's
/// without the attention scores, which a causal kernel may compute half of) over tp devices at
/// the fastest rate the cost model gives a GEMM (the cluster's best peak x its gemm_efficiency);
/// recomputation, memory-bound kernels and communication only add.
double microbatchFlopSeconds(const megac::ModelSpec &spec, const Candidate &c, const megac::sim::Cluster &cluster) {
  const double peak = std::max(cluster.peakTflops16, cluster.peakTflops32) * 1e12 * cluster.gemmEfficiency;
  if (peak <= 0)
    return 0;
  const double s = double(spec.seqLength), q = double(spec.numAttentionHeads * spec.headDim());
  const double attentionScores = 12 * s * s * q * double(spec.numLayers); // forward and backward
  const double gemms = std::max(0.0, megac::modelFlopsPerSample(spec) - attentionScores);
  return double(c.microBatch) * gemms / (double(c.tp) * peak);
}

struct Result {
  Candidate candidate;
  megac::sim::Simulation sim;
  double memoryGiB = 0;
};

} // namespace

int megac::runPlan() {
  const auto start = std::chrono::steady_clock::now();
  if (planSpecPath.empty())
    return fail("give the model: megac plan SPEC.yaml --gpus N --cluster NAME --global-batch-size B");
  if (gpus < 1 || gpus > (1 << 20))
    return fail("--gpus is " + Twine(gpus.getValue()) + "; give the number of GPUs, 1 to 1048576");
  if (top < 1 || top > 100)
    return fail("--top is " + Twine(top.getValue()) + "; give 1 to 100");
  if (!std::isfinite(maxMemory) || maxMemory < 0 || maxMemory > 1e6)
    return fail("--max-memory is " + shortNumber(maxMemory) + "; give GiB per GPU, above 0");
  Expected<SimulationFlags> flags = simulationFlags();
  if (!flags)
    return fail(toString(flags.takeError()));
  const sim::Cluster &cluster = flags->cluster;
  const int64_t globalBatch = flags->globalBatch;
  const bool gradReduceIn16Bit = flags->options.gradReduceIn16Bit;
  if (globalBatch < 1 || globalBatch > (int64_t(1) << 30))
    return fail("--global-batch-size is " + Twine(globalBatch) + "; give the samples per iteration, 1 to 2^30");
  const double memoryLimitGiB = maxMemory > 0 ? double(maxMemory) : cluster.memoryGiB;
  Expected<SpecSource> source = readSpecSource(planSpecPath, specOverrideFlags());
  if (!source)
    return fail(toString(source.takeError()));
  Expected<ModelSpec> spec = parseModelSpec(source->text, source->origin);
  if (!spec)
    return fail(toString(spec.takeError()));

  // The candidates, cheapest first within each (tp, pp, vpp, micro batch).
  std::vector<Candidate> candidates;
  for (int64_t tp : divisors(gpus)) {
    if (tp > cluster.devicesPerNode)
      continue;
    for (int64_t pp : divisors(gpus / tp)) {
      if (pp > spec->numLayers || spec->numLayers % pp != 0)
        continue;
      const int64_t dp = gpus / (tp * pp);
      if (globalBatch % dp != 0)
        continue;
      std::vector<int64_t> vpps = {1};
      if (pp > 1)
        for (int64_t v : divisors(spec->numLayers / pp))
          if (v > 1)
            vpps.push_back(v);
      for (int64_t vpp : vpps)
        for (int64_t mb : {1, 2, 4, 8, 16}) {
          if ((globalBatch / dp) % mb != 0)
            continue;
          const int64_t microbatches = globalBatch / dp / mb;
          if (vpp > 1 && microbatches % pp != 0) // Megatron's interleaving needs m % pp == 0
            continue;
          std::vector<Sharding> shardings = {Sharding::None};
          if (dp > 1 && !gradReduceIn16Bit) // 16-bit gradient sums are costed without sharding
            shardings = {Sharding::Optim, Sharding::OptimGradsParams};
          for (Recompute r : {Recompute::None, Recompute::Selective, Recompute::Full})
            for (Sharding sharding : shardings)
              candidates.push_back({tp, pp, vpp, dp, mb, r, sharding});
          // Expert parallelism (a mixture of experts): each ep dividing dp and the experts, its
          // experts' state sharded over the dp ranks holding the same experts.
          if (spec->isMixtureOfExperts())
            for (int64_t ep : divisors(dp))
              if (ep > 1 && spec->numExperts % ep == 0)
                for (Recompute r : {Recompute::None, Recompute::Selective, Recompute::Full})
                  for (Sharding sharding : shardings)
                    candidates.push_back({tp, pp, vpp, dp, mb, r, sharding, ep});
        }
    }
  }

  // The most promising first (stable: a layout's cheaper variants stay ahead of the others).
  auto flopBound = [&](const Candidate &c) {
    return pipelineFactor(c, globalBatch) * microbatchFlopSeconds(*spec, c, cluster);
  };
  std::stable_sort(candidates.begin(), candidates.end(),
                   [&](const Candidate &a, const Candidate &b) { return flopBound(a) < flopBound(b); });

  mlir::MLIRContext context;
  std::vector<Result> best; // sorted, fastest first, at most `top`
  std::map<std::tuple<int64_t, int64_t, Recompute, int64_t>, double> microbatchSeconds; // (tp, mb, recompute, ep)
  // Per (tp, pp, vpp, micro batch, ep): the recomputation and sharding of the variants that fit.
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t>, std::vector<std::pair<Recompute, Sharding>>> fitting;
  // Per (tp, pp, vpp, recompute, sharding, ep): the smallest micro batch that did not fit.
  std::map<std::tuple<int64_t, int64_t, int64_t, Recompute, Sharding, int64_t>, int64_t> overMemoryFrom;
  int64_t simulated = 0, refused = 0, tooBigBound = 0, tooBigSmaller = 0, tooBig = 0, slowerBound = 0, dominated = 0;
  EverySecond pace;
  for (size_t index = 0; index < candidates.size(); ++index) {
    const Candidate &c = candidates[index];
    if (pace.due()) {
      // The candidates left are of the same kinds as those done: the mean so far estimates them.
      const double left = pace.elapsed() / double(index) * double(candidates.size() - index);
      errs() << format("megac plan: %zu of %zu candidates (%lld simulated), ", index, candidates.size(),
                       (long long)simulated);
      if (best.empty())
        errs() << "none fits yet";
      else
        errs() << format("best so far %.4g tokens/s (tp %lld pp %lld vpp %lld dp %lld, micro batch %lld)",
                         best.front().sim.tokensPerSecond, (long long)best.front().candidate.tp,
                         (long long)best.front().candidate.pp, (long long)best.front().candidate.vpp,
                         (long long)best.front().candidate.dp, (long long)best.front().candidate.microBatch);
      errs() << format(", ETA %.0f s\n", left);
    }
    // A variant of the same layout that does less work already fits.
    auto &fits = fitting[{c.tp, c.pp, c.vpp, c.microBatch, c.ep}];
    if (llvm::any_of(fits, [&](auto f) { return f.first <= c.recompute && f.second <= c.sharding; })) {
      ++dominated;
      continue;
    }
    if (memoryLowerBoundBytes(*spec, c) / kGiB > memoryLimitGiB) {
      ++tooBigBound;
      continue;
    }
    const auto layout = std::make_tuple(c.tp, c.pp, c.vpp, c.recompute, c.sharding, c.ep);
    if (auto it = overMemoryFrom.find(layout); it != overMemoryFrom.end() && c.microBatch >= it->second) {
      ++tooBigSmaller;
      continue;
    }
    // Recomputation only adds: a simulated microbatch with less of it bounds this one's too.
    double simulatedMicrobatch = 0;
    for (Recompute r : {Recompute::None, Recompute::Selective, Recompute::Full})
      if (r <= c.recompute)
        if (auto it = microbatchSeconds.find({c.tp, c.microBatch, r, c.ep}); it != microbatchSeconds.end())
          simulatedMicrobatch = std::max(simulatedMicrobatch, it->second);
    const double timeBound = std::max(flopBound(c), pipelineFactor(c, globalBatch) * simulatedMicrobatch);
    if (int64_t(best.size()) >= top && 0.9 * timeBound > best.back().sim.iterationSeconds) {
      ++slowerBound;
      continue;
    }
    Expected<ParallelPlan> p = planOf(c, globalBatch, flags->precision);
    if (!p) {
      consumeError(p.takeError());
      ++refused;
      continue;
    }
    if (Error e = checkPlanAgainstSpec(*p, *spec, c.microBatch)) {
      consumeError(std::move(e));
      ++refused;
      continue;
    }
    CompileOptions options;
    options.microBatch = c.microBatch;
    options.verifyEachPass = false;
    options.verifyResult = false;
    Expected<mlir::OwningOpRef<mlir::ModuleOp>> module = compile(context, *spec, *p, options);
    if (!module) {
      consumeError(module.takeError());
      ++refused;
      continue;
    }
    Result r{c, simulate(**module, *p, *spec, c.microBatch, globalBatch, cluster, flags->options), 0};
    ++simulated;
    microbatchSeconds[{c.tp, c.microBatch, c.recompute, c.ep}] = r.sim.microbatchSeconds;
    for (double gib : r.sim.memoryGiBPerStage)
      r.memoryGiB = std::max(r.memoryGiB, gib);
    if (r.memoryGiB > memoryLimitGiB) {
      auto [it, inserted] = overMemoryFrom.try_emplace(layout, c.microBatch);
      if (!inserted)
        it->second = std::min(it->second, c.microBatch);
      ++tooBig;
      continue;
    }
    fits.push_back({c.recompute, c.sharding});
    best.push_back(std::move(r));
    std::stable_sort(best.begin(), best.end(),
                     [](const Result &a, const Result &b) { return a.sim.iterationSeconds < b.sim.iterationSeconds; });
    if (int64_t(best.size()) > top)
      best.pop_back();
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  outs() << "megac plan: " << spec->path << " on " << gpus << " x " << cluster.device << " (" << cluster.name
         << "), global batch " << globalBatch << ", " << activationPrecisionName(flags->precision) << ", at most "
         << format("%g", memoryLimitGiB) << " GiB per GPU\n";
  outs() << format("megac plan: %zu candidates: %lld simulated, %lld refused by the compiler, %lld over the memory "
                   "(%lld by the lower bound, %lld as a smaller micro batch was), %lld slower than the best by the "
                   "time bound, %lld skipped for a cheaper variant that fits; %.1f s\n",
                   candidates.size(), (long long)simulated, (long long)refused,
                   (long long)(tooBig + tooBigBound + tooBigSmaller), (long long)tooBigBound, (long long)tooBigSmaller,
                   (long long)slowerBound, (long long)dominated, seconds);
  if (best.empty())
    return fail("no plan fits in " + shortNumber(memoryLimitGiB) + " GiB per GPU; raise --max-memory or use more GPUs");
  int rank = 1;
  for (const Result &r : best) {
    const Candidate &c = r.candidate;
    outs() << format("%d. %.4g tokens/s, %.4g TFLOP/s per GPU (MFU %.1f%%), iteration %.4g s, %.1f GiB per GPU: "
                     "tp %lld pp %lld vpp %lld dp %lld%s, micro batch %lld, recompute %s, %s\n",
                     rank++, r.sim.tokensPerSecond, r.sim.tflopsPerDevice, 100 * r.sim.mfu, r.sim.iterationSeconds,
                     r.memoryGiB, (long long)c.tp, (long long)c.pp, (long long)c.vpp, (long long)c.dp,
                     c.ep > 1 ? (" ep " + std::to_string(c.ep)).c_str() : "", (long long)c.microBatch,
                     recomputeName(c.recompute), c.shardingName());
    outs() << "   megac compile " << planSpecPath;
    const SpecOverrides overrides = specOverrideFlags();
    if (overrides.seqLength)
      outs() << " --seq-length " << *overrides.seqLength;
    if (overrides.hiddenDropout)
      outs() << " --hidden-dropout " << shortestExactText(*overrides.hiddenDropout);
    if (overrides.attentionDropout)
      outs() << " --attention-dropout " << shortestExactText(*overrides.attentionDropout);
    for (const std::string &f : c.flags())
      outs() << " " << f;
    if (flags->precision != ActivationPrecision::Fp32)
      outs() << " --" << activationPrecisionName(flags->precision);
    // Without pp the batch is not compiled in: OUT/train takes it.
    if (c.pp > 1)
      outs() << " --global-batch-size " << globalBatch << " -o OUT\n";
    else
      outs() << " -o OUT   (then OUT/train --global-batch-size " << globalBatch << ")\n";
  }
  return 0;
}
