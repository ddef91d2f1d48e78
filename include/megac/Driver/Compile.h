// The compiler as a library: a spec and a plan in, the training IR out (every pass megac compile
// runs), and that IR's iteration simulated on a cluster. megac compile, simulate and plan call
// these; so can tests.
#pragma once

#include "megac/Frontend/ModelSpec.h"
#include "megac/Plan/ParallelPlan.h"
#include "megac/Sim/Simulate.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/Error.h"

#include <functional>

namespace megac {

struct CompileOptions {
  int64_t microBatch = 1;
  /// Verify the IR after every pass (megac compile), or only once after the last.
  bool verifyEachPass = true;
  /// Without verifyEachPass, whether to verify the IR once after the last pass. megac plan's
  /// candidates skip it: they are only simulated (verifying a large pipeline's schedule took a
  /// third of a candidate's compile), and the plan it prints is compiled, verified, by megac
  /// compile.
  bool verifyResult = true;
  /// Called with the frontend's IR before any pass runs (false: stop, having said why), and
  /// with the pass manager before it runs (megac compile --dump-ir); either may be empty.
  std::function<bool(mlir::ModuleOp)> onFrontend;
  std::function<void(mlir::PassManager &)> instrument;
};

/// megac compile's checks of `plan` (as the flags give it) against the spec and the micro
/// batch, before any IR is built; resolves the pipeline's layout into `plan`.
llvm::Error checkPlanAgainstSpec(ParallelPlan &plan, const ModelSpec &spec, int64_t microBatch);

/// The model built for `plan` (checked by checkPlanAgainstSpec) and every pass of the training
/// pipeline run on it. Errors say why the compiler refuses the plan.
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>> compile(mlir::MLIRContext &context, const ModelSpec &spec,
                                                          const ParallelPlan &plan, const CompileOptions &options);

/// One iteration of the compiled `module` on `cluster`: its memory plan (what megac compile
/// prints) and the cost model's replay. `options` says how to cost (attention backend, 16-bit
/// gradient sums, trace); the batch, sequence and FLOPs come from the arguments.
sim::Simulation simulate(mlir::ModuleOp module, const ParallelPlan &plan, const ModelSpec &spec, int64_t microBatch,
                         int64_t globalBatch, const sim::Cluster &cluster, sim::SimulationInputs options);

} // namespace megac
