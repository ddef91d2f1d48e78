#include "megac/Analysis/RankCommunication.h"
#include "megac/Plan/PlanDialect.h"

#include "megac/Analysis/TensorBytes.h"
#include "megac/Plan/PlanIR.h"
#include "megart/comm_counting.h"
#include "tx/TxChunks.h"
#include "tx/TxExpertLoad.h"
#include "tx/TxNames.h"
#include "tx/TxOps.h"
#include "tx/TxParamTable.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"

using namespace mlir;
using namespace megac;

namespace {

constexpr int64_t kFloatBytes = 4, kDoubleBytes = 8;
constexpr int64_t kGradAlignFloats = 16; // ParamStore's 64-byte gradient alignment (no_shard)


/// The bytes per rank of one stage's work, found by walking what its functions call.
class StageWalk {
public:
  StageWalk(ModuleOp module, const ParallelPlan &plan, const tx::ParamTable &table) : module(module), plan(plan) {
    // Where each gradient starts in a no_shard rank's gradient buffer: a dp bucket all-reduces the
    // contiguous range from its first parameter's gradient to the end of its last's.
    int64_t at = 0;
    for (tx::ParamOp p : table.all()) {
      expertBlock.push_back(tx::holdsExpertBlock(p));
      gradOffsets.push_back(at);
      gradNumels.push_back(p.getType().getNumElements());
      at += (gradNumels.back() + kGradAlignFloats - 1) / kGradAlignFloats * kGradAlignFloats;
    }
  }

  /// A call of `fn`: its collectives and its callees'. A bucket started in backward
  /// (--overlap-grad-reduce) goes to `once`: only the iteration's last microbatch starts it.
  AxisBytes call(func::FuncOp fn, AxisBytes &once) {
    AxisBytes bytes;
    fn.walk([&](Operation *op) {
      if (auto r = dyn_cast<shard::AllReduceOp>(op)) {
        auto bucket = r.getInput().getDefiningOp<tx::GradBucketOp>();
        const int64_t sent = bucket ? bucketFloats(bucket.getFirst(), bucket.getLast()) * kFloatBytes
                                    : tensorBytes(r.getResult().getType());
        add(bytes, r.getGrid(), r.getGridAxes(),
            megart::all_reduce_bytes(double(sent), collectiveSize(plan, r.getGrid(), r.getGridAxes())));
      } else if (auto g = dyn_cast<shard::AllGatherOp>(op)) {
        add(bytes, g.getGrid(), g.getGridAxes(),
            megart::gather_bytes(double(tensorBytes(g.getResult().getType())), collectiveSize(plan, g.getGrid(), g.getGridAxes())));
      } else if (auto s = dyn_cast<shard::ReduceScatterOp>(op)) {
        add(bytes, s.getGrid(), s.getGridAxes(),
            megart::gather_bytes(double(tensorBytes(s.getInput().getType())), collectiveSize(plan, s.getGrid(), s.getGridAxes())));
      } else if (auto start = dyn_cast<tx::StartGradSyncOp>(op)) {
        if (std::optional<uint64_t> shard = start.getShardNumel()) {
          // The distributed optimizer's reduce-scatter over the shard group, then (hybrid) the
          // shard's sum across the replicas.
          // An expert-parallel rank's experts: over the dp ranks holding the same (no hybrid sharding).
          const double shardBytes = double(*shard) * kFloatBytes;
          const int64_t degree = expertBlock[start.getFirst()] ? plan.dp / plan.ep : plan.shardDegree;
          once.dp += megart::gather_bytes(shardBytes * double(degree), degree) +
                     megart::all_reduce_bytes(shardBytes, plan.dp / plan.shardDegree);
        } else { // over dp, or an expert-parallel rank's experts over the dp ranks holding the same
          const int64_t group = expertBlock[start.getFirst()] ? plan.dp / plan.ep : plan.dp;
          once.dp += megart::all_reduce_bytes(double(bucketFloats(start.getFirst(), start.getLast()) * kFloatBytes),
                                              group);
        }
      } else if (auto x = dyn_cast<tx::MoeExchangeCountsOp>(op)) {
        const int64_t ranks = static_cast<int64_t>(x.getRanks());
        bytes.ep += double((ranks - 1) * (tensorBytes(x.getCounts().getType()) / ranks));
      } else if (auto d = dyn_cast<tx::MoeDispatchOp>(op)) {
        bytes.ep += exchangeBound(d.getInput(), d.getResult(), d.getRanks());
      } else if (auto combine = dyn_cast<tx::MoeCombineOp>(op)) {
        bytes.ep += exchangeBound(combine.getResult(), combine.getInput(), combine.getRanks());
      } else if (auto c = dyn_cast<func::CallOp>(op)) {
        if (auto callee = module.lookupSymbol<func::FuncOp>(c.getCallee()))
          bytes += callee == fn ? AxisBytes{} : calleeBytes(callee);
      }
    });
    return bytes;
  }

private:
  /// An expert exchange's bytes to the other ranks: at most all of this rank's rows in expert order
  /// (`local`), and at most the other ranks' shares of the exchanged rows; whichever is less.
  static double exchangeBound(Value local, Value exchanged, uint64_t ranks) {
    const int64_t others = (int64_t(ranks) - 1) * (tensorBytes(exchanged.getType()) / int64_t(ranks));
    return double(std::min(tensorBytes(local.getType()), others));
  }
  AxisBytes calleeBytes(func::FuncOp callee) {
    auto it = memo.find(callee.getName());
    if (it != memo.end())
      return it->second;
    AxisBytes unusedOnce;
    AxisBytes b = call(callee, unusedOnce);
    memo[callee.getName()] = b;
    return b;
  }
  int64_t bucketFloats(int64_t first, int64_t last) const {
    return gradOffsets[last] + gradNumels[last] - gradOffsets[first];
  }
  /// A collective's bytes to its axis's count: @dp_grid's replicas and shards are dp ranks.
  void add(AxisBytes &b, StringRef grid, ArrayRef<int16_t> axes, double bytes) const {
    if (axes.size() != 1)
      return;
    if (grid == names::kDpGrid || (grid == names::kEpGrid && axes[0] == static_cast<int16_t>(EpGridAxis::ExpertDp))) {
      b.dp += bytes;
      return;
    }
    if (grid == names::kEpGrid) {
      b.ep += bytes;
      return;
    }
    switch (static_cast<GridAxis>(axes[0])) {
    case GridAxis::Pp: b.pp += bytes; break;
    case GridAxis::Dp: b.dp += bytes; break;
    case GridAxis::Tp: b.tp += bytes; break;
    }
  }

