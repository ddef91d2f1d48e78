#include "megac/Analysis/RankMemory.h"
#include "megac/Plan/FlatBufferLayout.h"
#include "megart/nf4.h"

#include "tx/TxChunks.h"
#include "tx/TxNames.h"
#include "tx/TxParamTable.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"

using namespace mlir;
using namespace megac;

namespace {

constexpr int64_t kFloatBytes = 4;        // fp32 parameters, gradients and moments
constexpr int64_t kGradAlignFloats = 16;  // ParamStore's 64-byte gradient alignment (no_shard)

StageStateMemory trainableMemory(const tx::ParamTable &table, DictionaryAttr flatLayout, const ParallelPlan &plan);

StageStateMemory stageMemory(int64_t stage, ArrayRef<func::FuncOp> fns, DictionaryAttr flatLayout,
                             const ParallelPlan &plan) {
  StageStateMemory m = trainableMemory(tx::ParamTable(fns), flatLayout, plan);
  m.stage = stage;
  // The frozen store: one fp32 allocation per parameter block.
  const tx::ParamTable frozen(fns, /*frozen=*/true);
  for (tx::ParamOp p : frozen.all()) {
    const int64_t n = p.getType().getNumElements();
    m.frozenParameters += n;
    if (std::optional<uint64_t> block = p.getNf4Block()) { // QLoRA: megart::nf4_weight_bytes
      m.nf4Parameters += n;
      m.nf4Bytes += megart::nf4_weight_bytes(n, static_cast<int64_t>(*block));
    } else {
      m.frozenBytes += n * kFloatBytes;
    }
  }
  m.frozenBytes += m.nf4Bytes;
  return m;
}

StageStateMemory trainableMemory(const tx::ParamTable &table, DictionaryAttr flatLayout, const ParallelPlan &plan) {
  StageStateMemory m;
  SmallVector<int64_t> numels;
  for (tx::ParamOp p : table.all())
    numels.push_back(p.getType().getNumElements());
  if (plan.sharding == ShardingStrategy::NoShard) {
    // One allocation per parameter and per moment; the gradients in one buffer, each 64-byte aligned.
    for (int64_t n : numels) {
      m.parameters += n;
      m.paddingElements += (n + kGradAlignFloats - 1) / kGradAlignFloats * kGradAlignFloats - n;
    }
    m.paramBytes = m.parameters * kFloatBytes;
    m.gradBytes = (m.parameters + m.paddingElements) * kFloatBytes;
    m.optimizerBytes = 2 * m.parameters * kFloatBytes;
    return m;
  }
  // The buffer megac-data-parallel laid out (its attribute on the sync function: an
  // expert-parallel rank's experts shard over fewer ranks), else the same layout computed here
  // without experts (a module the pass has not run on).
  FlatBufferLayout computed;
  if (!flatLayout)
    computed = layoutFlatBuffer(numels, plan.ddpBucketSize, plan.shardDegree);
  const int64_t numel = flatLayout ? cast<IntegerAttr>(flatLayout.get("numel")).getInt() : computed.numel;
  const int64_t shard = flatLayout ? cast<IntegerAttr>(flatLayout.get("shard_numel")).getInt() : computed.shardNumel;
  for (int64_t n : numels)
    m.parameters += n;
  m.paddingElements = numel - m.parameters;
  const bool shardGrads = plan.shardedState() != ShardingStrategy::Optim;
  const bool shardParams = plan.shardedState() == ShardingStrategy::OptimGradsParams;
  m.paramBytes = (shardParams ? shard : numel) * kFloatBytes;
  m.gradBytes = (shardGrads ? shard : numel) * kFloatBytes;
  const int64_t offloaded = plan.offloadedNumel(shard);
  m.optimizerBytes = 2 * (shard - offloaded) * kFloatBytes;
  m.offloadedBytes = 4 * offloaded * kFloatBytes; // master weights, two moments, gradients' copy
  m.masterBytes = 0; // fp32 parameters are their own master copy
  return m;
}

DictionaryAttr flatLayoutOf(ModuleOp module, StringRef syncName) {
  auto fn = module.lookupSymbol<func::FuncOp>(syncName);
  return fn ? fn->getAttrOfType<DictionaryAttr>(names::kFlatLayoutAttr) : DictionaryAttr();
}

/// "4.127 bits per weight".
std::string formatBits(int64_t bytes, int64_t elements) {
  std::string text;
  llvm::raw_string_ostream(text) << llvm::format("%.3f", 8.0 * double(bytes) / double(elements)) << " bits per weight";
  return text;
}

std::string formatBytes(int64_t bytes) {
  if (bytes < 1024)
    return std::to_string(bytes) + " B";
  static const char *units[] = {"KiB", "MiB", "GiB", "TiB"};
  double v = double(bytes) / 1024;
  int u = 0;
  while (v >= 1024 && u < 3)
    v /= 1024, ++u;
  std::string text;
  llvm::raw_string_ostream(text) << llvm::format("%.2f ", v) << units[u];
  return text;
}

} // namespace

