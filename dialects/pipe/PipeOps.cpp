// Verifiers of the `pipe` ops. The schedule op runs the schedule verifier of
// pipe/schedule/Schedule.h and points notes at the steps its message is about.
#include "pipe/PipeOps.h"
#include "pipe/ScheduleIR.h"

using namespace mlir;
using namespace megac::pipe;

LogicalResult RankOp::verify() {
  // grad_sync and optimizer_step close the rank's iteration: once each, last, in that order.
  Block *body = getBody().empty() ? nullptr : &getBody().front();
  size_t syncs = 0, steps = 0;
  if (body)
    for (Operation &op : *body)
      syncs += isa<GradSyncOp>(op), steps += isa<OptimizerStepOp>(op);
  bool ordered = body && body->getOperations().size() >= 2 && isa<OptimizerStepOp>(body->back()) &&
                 isa<GradSyncOp>(*std::prev(body->end(), 2));
  if (syncs != 1 || steps != 1 || !ordered)
    return emitOpError("must end with pipe.grad_sync then pipe.optimizer_step, each once: the "
                       "gradients are synchronised after the rank's last backward, then the "
                       "optimizer updates the parameters");
  return success();
}

LogicalResult ScheduleOp::verifyRegions() {
  llvm::Expected<megac::pipeline::Schedule> schedule = scheduleFromOp(*this);
  if (!schedule)
    return emitOpError(llvm::toString(schedule.takeError()));
  llvm::Error error = megac::pipeline::verifySchedule(*schedule);
  if (!error)
    return success();
  InFlightDiagnostic diag = emitError();
  llvm::handleAllErrors(
      std::move(error),
      [&](const megac::pipeline::ScheduleError &bad) {
        diag << bad.getMessage();
        for (const auto &site : bad.getSites())
          if (Operation *op = findScheduleStep(*this, site.rank, site.step))
            diag.attachNote(op->getLoc())
                << "rank " << site.rank << (site.step < 0 ? "" : " step " + std::to_string(site.step));
      },
      [&](const llvm::ErrorInfoBase &other) { diag << other.message(); });
  return diag;
}

#define GET_OP_CLASSES
#include "pipe/PipeOps.cpp.inc"