  ModuleOp module;
  const ParallelPlan &plan;
  SmallVector<int64_t> gradOffsets, gradNumels;
  SmallVector<bool> expertBlock; // the parameter is an expert-parallel rank's block of experts
  llvm::StringMap<AxisBytes> memo;
};

/// Elements of parameter `index`'s gradient that its tied copies sum: the whole block, or where
/// the buckets are reduce-scattered before (ParallelPlan::tiedGradsOnShards) this rank's shard of
/// the block's own bucket.
int64_t tiedFloats(const tx::ParamTable &table, int64_t index, func::FuncOp syncFn, const ParallelPlan &plan) {
  const int64_t whole = table[index].getType().getNumElements();
  auto layout = syncFn ? syncFn->getAttrOfType<DictionaryAttr>(names::kFlatLayoutAttr) : DictionaryAttr();
  if (!plan.tiedGradsOnShards() || !layout)
    return whole;
  const int64_t at = cast<DenseI64ArrayAttr>(layout.get("param_offsets")).asArrayRef()[index];
  ArrayRef<int64_t> buckets = cast<DenseI64ArrayAttr>(layout.get("buckets")).asArrayRef();
  // A tied weight is never an expert: its bucket shards over the shard group.
  for (size_t b = 0; b + 1 < buckets.size(); b += 2)
    if (at >= buckets[b] && at < buckets[b] + buckets[b + 1])
      return buckets[b + 1] / plan.shardDegree;
  return whole;
}

std::string formatBytes(double bytes) {
  static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4)
    bytes /= 1024, ++u;
  std::string text;
  llvm::raw_string_ostream(text) << llvm::format(u ? "%.2f " : "%.0f ", bytes) << units[u];
  return text;
}

llvm::json::Object axisJson(const AxisBytes &b) {
  return llvm::json::Object{{"tp", b.tp}, {"dp", b.dp}, {"pp", b.pp}, {"ep_at_most", b.ep}};
}

} // namespace

