#include "CostModel.h"

#include "megac/Plan/PlanIR.h"
#include "megac/Analysis/TensorBytes.h"
#include "megart/comm_counting.h"
#include "tx/TxNames.h"
#include "tx/TxOps.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "llvm/ADT/TypeSwitch.h"

#include <algorithm>
#include <cmath>
#include <optional>

using namespace mlir;
using namespace megac;
using namespace megac::sim;

namespace {

double bytesOf(Value v) { return isa<RankedTensorType>(v.getType()) ? double(tensorBytes(v.getType())) : 0.0; }
int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
/// What an op reads and writes: its tensor operands and results.
double touchedBytes(Operation *op) {
  double bytes = 0;
  for (Value v : op->getOperands())
    bytes += bytesOf(v);
  for (Value v : op->getResults())
    bytes += bytesOf(v);
  return bytes;
}

} // namespace

const Link &megac::sim::linkFor(const Cluster &cluster, int64_t stride, int64_t size) {
  return stride * size <= cluster.devicesPerNode ? cluster.intraNode : cluster.interNode;
}

double megac::sim::transferSeconds(const Link &link, double bytesPerRank, int64_t steps) {
  return bytesPerRank / (link.busBandwidthGBps * 1e9) + double(steps) * link.latencyUs * 1e-6;
}

double CostModel::computeSeconds(double flops, double efficiency, double bytes) const {
  const double peak = (sixteenBitGemms ? cluster.peakTflops16 : cluster.peakTflops32) * 1e12;
  return std::max(flops / (peak * efficiency), memorySeconds(bytes)) + cluster.kernelLaunchUs * 1e-6;
}

double CostModel::gemmSeconds(int64_t batch, int64_t m, int64_t n, int64_t k, double bytes) const {
  const double flops = 2.0 * double(batch) * double(m) * double(n) * double(k);
  double efficiency = cluster.gemmEfficiency;
  const int64_t smallestSide = std::min({m, n, k});
  if (cluster.gemmSaturation > 0 && smallestSide < cluster.gemmSaturation)
    efficiency *= double(std::max<int64_t>(smallestSide, 1)) / double(cluster.gemmSaturation);
  if (cluster.gemmTilesAtOnce > 0) {
    // The share of the tiles' waves that is useful output, the tile laid either way on the
    // output (the library picks the better).
    auto useful = [&](int64_t tileRows, int64_t tileCols) {
      const double tiles = double(batch) * double(ceilDiv(m, tileRows)) * double(ceilDiv(n, tileCols));
      const double waves = std::ceil(tiles / double(cluster.gemmTilesAtOnce));
      return double(batch) * double(m) * double(n) /
             (waves * double(cluster.gemmTilesAtOnce) * double(tileRows) * double(tileCols));
    };
    const int64_t small = std::min(cluster.gemmTileRows, cluster.gemmTileCols);
    efficiency *= std::max({useful(cluster.gemmTileRows, cluster.gemmTileCols),
                            useful(cluster.gemmTileCols, cluster.gemmTileRows), useful(small, small)});
  }
  return computeSeconds(flops, efficiency, bytes);
}

double CostModel::memorySeconds(double bytes) const { return bytes / (cluster.memoryBandwidthGBps * 1e9); }

WorkCost CostModel::function(func::FuncOp fn) {
  if (auto it = memo.find(fn.getName()); it != memo.end())
    return it->second;
  // Expert parallelism: a rank's received rows fill their buffer (ep x tokens x min(top k,
  // experts / ep)) only under the worst routing; the grouped GEMMs compute the rows that arrive
  // (their counts), on average as many as the rank sends (tokens x top k) when the routing spreads
  // them evenly. The values in a buffer's rows, from each tx.moe_dispatch to the tx.moe_combine,
  // with that share; the other kernels run over the whole buffer.
  struct Received {
    int64_t rows;
    double share;
  };
  DenseMap<Value, Received> received;
  auto leadingRows = [](Value v) -> int64_t {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    return t && t.getRank() > 0 ? t.getDimSize(0) : -1;
  };
  WorkCost total;
  for (Operation &o : fn.getBody().front()) {
    WorkCost c = op(&o);
    if (auto d = dyn_cast<tx::MoeDispatchOp>(o)) {
      received[d.getResult()] = {leadingRows(d.getResult()),
                                 double(leadingRows(d.getInput())) / double(leadingRows(d.getResult()))};
    } else if (!isa<tx::MoeCombineOp, func::CallOp>(o)) {
      std::optional<Received> in;
      for (Value v : o.getOperands())
        if (auto it = received.find(v); it != received.end())
          in = it->second;
      if (in) {
        if (isa<tx::GroupedMatmulOp, tx::GroupedMatmulWeightGradOp>(o))
          c.compute *= in->share;
        for (Value r : o.getResults())
          if (leadingRows(r) == in->rows)
            received[r] = *in;
      }
    }
    total += c;
  }
  memo[fn.getName()] = total;
  return total;
}

