// Stashed activations: what each schedule kind promises, and what a list really holds.
#include "pipe/schedule/Schedule.h"

#include <algorithm>

namespace megac::pipeline {

int64_t stashBound(const Schedule &s, int rank) {
  int64_t P = s.stages, V = s.virtualStages, m = s.microbatches, C = P * V;
  switch (s.kind) {
  case ScheduleKind::GPipe:
    return V * m;
  case ScheduleKind::OneFOneB: {
    if (V == 1)
      return std::min<int64_t>(P - rank, m);
    // Each chunk c, run as its own 1F1B stage among C, holds at most min(C - c, m).
    int64_t bound = 0;
    for (int64_t c = rank; c < C; c += P)
      bound += std::min(C - c, m);
    return bound;
  }
  case ScheduleKind::Interleaved:
    // Megatron's warmup forwards plus the one in flight in the steady state.
    return std::min(V * m, (P - rank - 1) * 2 + (V - 1) * P + 1);
  }
  return 0;
}

std::vector<int64_t> peakStash(const Schedule &s) {
  int64_t chunks = int64_t(s.stages) * s.virtualStages, m = s.microbatches;
  std::vector<int64_t> peaks;
  for (const std::vector<Action> &list : s.ranks) {
    // Out-of-range pairs (the verifier reports them) are not counted.
    std::vector<char> stashed(std::max<int64_t>(chunks * m, 0), 0);
    int64_t current = 0, peak = 0;
    for (const Action &a : list) {
      if (a.chunk < 0 || a.chunk >= chunks || a.microbatch < 0 || a.microbatch >= m)
        continue;
      char &slot = stashed[a.chunk * m + a.microbatch];
      if (a.kind == ActionKind::Forward && !slot)
        slot = 1, peak = std::max(peak, ++current);
      else if (a.kind == ActionKind::Backward && slot)
        slot = 0, --current;
    }
    peaks.push_back(peak);
  }
  return peaks;
}

} // namespace megac::pipeline
