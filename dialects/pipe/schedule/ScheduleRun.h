// Runs a schedule's lists in order, the way ranks execute them: sends are buffered, a receive
// blocks until the matching send (the k-th receive at dst from src of a payload takes the k-th
// such send from src to dst) has happened. Shared by the simulator and the deadlock check, with
// the message vocabulary the schedule builder uses too.
#pragma once

#include "pipe/schedule/Schedule.h"

#include <cstddef>
#include <functional>

namespace megac::pipeline::detail {

inline bool isSend(ActionKind k) { return k == ActionKind::SendActivation || k == ActionKind::SendGrad; }
inline bool isRecv(ActionKind k) { return k == ActionKind::RecvActivation || k == ActionKind::RecvGrad; }
inline bool isActivation(ActionKind k) {
  return k == ActionKind::SendActivation || k == ActionKind::RecvActivation;
}

// Messages between two ranks travel on one channel per (sender, receiver, payload): activations
// or gradients. Channels are numbered 0 .. channelCount(P) - 1.
inline size_t channelIndex(int P, int src, int dst, bool activation) {
  return (static_cast<size_t>(src) * P + dst) * 2 + (activation ? 0 : 1);
}
inline size_t channelCount(int P) { return static_cast<size_t>(P) * P * 2; }

struct Run {
  std::vector<SimEvent> events;   // rank by rank, in list order, for the steps that ran
  std::vector<size_t> stoppedAt;  // per rank: the first step that did not run (size if all did)
  std::vector<double> finish;     // per rank: when its last step that ran ended
  bool completed = true;          // false: some rank is stuck at a receive
};

Run runSchedule(const Schedule &s, const ActionCosts &costs);

} // namespace megac::pipeline::detail
