// The names schedules and actions go by in flags, messages and IR.
#include "pipe/schedule/Schedule.h"

#include "llvm/ADT/StringSwitch.h"

namespace megac::pipeline {

std::optional<ScheduleKind> parseScheduleKind(llvm::StringRef name) {
  return llvm::StringSwitch<std::optional<ScheduleKind>>(name)
      .Case("gpipe", ScheduleKind::GPipe)
      .Case("1f1b", ScheduleKind::OneFOneB)
      .Case("interleaved", ScheduleKind::Interleaved)
      .Default(std::nullopt);
}

llvm::StringRef scheduleKindName(ScheduleKind kind) {
  switch (kind) {
  case ScheduleKind::GPipe:
    return "gpipe";
  case ScheduleKind::OneFOneB:
    return "1f1b";
  case ScheduleKind::Interleaved:
    return "interleaved";
  }
  llvm_unreachable("unknown schedule kind");
}

llvm::StringRef actionKindName(ActionKind kind) {
  switch (kind) {
  case ActionKind::Forward:
    return "Forward";
  case ActionKind::Backward:
    return "Backward";
  case ActionKind::SendActivation:
    return "SendActivation";
  case ActionKind::RecvActivation:
    return "RecvActivation";
  case ActionKind::SendGrad:
    return "SendGrad";
  case ActionKind::RecvGrad:
    return "RecvGrad";
  }
  llvm_unreachable("unknown action kind");
}

llvm::StringRef closingKindName(ClosingKind kind) {
  switch (kind) {
  case ClosingKind::GradSync:
    return "GradSync";
  case ClosingKind::TiedSum:
    return "TiedSum";
  case ClosingKind::TiedSumShards:
    return "TiedSumShards";
  case ClosingKind::OptimizerStep:
    return "OptimizerStep";
  case ClosingKind::ParamGather:
    return "ParamGather";
  }
  llvm_unreachable("unknown closing kind");
}

} // namespace megac::pipeline
