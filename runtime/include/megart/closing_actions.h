// The actions that close a training iteration, as a rank's compiled table lists them after its
// schedule's steps (PipeOpKind GradSync ... ParamGather): the compiler decides which run and in
// what order; the training loop says how each is done.
#pragma once

#include "megart/program.h"

#include <cstdint>
#include <functional>
#include <string>

namespace megart {

struct ClosingActions {
  std::function<void()> grad_sync;
  std::function<void(bool shards)> tied_sum;
  std::function<bool()> optimizer_step; // false: skipped (the gradients are not finite)
  std::function<void()> param_gather;
};

// The schedule's steps of a table: the ops before its first closing one.
int64_t schedule_steps(const PipeOp *ops, int64_t num_ops);

// Throws megart::Error ("compiled program: <who>'s table ...; regenerate with megac compile")
// unless the ops after the schedule's steps are closing ops in the order [TiedSum] GradSync
// [TiedSum | TiedSumShards] OptimizerStep [ParamGather], TiedSumShards never before GradSync.
void validate_closing_ops(const PipeOp *ops, int64_t num_ops, const std::string &who);

// The closing ops of a table, in order; ParamGather only after a step taken.
void run_closing_ops(const PipeOp *ops, int64_t num_ops, const ClosingActions &actions);

// The tied sum among a table's closing ops (TiedSum or TiedSumShards) and whether it comes
// before GradSync; kind -1 when there is none.
struct TiedSumPlace {
  int32_t kind = -1;
  bool before_sync = false;
};
TiedSumPlace tied_sum_place(const PipeOp *ops, int64_t num_ops);

// Whether a table's closing ops gather the parameters after the step.
bool gathers_params(const PipeOp *ops, int64_t num_ops);

} // namespace megart