WorkCost CostModel::op(Operation *o) {
  WorkCost c;
  const double launch = cluster.kernelLaunchUs * 1e-6;
  // A GEMM of batch x [m, k] x [k, n].
  auto gemm = [&](int64_t batch, int64_t m, int64_t n, int64_t k) {
    c.compute = gemmSeconds(batch, m, n, k, touchedBytes(o));
  };
  // Attention: the GEMMs over its score matrix, of the share the kernel computes (the op's
  // AttentionShape: a causal mask skips half the tiles, as a flash kernel does).
  auto attention = [&](const tx::AttentionShape &a) {
    const double flops = double(a.gemms) * 2.0 * double(a.batch) * a.heads * a.queries * a.keys * a.headDim *
                         a.computedShare;
    c.compute = computeSeconds(flops, cluster.attentionEfficiency, touchedBytes(o));
  };
  // Megatron's unfused attention: the scores written out as a [b x heads, s, s] tensor of the
  // activations' type by a batched GEMM, a softmax that reads and writes them, and a batched GEMM
  // with V; its backward makes dV and dP, the softmax gradient (reading P and dP, writing dS), then
  // dQ and dK. The mask is applied inside the softmax kernel; the full square is computed. Each
  // GEMM reads or writes the scores once and two q-sized tensors (K and V counted as Q's size).
  auto unfusedAttention = [&](Value query, const tx::AttentionShape &a) {
    const int64_t batch = a.batch * a.heads, s = a.queries, d = a.headDim;
    const bool backward = a.backward;
    const double qBytes = bytesOf(query), scoreBytes = qBytes / double(d) * double(s);
    const double gemmBytes = scoreBytes + 2 * qBytes;
    const double scores = gemmSeconds(batch, s, s, d, gemmBytes); // QK^T, and dP = dO V^T
    const double weighted = gemmSeconds(batch, s, d, s, gemmBytes); // PV, and dV, dQ, dK
    c.compute = backward ? scores + 3 * weighted : scores + weighted;
    c.memory = memorySeconds((backward ? 3 : 2) * scoreBytes) + launch;
  };
  auto allToAllSeconds = [&](Value localRows) {
    const double evenShare = bytesOf(localRows) * double(plan.ep - 1) / double(plan.ep);
    return transferSeconds(linkFor(cluster, plan.tp, plan.ep), evenShare, plan.ep - 1) + launch;
  };
  auto collective = [&](StringRef grid, ArrayRef<int16_t> axes, double sent, int64_t stepsPerRank) {
    // Only tensor-parallel collectives sit in a step's critical path here; data-parallel ones
    // are costed by the simulation from the plan's byte counts.
    if (grid != names::kGrid || axes.size() != 1 || axes[0] != static_cast<int16_t>(GridAxis::Tp) || plan.tp == 1)
      return;
    c.tp = transferSeconds(linkFor(cluster, 1, plan.tp), sent, stepsPerRank * (plan.tp - 1));
  };
  llvm::TypeSwitch<Operation *>(o)
      .Case([&](func::CallOp call) {
        if (auto callee = module.lookupSymbol<func::FuncOp>(call.getCallee()))
          c = function(callee);
      })
      .Case([&](tx::GemmOpInterface g) {
        const tx::GemmShape s = g.getGemmShape();
        gemm(s.batch, s.m, s.n, s.k);
      })
      .Case([&](tx::AttentionOpInterface a) {
        const tx::AttentionShape shape = a.getAttentionShape();
        if (costsUnfusedAttention)
          unfusedAttention(a.getQuery(), shape);
        else
          attention(shape);
      })
      .Case([&](shard::AllReduceOp r) {
        collective(r.getGrid(), r.getGridAxes(), megart::all_reduce_bytes(bytesOf(r.getResult()), plan.tp), 2);
      })
      .Case([&](shard::AllGatherOp g) {
        collective(g.getGrid(), g.getGridAxes(), megart::gather_bytes(bytesOf(g.getResult()), plan.tp), 1);
      })
      .Case([&](shard::ReduceScatterOp s) {
        collective(s.getGrid(), s.getGridAxes(), megart::gather_bytes(bytesOf(s.getInput()), plan.tp), 1);
      })
      .Case([&](shard::AllSliceOp s) { c.memory = memorySeconds(bytesOf(s.getResult())) + launch; })
      // Expert parallelism's exchanges over the ep ranks (ep consecutive dp ranks): routing that
      // spreads the rows evenly sends (ep - 1) / ep of this rank's rows (dispatch) and as many back
      // (combine), in ep - 1 messages; the counts are a few bytes, a message each.
      .Case([&](tx::MoeExchangeCountsOp x) {
        c.ep = transferSeconds(linkFor(cluster, plan.tp, plan.ep), bytesOf(x.getCounts()), plan.ep - 1);
      })
      .Case([&](tx::MoeDispatchOp d) { c.ep = allToAllSeconds(d.getInput()); })
      .Case([&](tx::MoeCombineOp d) { c.ep = allToAllSeconds(d.getResult()); })
      // Views and bookkeeping: no kernel.
      .Case<tx::ReshapeOp, tx::ParamOp, tx::BucketParamOp, tx::LocalParamShardOp, tx::GradBucketOp,
            tx::WaitParamGatherOp, tx::WaitCollectiveOp, tx::StartGradSyncOp, func::ReturnOp>([](Operation *) {})
      .Case([&](tx::EmbeddingOp e) { c.memory = memorySeconds(2 * bytesOf(e.getResult()) + bytesOf(e.getIds())) + launch; })
      .Default([&](Operation *) {
        // Memory-bound: norms, activations, rope, elementwise, the loss, gradient accumulation.
        c.memory = memorySeconds(touchedBytes(o)) + launch;
      });
  return c;
}