SmallVector<StageCommunication> megac::communicationPlan(ModuleOp module, const ParallelPlan &plan) {
  SmallVector<StageCommunication> result;
  // With --overlap-grad-reduce the backward starts the dp buckets; OUT/train does not run the
  // sync function then.
  bool overlapped = false;
  module.walk([&](tx::StartGradSyncOp) { overlapped = true; });
  auto runsOnce = [&](StringRef name) {
    return overlapped && name.starts_with(names::kSyncGradients) ? func::FuncOp()
                                                                  : module.lookupSymbol<func::FuncOp>(name);
  };
  // What OUT/train sums itself every iteration: the loss over pp and dp, the gradient norm's sum of
  // squares over the shard group (sharded state), tp and pp; all doubles.
  AxisBytes runtimeSums;
  runtimeSums.pp = 2 * megart::all_reduce_bytes(kDoubleBytes, plan.pp);
  runtimeSums.dp = megart::all_reduce_bytes(kDoubleBytes, plan.dp) +
                   (plan.sharding != ShardingStrategy::NoShard ? megart::all_reduce_bytes(kDoubleBytes, plan.shardDegree)
                                                               : 0.0);
  runtimeSums.tp = megart::all_reduce_bytes(kDoubleBytes, plan.tp);
  // The gradient norm's experts, summed over ep unless sharded (then every rank's shards are
  // distinct and the sum over dp covers them).
  if (plan.sharding == ShardingStrategy::NoShard)
    runtimeSums.ep = megart::all_reduce_bytes(kDoubleBytes, plan.ep);
  // A program that reports metrics (tx.metric) sums every metric the runtime knows with the loss
  // (in the same reduction: the bytes add up).
  // A load histogram (tx.record_expert_load) joins that reduction, layers x experts counts after
  // every metric.
  bool reports = false;
  module.walk([&](tx::MetricOp) { reports = true; });
  double histogram = 0;
  if (std::optional<tx::ExpertLoadShape> load = tx::expertLoadShape(module))
    histogram = double(load->layers) * double(load->experts) * kDoubleBytes;
  if (reports || histogram > 0) {
    const double metrics = double(tx::getMaxEnumValForMetric() + 1) * kDoubleBytes + histogram;
    runtimeSums.pp += megart::all_reduce_bytes(metrics, plan.pp);
    runtimeSums.dp += megart::all_reduce_bytes(metrics, plan.dp);
  }
  if (!tx::hasChunkFunctions(module)) // not yet split: nothing per rank to count
    return result;
  // Tensors held by several stages (tied weights) and how many stages hold each.
  llvm::StringMap<int64_t> holders;
  for (int64_t s = 0; s < plan.pp; ++s) {
    llvm::StringSet<> seen;
    tx::ParamTable table(tx::stageFunctions(module, s, plan.pp));
    for (tx::ParamOp p : table.all())
      if (seen.insert(p.getName()).second)
        ++holders[p.getName()];
  }
  int64_t chunks = 0;
  for (auto fn : module.getOps<func::FuncOp>())
    if (tx::chunkOf(fn) && !isBackward(roleOf(fn)))
      ++chunks;
  for (int64_t s = 0; s < plan.pp; ++s) {
    SmallVector<func::FuncOp> fns = tx::stageFunctions(module, s, plan.pp);
    tx::ParamTable table(fns);
    StageWalk walk(module, plan, table);
    StageCommunication c;
    c.stage = s;
    c.perIteration = runtimeSums;
    c.microbatches = plan.numMicrobatches;
    for (func::FuncOp fn : fns) {
      c.perMicrobatch += walk.call(fn, c.perIteration);
      // The executor sends a chunk's output on (not the last chunk's) and its input gradient back
      // (not chunk 0's), once per microbatch.
      const int64_t chunk = *tx::chunkOf(fn);
      if (isBackward(roleOf(fn)))
        continue;
      if (chunk != chunks - 1)
        c.perMicrobatch.pp += double(tensorBytes(fn.getResultTypes()[0]));
      if (chunk != 0)
        c.perMicrobatch.pp += double(tensorBytes(fn.getArgument(2).getType()));
    }
    auto syncFn = module.lookupSymbol<func::FuncOp>(names::stageSyncName(s));
    for (const std::string &name : {names::stageSyncName(s), names::stageGatherName(s)})
      if (auto fn = runsOnce(name))
        c.perIteration += walk.call(fn, c.perIteration);
    // The tied gradients, summed between the stages that hold them.
    for (int64_t i = 0; i < table.size(); ++i)
      if (int64_t group = holders[table[i].getName()]; group > 1)
        c.perIteration.pp +=
            megart::all_reduce_bytes(double(tiedFloats(table, i, syncFn, plan) * kFloatBytes), group);
    result.push_back(c);
  }
  return result;
}

void megac::printCommunication(ArrayRef<StageCommunication> stages, const ParallelPlan &plan, StringRef prefix,
                               raw_ostream &os) {
  for (const StageCommunication &c : stages) {
    const int64_t m = c.microbatches > 0 ? c.microbatches : 1;
    const AxisBytes t = c.total(m);
    os << prefix << "sent per iteration per rank" << (plan.pp > 1 ? " of pp stage " + std::to_string(c.stage) : "")
       << ": tp " << formatBytes(t.tp) << ", dp " << formatBytes(t.dp) << ", pp " << formatBytes(t.pp)
       << (plan.ep > 1 ? ", ep at most " + formatBytes(t.ep) + " (the routing decides)" : "") << " ("
       << m << " microbatch" << (m == 1 ? "" : "es")
       << (plan.pp == 1 ? "; the step's part scales with OUT/train's --global-batch-size" : "") << ")\n";
  }
}

std::string megac::communicationJson(ArrayRef<StageCommunication> stages, const ParallelPlan &plan) {
  llvm::json::Array list;
  for (const StageCommunication &c : stages) {
    const int64_t m = c.microbatches > 0 ? c.microbatches : 1;
    list.push_back(llvm::json::Object{{"pp_stage", c.stage},
                                      {"microbatches", m},
                                      {"bytes_per_microbatch", axisJson(c.perMicrobatch)},
                                      {"bytes_per_iteration_besides", axisJson(c.perIteration)},
                                      {"bytes", axisJson(c.total(m))}});
  }
  llvm::json::Object root{{"plan", plan.summary()},
                          {"convention", "bytes each rank sends, as ring algorithms move them (NCCL's bus bytes); "
                                         "ep_at_most: expert parallelism's all-to-all exchanges, at most (dropless "
                                         "routing decides how many rows leave the rank)"},
                          {"stages", std::move(list)}};
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(root))) << "\n";
  return text;
}
