// A rank advances until it reaches a receive whose message has not been sent yet; a send wakes
// the rank waiting on that channel. Linear in the number of actions.
#include "ScheduleRun.h"

#include <algorithm>
#include <deque>

namespace megac::pipeline::detail {

Run runSchedule(const Schedule &s, const ActionCosts &costs) {
  int P = static_cast<int>(s.ranks.size());
  // Channel (src, dst, payload) holds the arrival times of the messages sent on it.
  auto channel = [&](int src, int dst, ActionKind k) { return channelIndex(P, src, dst, isActivation(k)); };
  std::vector<std::vector<double>> arrivals(channelCount(P));
  std::vector<size_t> taken(arrivals.size(), 0);
  std::vector<long> waitingOn(P, -1);
  std::vector<std::vector<SimEvent>> perRank(P);

  Run run;
  run.stoppedAt.assign(P, 0);
  run.finish.assign(P, 0.0);
  std::deque<int> ready;
  for (int r = 0; r < P; ++r)
    ready.push_back(r);
  while (!ready.empty()) {
    int r = ready.front();
    ready.pop_front();
    waitingOn[r] = -1;
    const std::vector<Action> &list = s.ranks[r];
    size_t &step = run.stoppedAt[r];
    double &now = run.finish[r];
    for (; step < list.size(); ++step) {
      const Action &a = list[step];
      bool peerOk = a.peer >= 0 && a.peer < P;
      SimEvent e{r, a.kind, a.chunk, a.microbatch, now, now};
      if (a.kind == ActionKind::Forward || a.kind == ActionKind::Backward) {
        e.end = now + costs.compute(a);
      } else if (isSend(a.kind)) {
        if (!peerOk)
          break;
        size_t ch = channel(r, a.peer, a.kind);
        arrivals[ch].push_back(now + costs.message(a));
        if (waitingOn[a.peer] == static_cast<long>(ch)) {
          waitingOn[a.peer] = -1;
          ready.push_back(a.peer);
        }
      } else if (isRecv(a.kind)) {
        size_t ch = peerOk ? channel(a.peer, r, a.kind) : 0;
        if (!peerOk || taken[ch] >= arrivals[ch].size()) {
          waitingOn[r] = peerOk ? static_cast<long>(ch) : -2;
          break;
        }
        e.end = std::max(now, arrivals[ch][taken[ch]++]);
      }
      now = e.end;
      perRank[r].push_back(e);
    }
  }
  for (int r = 0; r < P; ++r)
    run.completed = run.completed && run.stoppedAt[r] == s.ranks[r].size();
  for (std::vector<SimEvent> &events : perRank)
    run.events.insert(run.events.end(), events.begin(), events.end());
  return run;
}

} // namespace megac::pipeline::detail
