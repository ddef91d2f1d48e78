// megac-schedule-check: checks the schedule builder against pipeline theory over a grid of
// plans: every built schedule verifies; the simulated bubble (tf = 1, tb = 2) is exactly
// (P - 1) / m for GPipe and 1F1B and (P - 1) / (V m) for interleaved; activation stash peaks
// meet the bounds where theory says they are tight, and GPipe stashes more than 1F1B.
// Prints "ok N cases", or each failing case and exits 1.
#include "pipe/schedule/Schedule.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>

using namespace megac::pipeline;

namespace {

struct Checker {
  int cases = 0, failures = 0;

  void failCase(const llvm::Twine &what) {
    ++failures;
    llvm::errs() << "FAIL: " << what << "\n";
  }

  // Builds and verifies; returns nothing if either fails.
  std::optional<Schedule> build(ScheduleKind kind, int P, int V, int m) {
    ++cases;
    std::string name = (scheduleKindName(kind) + " P=" + llvm::Twine(P) + " V=" + llvm::Twine(V) +
                        " m=" + llvm::Twine(m)).str();
    llvm::Expected<Schedule> s = buildSchedule(kind, P, V, m);
    if (!s) {
      failCase(name + ": " + llvm::toString(s.takeError()));
      return std::nullopt;
    }
    if (llvm::Error e = verifySchedule(*s)) {
      failCase(name + ": " + llvm::toString(std::move(e)));
      return std::nullopt;
    }
    return std::move(*s);
  }

  void expectBubble(const Schedule &s, double expected) {
    ++cases;
    double bubble = simulate(s, 1.0, 2.0).bubbleFraction;
    if (!(std::fabs(bubble - expected) <= 1e-12))
      failCase(llvm::formatv("{0} P={1} V={2} m={3}: bubble {4:e17}, expected {5:e17}",
                             scheduleKindName(s.kind), s.stages, s.virtualStages, s.microbatches,
                             bubble, expected)
                   .str());
  }

  // peakStash equals stashBound on every rank.
  void expectTightStash(const Schedule &s) {
    ++cases;
    std::vector<int64_t> peaks = peakStash(s);
    for (int r = 0; r < s.stages; ++r)
      if (peaks[r] != stashBound(s, r))
        failCase(llvm::formatv("{0} P={1} V={2} m={3}: rank {4} stash peak {5}, bound {6}",
                               scheduleKindName(s.kind), s.stages, s.virtualStages,
                               s.microbatches, r, peaks[r], stashBound(s, r))
                     .str());
  }
};

} // namespace

int main() {
  Checker check;
  for (int P : {2, 3, 4, 8}) {
    // GPipe and 1F1B, V = 1: bubble (P - 1) / m for any m; 1F1B stashes min(P - r, m).
    for (int m : {1, P - 1, P, P + 1, 2 * P, 4 * P}) {
      std::optional<Schedule> gpipe = check.build(ScheduleKind::GPipe, P, 1, m);
      std::optional<Schedule> oneF = check.build(ScheduleKind::OneFOneB, P, 1, m);
      if (!gpipe || !oneF)
        continue;
      check.expectBubble(*gpipe, double(P - 1) / m);
      check.expectBubble(*oneF, double(P - 1) / m);
      check.expectTightStash(*gpipe);
      check.expectTightStash(*oneF);
      ++check.cases;
      if (m > P && peakStash(*gpipe)[0] <= peakStash(*oneF)[0])
        check.failCase(llvm::formatv("P={0} m={1}: GPipe stashes {2} on rank 0, not more than "
                                     "1F1B's {3}",
                                     P, m, peakStash(*gpipe)[0], peakStash(*oneF)[0])
                           .str());
    }
    // V > 1: interleaved (m a multiple of P) has bubble (P - 1) / (V m); GPipe and plain 1F1B
    // over the P V chunks must verify; plain 1F1B stashes exactly its bound.
    for (int V : {2, 3, 4})
      for (int m : {P, 2 * P, 4 * P}) {
        if (std::optional<Schedule> s = check.build(ScheduleKind::Interleaved, P, V, m)) {
          check.expectBubble(*s, double(P - 1) / (double(V) * m));
          check.expectTightStash(*s);
        }
        if (std::optional<Schedule> s = check.build(ScheduleKind::OneFOneB, P, V, m))
          check.expectTightStash(*s);
        if (std::optional<Schedule> s = check.build(ScheduleKind::GPipe, P, V, m))
          check.expectTightStash(*s);
      }
  }
  if (check.failures) {
    llvm::errs() << check.failures << " of " << check.cases << " cases failed\n";
    return 1;
  }
  llvm::outs() << "ok " << check.cases << " cases\n";
  return 0;
}
