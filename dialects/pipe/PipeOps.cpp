// Verifiers of the `pipe` ops. The schedule op runs the schedule verifier of
// pipe/schedule/Schedule.h and points notes at the steps its message is about.
#include "pipe/PipeOps.h"
#include "pipe/ScheduleIR.h"

using namespace mlir;
using namespace megac::pipe;

namespace {

bool closesTheIteration(Operation &op) { return isa<GradSyncOp, TiedSumOp, OptimizerStepOp, ParamGatherOp>(op); }

/// The rank's closing actions, in order (its ops after the last compute or message op).
SmallVector<Operation *> closingOps(RankOp rank) {
  SmallVector<Operation *> closing;
  if (!rank.getBody().empty())
    for (Operation &op : rank.getBody().front())
      if (closesTheIteration(op))
        closing.push_back(&op);
  return closing;
}

/// The tied_sum among a rank's closing ops (at most one: RankOp's verifier), or null.
TiedSumOp tiedSumOf(RankOp rank) {
  for (Operation *op : closingOps(rank))
    if (auto tied = dyn_cast<TiedSumOp>(op))
      return tied;
  return nullptr;
}

} // namespace

LogicalResult RankOp::verify() {
  constexpr const char *kOrder =
      "; a rank's iteration ends with [pipe.tied_sum grads] pipe.grad_sync [pipe.tied_sum] pipe.optimizer_step "
      "[pipe.param_gather]";
  // The closing actions run once, after all rounds of the schedule: nothing else may follow one.
  Block *body = getBody().empty() ? nullptr : &getBody().front();
  bool closing = false;
  if (body)
    for (Operation &op : *body) {
      if (closing && !closesTheIteration(op))
        return op.emitOpError("comes after the rank's closing actions, which run once after every round of the "
                              "schedule")
               << kOrder;
      closing |= closesTheIteration(op);
    }
  SmallVector<Operation *> ops = closingOps(*this);
  ArrayRef<Operation *> rest = ops;
  if (!rest.empty() && isa<ParamGatherOp>(rest.back()))
    rest = rest.drop_back();
  if (rest.empty() || !isa<OptimizerStepOp>(rest.back()))
    return emitOpError("has no pipe.optimizer_step where its iteration ends") << kOrder;
  rest = rest.drop_back();
  auto tiedOn = [](Operation *op, std::optional<TiedGrads> which = std::nullopt) {
    auto tied = dyn_cast<TiedSumOp>(op);
    return tied && (!which || tied.getGrads() == *which);
  };
  const bool tiedBefore = rest.size() == 2 && tiedOn(rest[0]) && isa<GradSyncOp>(rest[1]);
  const bool tiedAfter = rest.size() == 2 && isa<GradSyncOp>(rest[0]) && tiedOn(rest[1]);
  const bool syncAlone = rest.size() == 1 && isa<GradSyncOp>(rest[0]);
  if (tiedBefore && !tiedOn(rest[0], TiedGrads::Whole))
    return rest[0]->emitOpError("sums gradient shards before pipe.grad_sync, which is what finishes them: put it "
                                "after the sync, or sum the whole gradients (grads)");
  if (!tiedBefore && !tiedAfter && !syncAlone)
    return emitOpError("must close its iteration with one pipe.grad_sync, at most one pipe.tied_sum, then "
                       "pipe.optimizer_step")
           << kOrder;
  return success();
}

LogicalResult ScheduleOp::verifyRegions() {
  // The closing actions talk across ranks: a tied weight's copies sum in one collective and the
  // distributed optimizer covers every stage or none, so the ranks must agree on them.
  if (!getBody().empty()) {
    std::optional<std::pair<TiedGrads, bool>> tied; // (which gradients, before grad_sync)
    std::optional<bool> gathers;
    for (RankOp rank : getBody().front().getOps<RankOp>()) {
      if (TiedSumOp sum = tiedSumOf(rank)) {
        if (getStages() == 1)
          return sum.emitOpError("in a one-stage schedule: no other pipeline rank holds a copy of a weight");
        const bool before = !isa_and_nonnull<GradSyncOp>(sum->getPrevNode());
        if (tied && *tied != std::pair{sum.getGrads(), before})
          return sum.emitOpError("differs from another rank's pipe.tied_sum: the copies of a tied weight sum the "
                                 "same gradients at the same point of the iteration");
        tied = std::pair{sum.getGrads(), before};
      }
      const bool gathered = isa_and_nonnull<ParamGatherOp>(closingOps(rank).back());
      if (gathers && *gathers != gathered)
        return rank.emitOpError() << (gathered ? "gathers" : "does not gather")
                                  << " its parameters after the step and another rank "
                                  << (gathered ? "does not" : "does")
                                  << ": the distributed optimizer covers every stage or none";
      gathers = gathered;
    }
  }
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
