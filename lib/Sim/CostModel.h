// The cost of the compiled program's functions on one device: each op's seconds by kind, from its
// shapes and types in the IR. Tensor-parallel collectives and expert parallelism's all-to-alls
// are costed where they run (they sit on the critical path); data-parallel and pipeline traffic is
// costed by Simulate.cpp, which knows what overlaps.
#pragma once

#include "megac/Plan/ParallelPlan.h"
#include "megac/Sim/Cluster.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringMap.h"

namespace megac::sim {

struct WorkCost {
  double compute = 0, memory = 0, tp = 0; // seconds
  double ep = 0; // expert parallelism's all-to-all exchanges (on the critical path too)
  double seconds() const { return compute + memory + tp + ep; }
  WorkCost &operator+=(const WorkCost &o) {
    compute += o.compute, memory += o.memory, tp += o.tp, ep += o.ep;
    return *this;
  }
};

/// The link a collective over `size` ranks spaced `stride` apart takes: inside a node when they
/// all fit in one (Megatron's rank order: tp fastest, then dp, then pp, nodes in rank order).
const Link &linkFor(const Cluster &cluster, int64_t stride, int64_t size);
/// Seconds to send `bytesPerRank` (the ring count: what each rank puts on the wire) in `steps`
/// ring steps over `link`.
double transferSeconds(const Link &link, double bytesPerRank, int64_t steps);

class CostModel {
public:
  CostModel(mlir::ModuleOp module, const ParallelPlan &plan, const Cluster &cluster, bool sixteenBitGemms,
            bool unfusedAttention)
      : module(module), plan(plan), cluster(cluster), sixteenBitGemms(sixteenBitGemms),
        costsUnfusedAttention(unfusedAttention) {}

  /// One call of `fn`, its callees included (memoised by name).
  WorkCost function(mlir::func::FuncOp fn);
  /// One op (a call: its callee).
  WorkCost op(mlir::Operation *op);

private:
  /// `flops` at the peak of the program's GEMM precision x `efficiency`, at least `bytes` over
  /// the memory bandwidth, plus a launch.
  double computeSeconds(double flops, double efficiency, double bytes) const;
  /// batch x [m, k] x [k, n] at the GEMM efficiency, less its size fall-off and its tile and
  /// wave quantization.
  double gemmSeconds(int64_t batch, int64_t m, int64_t n, int64_t k, double bytes) const;
  double memorySeconds(double bytes) const;

  mlir::ModuleOp module;
  const ParallelPlan &plan;
  const Cluster &cluster;
  bool sixteenBitGemms;
  bool costsUnfusedAttention; // cost attention as Megatron's unfused kernels (--attention-backend unfused)
  llvm::StringMap<WorkCost> memo;
};

} // namespace megac::sim
