#include "megac/Sim/Simulate.h"

#include "llvm/Support/Format.h"

using namespace megac::sim;

namespace {

/// The split's parts in the order they are printed, with their JSON names.
std::vector<std::pair<const char *, double>> parts(const TimeSplit &t) {
  return {{"compute", t.compute}, {"memory_bound", t.memory}, {"tp_communication", t.tpComm},
          {"ep_communication", t.epComm},
          {"pipeline_bubble", t.bubble}, {"dp_communication", t.dpComm}, {"optimizer", t.optimizer}};
}

} // namespace

void megac::sim::printSimulation(const Simulation &s, const Cluster &cluster, llvm::StringRef prefix,
                                 llvm::raw_ostream &os) {
  os << prefix << "cluster " << cluster.name << ": " << cluster.device << ", " << cluster.devicesPerNode
     << " per node\n";
  os << prefix << llvm::format("iteration %.6g s, %.6g tokens/s, %.4g TFLOP/s per device, MFU %.1f%%",
                               s.iterationSeconds, s.tokensPerSecond, s.tflopsPerDevice, 100 * s.mfu)
     << "\n";
  const bool pipelined = s.memoryGiBPerStage.size() > 1;
  os << prefix << "time split"
     << (pipelined ? " (pp stage " + std::to_string(s.slowestStage) + ", the last to finish)" : std::string()) << ":";
  for (auto [name, seconds] : parts(s.split))
    os << llvm::format(" %s %.1f%%", name, 100 * seconds / s.iterationSeconds);
  os << "\n" << prefix << "memory per device:";
  for (double gib : s.memoryGiBPerStage)
    os << llvm::format(" %.2f", gib);
  os << llvm::format(" GiB (of %.4g GiB): ", cluster.memoryGiB) << (s.fits ? "fits" : "DOES NOT FIT") << "\n";
  if (s.trainTokens > 0)
    os << prefix
       << llvm::format("training %.4g tokens: %.4g days at the simulated tokens/s (Megatron's estimate 6TP/(nX), "
                       "X the simulated TFLOP/s per device: %.4g days)",
                       s.trainTokens, s.trainSeconds / 86400, s.trainEstimateSeconds / 86400)
       << "\n";
}

llvm::json::Object megac::sim::simulationJson(const Simulation &s, const Cluster &cluster) {
  llvm::json::Object split;
  for (auto [name, seconds] : parts(s.split))
    split[name] = seconds;
  llvm::json::Array memory;
  for (double gib : s.memoryGiBPerStage)
    memory.push_back(gib);
  llvm::json::Object out{{"cluster", cluster.name},
                            {"iteration_time_s", s.iterationSeconds},
                            {"tokens_per_s", s.tokensPerSecond},
                            {"tflops_per_gpu", s.tflopsPerDevice},
                            {"mfu", s.mfu},
                            {"memory_gib_per_gpu", std::move(memory)},
                            {"fits", s.fits},
                            {"slowest_pp_stage", s.slowestStage},
                            {"time_split_s", std::move(split)}};
  if (s.trainTokens > 0) {
    out["train_tokens"] = s.trainTokens;
    out["train_time_s"] = s.trainSeconds;
    out["train_time_estimate_s"] = s.trainEstimateSeconds;
  }
  return out;
}