SmallVector<StageStateMemory> megac::stateMemory(ModuleOp module, const ParallelPlan &plan) {
  SmallVector<StageStateMemory> result;
  if (!tx::hasChunkFunctions(module)) // not yet split: nothing per rank to count
    return result;
  for (int64_t s = 0; s < plan.pp; ++s)
    result.push_back(stageMemory(s, tx::stageFunctions(module, s, plan.pp),
                                 flatLayoutOf(module, names::stageSyncName(s)), plan));
  return result;
}

void megac::addProgramBuffers(MutableArrayRef<StageStateMemory> stages, ArrayRef<StageBuffers> buffers) {
  for (auto [m, b] : llvm::zip(stages, buffers)) {
    m.workspaceBytes = b.workspaceBytes;
    m.activationBytes = b.activationBytes;
    m.communicationBytes = b.communicationBytes;
    m.dataBytesPerMicrobatch = b.dataBytesPerMicrobatch;
    m.microbatches = b.microbatches > 0 ? b.microbatches : 1;
    m.dataBytes = m.dataBytesPerMicrobatch * m.microbatches;
  }
}

void megac::printStateMemory(ArrayRef<StageStateMemory> stages, const ParallelPlan &plan, StringRef prefix,
                             raw_ostream &os) {
  for (const StageStateMemory &m : stages) {
    os << prefix << "training state per rank";
    if (plan.pp > 1)
      os << " of pp stage " << m.stage;
    os << " (" << shardingStrategyName(plan.sharding);
    if (plan.sharding != ShardingStrategy::NoShard)
      os << " over " << plan.shardDegree << " dp ranks";
    if (plan.keepsParamsGathered())
      os << "; the parameters stay gathered under pp, --fsdp-reshard-after-forward always shards them";
    os << "): parameters " << formatBytes(m.paramBytes) << ", gradients " << formatBytes(m.gradBytes)
       << ", optimizer state " << formatBytes(m.optimizerBytes) << ", master weights " << formatBytes(m.masterBytes)
       << (m.offloadedBytes ? ", offloaded to the host " + formatBytes(m.offloadedBytes) : std::string())
       << (m.frozenParameters ? ", frozen parameters " + formatBytes(m.frozenBytes) + " (" +
                                    std::to_string(m.frozenParameters) + ", no gradient or optimizer state" +
                                    (m.nf4Parameters ? "; " + std::to_string(m.nf4Parameters) + " in NF4, " +
                                                           formatBits(m.nf4Bytes, m.nf4Parameters)
                                                     : std::string()) +
                                    ")"
                              : std::string())
       << "; total " << formatBytes(m.stateBytes()) << (m.frozenParameters ? " (trainable: " : " = ")
       << llvm::format("%.3f", m.bytesPerParameter()) << " bytes x " << m.parameters << " parameters"
       << (m.frozenParameters ? ")" : "");
    if (m.paddingElements)
      os << " (with " << m.paddingElements << " elements of "
         << (plan.sharding == ShardingStrategy::NoShard ? "gradient alignment" : "bucket") << " padding)";
    os << "\n";
    if (m.totalBytes() == m.stateBytes())
      continue; // nothing emitted yet (a memory plan without a program)
    os << prefix << "  besides: workspace " << formatBytes(m.workspaceBytes) << ", activations "
       << formatBytes(m.activationBytes) << ", communication " << formatBytes(m.communicationBytes) << ", data "
       << formatBytes(m.dataBytes) << " (" << m.microbatches << " microbatch" << (m.microbatches == 1 ? "" : "es")
       << (plan.pp == 1 ? "; scales with OUT/train's --global-batch-size" : "") << "); peak "
       << formatBytes(m.totalBytes()) << "\n";
  }
}

std::string megac::stateMemoryJson(ArrayRef<StageStateMemory> stages, const ParallelPlan &plan,
                                   ArrayRef<LayerActivations> layers) {
  llvm::json::Array list;
  for (const StageStateMemory &m : stages)
    list.push_back(llvm::json::Object{{"pp_stage", m.stage},
                                      {"parameters", m.parameters},
                                      {"padding_elements", m.paddingElements},
                                      {"bytes",
                                       llvm::json::Object{{"parameters", m.paramBytes},
                                                          {"gradients", m.gradBytes},
                                                          {"optimizer_state", m.optimizerBytes},
                                                          {"master_weights", m.masterBytes},
                                                          {"activations", m.activationBytes},
                                                          {"workspace", m.workspaceBytes},
                                                          {"communication", m.communicationBytes},
                                                          {"data", m.dataBytes},
                                                          {"offloaded_optimizer", m.offloadedBytes},
                                                          {"frozen_parameters", m.frozenBytes}}},
                                      {"frozen_parameters", m.frozenParameters},
                                      {"frozen_nf4_parameters", m.nf4Parameters},
                                      {"frozen_nf4_bytes", m.nf4Bytes},
                                      {"data_bytes_per_microbatch", m.dataBytesPerMicrobatch},
                                      {"microbatches", m.microbatches},
                                      {"training_state_bytes", m.stateBytes()},
                                      {"total_bytes", m.totalBytes()}});
  llvm::json::Object root{{"plan", plan.summary()},
                          {"data_parallel_sharding_strategy", shardingStrategyName(plan.sharding)},
                          {"data_parallel_shard_degree", plan.shardDegree},
                          {"layer_activations", layerActivationsJson(layers)},
                          {"stages", std::move(list)}};
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(root))) << "\n";
  return text;
}
