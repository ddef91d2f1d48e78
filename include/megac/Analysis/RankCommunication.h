// What one rank sends per iteration over each parallel axis, per pipeline stage, counted as the
// ring algorithms move it (megart/comm_counting.h: an all-reduce of b bytes over p ranks sends
// 2 (p - 1) / p x b, a reduce-scatter or all-gather (p - 1) / p of the whole, a point-to-point
// send its bytes). From the compiled module: every collective of the functions a step runs (and
// their callees), the pipeline's sends, the data-parallel buckets, and what OUT/train adds per
// iteration (the loss and gradient-norm sums, the tied-weight sums). The runtime counts the same
// and reports it per iteration; they must agree. Written to OUT/rank-communication.json.
#pragma once

#include "megac/Plan/ParallelPlan.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>

namespace megac {

struct AxisBytes {
  double tp = 0, dp = 0, pp = 0;
  // Expert parallelism's exchanges: an upper bound (how many rows go to other ranks is the
  // router's choice; dropless routing sends at most this), exact for the counts and the sums.
  double ep = 0;
  AxisBytes &operator+=(const AxisBytes &o) {
    tp += o.tp, dp += o.dp, pp += o.pp, ep += o.ep;
    return *this;
  }
};

struct StageCommunication {
  int64_t stage = 0;
  AxisBytes perMicrobatch; // a step (or a chunk's forward and backward) and its sends, per microbatch
  AxisBytes perIteration;  // once: gradient sync, parameter gathers, the runtime's sums
  int64_t microbatches = 0; // per iteration and dp rank where the program fixes it (pp), else 0
  AxisBytes total(int64_t m) const {
    AxisBytes t = perIteration;
    t.tp += m * perMicrobatch.tp, t.dp += m * perMicrobatch.dp, t.pp += m * perMicrobatch.pp;
    t.ep += m * perMicrobatch.ep;
    return t;
  }
};

/// One entry per pipeline stage, from the module after the whole pipeline.
llvm::SmallVector<StageCommunication> communicationPlan(mlir::ModuleOp module, const ParallelPlan &plan);

/// "sent per iteration ..." lines, one per stage, each starting with `prefix`.
void printCommunication(llvm::ArrayRef<StageCommunication> stages, const ParallelPlan &plan, llvm::StringRef prefix,
                        llvm::raw_ostream &os);
/// The same as a JSON object.
std::string communicationJson(llvm::ArrayRef<StageCommunication> stages, const ParallelPlan &plan);

} // namespace megac
