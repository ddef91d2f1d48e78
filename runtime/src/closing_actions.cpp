#include "megart/closing_actions.h"

#include "megart/error.h"

#include <vector>

namespace megart {

int64_t schedule_steps(const PipeOp *ops, int64_t num_ops) {
  int64_t i = 0;
  while (i < num_ops && !is_closing(ops[i].kind))
    ++i;
  return i;
}

void validate_closing_ops(const PipeOp *ops, int64_t num_ops, const std::string &who) {
  auto bad = [&](const std::string &problem) {
    throw Error("compiled program: " + who + "'s table " + problem +
                "; an iteration ends with [TiedSum] GradSync [TiedSum | TiedSumShards] OptimizerStep "
                "[ParamGather] (regenerate with megac compile)");
  };
  std::vector<PipeOpKind> closing;
  for (int64_t i = schedule_steps(ops, num_ops); i < num_ops; ++i) {
    const int32_t k = static_cast<int32_t>(ops[i].kind);
    if (!is_closing(ops[i].kind) || k > static_cast<int32_t>(PipeOpKind::ParamGather))
      bad("has op kind " + std::to_string(k) + " at step " + std::to_string(i) + ", after its first closing op");
    closing.push_back(ops[i].kind);
  }
  size_t at = 0;
  auto take = [&](PipeOpKind k) { return at < closing.size() && closing[at] == k ? (++at, true) : false; };
  const bool tied_before = take(PipeOpKind::TiedSum);
  if (!take(PipeOpKind::GradSync))
    bad(closing.empty() ? "has no closing ops"
                        : at < closing.size() && closing[at] == PipeOpKind::TiedSumShards
                              ? "sums tied gradient shards before GradSync, which finishes them"
                              : "has no GradSync where it should");
  if (!tied_before && !take(PipeOpKind::TiedSum))
    take(PipeOpKind::TiedSumShards);
  if (!take(PipeOpKind::OptimizerStep))
    bad("has no OptimizerStep where it should");
  take(PipeOpKind::ParamGather);
  if (at != closing.size())
    bad("has " + std::to_string(closing.size() - at) + " closing ops past where the iteration ends");
}

void run_closing_ops(const PipeOp *ops, int64_t num_ops, const ClosingActions &actions) {
  bool stepped = false;
  for (int64_t i = schedule_steps(ops, num_ops); i < num_ops; ++i)
    switch (ops[i].kind) {
    case PipeOpKind::GradSync:
      actions.grad_sync();
      break;
    case PipeOpKind::TiedSum:
    case PipeOpKind::TiedSumShards:
      actions.tied_sum(ops[i].kind == PipeOpKind::TiedSumShards);
      break;
    case PipeOpKind::OptimizerStep:
      stepped = actions.optimizer_step();
      break;
    case PipeOpKind::ParamGather:
      if (stepped) // a skipped step changed no parameter
        actions.param_gather();
      break;
    default: // validate_closing_ops admits no other
      break;
    }
}

TiedSumPlace tied_sum_place(const PipeOp *ops, int64_t num_ops) {
  TiedSumPlace place;
  bool synced = false;
  for (int64_t i = schedule_steps(ops, num_ops); i < num_ops; ++i) {
    synced |= ops[i].kind == PipeOpKind::GradSync;
    if (ops[i].kind == PipeOpKind::TiedSum || ops[i].kind == PipeOpKind::TiedSumShards)
      place = {static_cast<int32_t>(ops[i].kind), !synced};
  }
  return place;
}

bool gathers_params(const PipeOp *ops, int64_t num_ops) {
  return num_ops > 0 && ops[num_ops - 1].kind == PipeOpKind::ParamGather;
}

} // namespace megart
