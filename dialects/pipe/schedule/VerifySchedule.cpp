// The schedule verifier: a schedule that passes runs to the end on every rank, with every
// message received by the op that expects it and activation memory within what its kind
// promises. Each check assumes the ones before it passed.
#include "ScheduleRun.h"

#include "llvm/Support/raw_ostream.h"

namespace megac::pipeline {

char ScheduleError::ID = 0;

void ScheduleError::log(llvm::raw_ostream &os) const { os << message; }

namespace {

using namespace detail;
using Site = ScheduleError::Site;

// The chunk at the other end of a message: activations flow to c + 1, gradients to c - 1.
int neighbourChunk(const Action &a) {
  bool towardsNext = a.kind == ActionKind::SendActivation || a.kind == ActionKind::RecvGrad;
  return towardsNext ? a.chunk + 1 : a.chunk - 1;
}

std::string ordinal(size_t n) {
  const char *suffix = "th";
  if (n % 100 < 11 || n % 100 > 13)
    suffix = n % 10 == 1 ? "st" : n % 10 == 2 ? "nd" : n % 10 == 3 ? "rd" : "th";
  return std::to_string(n) + suffix;
}

std::string describe(const Action &a) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << actionKindName(a.kind) << " chunk " << a.chunk << " microbatch " << a.microbatch;
  if (isSend(a.kind))
    os << " to rank " << a.peer;
  else if (isRecv(a.kind))
    os << " from rank " << a.peer;
  return text;
}

// Pairs this large are not a real plan; refusing them keeps the checks' tables small.
constexpr int64_t kMaxPairs = int64_t(1) << 24;

class Verifier {
public:
  explicit Verifier(const Schedule &s)
      : s(s), P(s.stages), V(s.virtualStages), m(s.microbatches), C(int64_t(P) * V) {}

  llvm::Error run() {
    for (auto check : {&Verifier::checkShape, &Verifier::checkRanges, &Verifier::checkMatching,
                       &Verifier::checkLocalOrder, &Verifier::checkDeadlock, &Verifier::checkStash})
      if (llvm::Error error = (this->*check)())
        return error;
    return llvm::Error::success();
  }

private:
  llvm::Error fail(const std::string &message, std::vector<Site> sites = {}) {
    return llvm::make_error<ScheduleError>(message, std::move(sites));
  }
  // "rank 1 step 3 (RecvActivation chunk 1 microbatch 0 from rank 0)"
  std::string at(int r, int step) {
    return "rank " + std::to_string(r) + " step " + std::to_string(step) + " (" +
           describe(s.ranks[r][step]) + ")";
  }
  // Step of (kind, chunk, microbatch) on the chunk's rank, -1 if absent. Valid after checkRanges.
  int &stepOf(ActionKind k, int chunk, int mb) {
    return steps[(static_cast<size_t>(k) * C + chunk) * m + mb];
  }

  llvm::Error checkShape() {
    if (P < 1 || V < 1 || m < 1)
      return fail("pipeline schedule: stages (" + std::to_string(P) + "), virtual_stages (" +
                  std::to_string(V) + ") and microbatches (" + std::to_string(m) +
                  ") must all be at least 1");
    if (C * m > kMaxPairs)
      return fail("pipeline schedule: " + std::to_string(C) + " chunks x " + std::to_string(m) +
                  " microbatches is more than the verifier's limit of " + std::to_string(kMaxPairs) +
                  " pairs");
    if (s.ranks.size() != static_cast<size_t>(P))
      return fail("pipeline schedule: has " + std::to_string(s.ranks.size()) +
                  " rank lists, but stages (P) is " + std::to_string(P) + ": give one per rank");
    steps.assign(6 * C * m, -1);
    return llvm::Error::success();
  }

  // 1. Every action names an existing chunk of its rank, an existing microbatch and the right
  //    peer, appears once, and each (chunk, microbatch) of the rank has a forward and a backward.
  llvm::Error checkRanges() {
    for (int r = 0; r < P; ++r) {
      for (int i = 0, n = s.ranks[r].size(); i < n; ++i) {
        const Action &a = s.ranks[r][i];
        if (a.chunk < 0 || a.chunk >= C)
          return fail("pipeline schedule: " + at(r, i) + ": chunk " + std::to_string(a.chunk) +
                          " does not exist (P x V = " + std::to_string(C) + " chunks: 0.." +
                          std::to_string(C - 1) + ")",
                      {{r, i}});
        if (a.chunk % P != r)
          return fail("pipeline schedule: " + at(r, i) + ": chunk " + std::to_string(a.chunk) +
                          " runs on rank " + std::to_string(a.chunk % P) + " (chunk c runs on rank c % P)",
                      {{r, i}});
        if (a.microbatch < 0 || a.microbatch >= m)
          return fail("pipeline schedule: " + at(r, i) + ": microbatch " +
                          std::to_string(a.microbatch) + " does not exist (m = " + std::to_string(m) +
                          ": 0.." + std::to_string(m - 1) + ")",
                      {{r, i}});
        if (isSend(a.kind) || isRecv(a.kind)) {
          int other = neighbourChunk(a);
          if (other < 0 || other >= C)
            return fail("pipeline schedule: " + at(r, i) + ": chunk " + std::to_string(a.chunk) +
                            " is the " + (other < 0 ? "first" : "last") +
                            " chunk, so there is no chunk " + std::to_string(other) +
                            " to exchange it with",
                        {{r, i}});
          if (other % P == r)
            return fail("pipeline schedule: " + at(r, i) + ": chunks " + std::to_string(a.chunk) +
                            " and " + std::to_string(other) + " are both on rank " +
                            std::to_string(r) + ", so no message is needed",
                        {{r, i}});
          if (a.peer != other % P)
            return fail("pipeline schedule: " + at(r, i) + ": chunk " + std::to_string(other) +
                            " runs on rank " + std::to_string(other % P) + ", so the peer must be rank " +
                            std::to_string(other % P),
                        {{r, i}});
        }
        int &seen = stepOf(a.kind, a.chunk, a.microbatch);
        if (seen >= 0)
          return fail("pipeline schedule: " + at(r, i) + " repeats step " + std::to_string(seen),
                      {{r, i}, {r, seen}});
        seen = i;
      }
      for (int c = r; c < C; c += P)
        for (int mb = 0; mb < m; ++mb)
          for (ActionKind k : {ActionKind::Forward, ActionKind::Backward})
            if (stepOf(k, c, mb) < 0)
              return fail("pipeline schedule: rank " + std::to_string(r) + " has no " +
                              actionKindName(k).str() + " for chunk " + std::to_string(c) +
                              " microbatch " + std::to_string(mb) + " (every chunk of a rank runs "
                              "forward and backward once per microbatch)",
                          {{r, -1}});
    }
    return llvm::Error::success();
  }

  // 2. Between two ranks, the k-th send of a payload is taken by the k-th receive of it, so both
  //    sides must list the same (chunk, microbatch) messages in the same order.
  llvm::Error checkMatching() {
    auto channel = [&](int src, int dst, ActionKind k) { return channelIndex(P, src, dst, isActivation(k)); };
    std::vector<std::vector<int>> sends(channelCount(P)), recvs(channelCount(P));
    for (int r = 0; r < P; ++r)
      for (int i = 0, n = s.ranks[r].size(); i < n; ++i) {
        const Action &a = s.ranks[r][i];
        if (isSend(a.kind))
          sends[channel(r, a.peer, a.kind)].push_back(i);
        else if (isRecv(a.kind))
          recvs[channel(a.peer, r, a.kind)].push_back(i);
      }
    for (int src = 0; src < P; ++src)
      for (int dst = 0; dst < P; ++dst)
        for (ActionKind sendKind : {ActionKind::SendActivation, ActionKind::SendGrad}) {
          ActionKind recvKind = sendKind == ActionKind::SendActivation ? ActionKind::RecvActivation
                                                                         : ActionKind::RecvGrad;
          const std::vector<int> &out = sends[channel(src, dst, sendKind)];
          const std::vector<int> &in = recvs[channel(src, dst, sendKind)];
          std::string sendName = actionKindName(sendKind).str(), recvName = actionKindName(recvKind).str();
          for (size_t k = 0; k < std::min(out.size(), in.size()); ++k) {
            const Action &sent = s.ranks[src][out[k]], &got = s.ranks[dst][in[k]];
            if (got.chunk == neighbourChunk(sent) && got.microbatch == sent.microbatch)
              continue;
            return fail("pipeline schedule: " + at(dst, in[k]) + " does not match rank " +
                            std::to_string(src) + "'s " + ordinal(k + 1) + " " + sendName +
                            " to rank " + std::to_string(dst) + " (chunk " + std::to_string(sent.chunk) +
                            " microbatch " + std::to_string(sent.microbatch) + " at step " +
                            std::to_string(out[k]) +
                            "): messages between two ranks are matched in order",
                        {{dst, in[k]}, {src, out[k]}});
          }
          if (out.size() > in.size())
            return fail("pipeline schedule: " + at(src, out[in.size()]) +
                            " is never received: rank " + std::to_string(src) + " sends " +
                            std::to_string(out.size()) + " " + sendName + " to rank " +
                            std::to_string(dst) + ", which has only " + std::to_string(in.size()) +
                            " " + recvName + " from rank " + std::to_string(src),
                        {{src, out[in.size()]}});
          if (in.size() > out.size())
            return fail("pipeline schedule: " + at(dst, in[out.size()]) +
                            " has no matching send: rank " + std::to_string(src) + " sends only " +
                            std::to_string(out.size()) + " " + sendName + " to rank " +
                            std::to_string(dst),
                        {{dst, in[out.size()]}});
        }
    return llvm::Error::success();
  }

  // `i` must come after `need` (at step j, -1 if absent) on rank r.
  llvm::Error requireBefore(int r, int i, ActionKind k, int chunk, int mb, const std::string &why) {
    int j = stepOf(k, chunk, mb);
    Action need{k, chunk, mb, -1};
    if (isRecv(k))
      need.peer = neighbourChunk(need) % P;
    if (j < 0)
      return fail("pipeline schedule: " + at(r, i) + " has no " + describe(need) + " before it (" +
                      why + ")",
                  {{r, i}});
    if (j > i)
      return fail("pipeline schedule: " + at(r, i) + " comes before " + describe(need) +
                      " at step " + std::to_string(j) + " (" + why + ")",
                  {{r, i}, {r, j}});
    return llvm::Error::success();
  }

  // 2 and 4. On its own rank, each op comes after what it needs: a forward after its input
  //    (received, or computed by the previous chunk on the same rank), a backward after its
  //    forward and its output gradient, a send after the op that produces what it sends.
  llvm::Error checkLocalOrder() {
    for (int r = 0; r < P; ++r)
      for (int i = 0, n = s.ranks[r].size(); i < n; ++i)
        if (llvm::Error error = checkInputsOf(r, i))
          return error;
    return llvm::Error::success();
  }

  llvm::Error checkInputsOf(int r, int i) {
    const Action &a = s.ranks[r][i];
    int c = a.chunk, mb = a.microbatch;
    switch (a.kind) {
    case ActionKind::Forward:
      if (c == 0)
        return llvm::Error::success();
      if ((c - 1) % P == r)
        return requireBefore(r, i, ActionKind::Forward, c - 1, mb, "its input is that output");
      return requireBefore(r, i, ActionKind::RecvActivation, c, mb, "its input");
    case ActionKind::Backward:
      if (llvm::Error error =
              requireBefore(r, i, ActionKind::Forward, c, mb, "a backward needs its forward"))
        return error;
      if (c == C - 1)
        return llvm::Error::success();
      if ((c + 1) % P == r)
        return requireBefore(r, i, ActionKind::Backward, c + 1, mb,
                             "its output gradient comes from there");
      return requireBefore(r, i, ActionKind::RecvGrad, c, mb, "its output gradient");
    case ActionKind::SendActivation:
      return requireBefore(r, i, ActionKind::Forward, c, mb, "which computes what it sends");
    case ActionKind::SendGrad:
      return requireBefore(r, i, ActionKind::Backward, c, mb, "which computes what it sends");
    case ActionKind::RecvActivation:
    case ActionKind::RecvGrad:
      return llvm::Error::success();
    }
    return llvm::Error::success();
  }

  // 3. Run the lists with buffered sends and blocking receives; whoever cannot finish waits on
  //    a message that is only sent after something that waits on it.
  llvm::Error checkDeadlock() {
    detail::Run run = detail::runSchedule(s, {[](const Action &) { return 1.0; }, [](const Action &) { return 0.0; }});
    if (run.completed)
      return llvm::Error::success();
    std::string message = "pipeline schedule deadlocks: ";
    std::vector<Site> sites;
    for (int r = 0; r < P; ++r) {
      int step = run.stoppedAt[r];
      if (step == static_cast<int>(s.ranks[r].size()))
        continue;
      message += (sites.empty() ? "rank " : "; rank ") + std::to_string(r) + " waits at step " +
                 std::to_string(step) + " (" + describe(s.ranks[r][step]) + ")";
      sites.push_back({r, step});
    }
    return fail(message, std::move(sites));
  }

  // 5. Stashed activations stay within what the schedule's kind promises.
  llvm::Error checkStash() {
    std::vector<int64_t> peaks = peakStash(s);
    for (int r = 0; r < P; ++r) {
      int64_t bound = stashBound(s, r);
      if (peaks[r] <= bound)
        continue;
      int64_t current = 0;
      int over = -1;
      for (int i = 0, n = s.ranks[r].size(); i < n && over < 0; ++i) {
        ActionKind k = s.ranks[r][i].kind;
        current += k == ActionKind::Forward ? 1 : k == ActionKind::Backward ? -1 : 0;
        if (current > bound)
          over = i;
      }
      return fail("pipeline schedule: rank " + std::to_string(r) + " stashes up to " +
                      std::to_string(peaks[r]) +
                      " (chunk, microbatch) activations (forward done, backward not yet; over "
                      "the bound from step " + std::to_string(over) + "), more than the " +
                      std::to_string(bound) + " that " + scheduleKindName(s.kind).str() +
                      " promises for this rank: " + boundFormula(),
                  {{r, over}});
    }
    return llvm::Error::success();
  }

  std::string boundFormula() {
    switch (s.kind) {
    case ScheduleKind::GPipe:
      return "V x m";
    case ScheduleKind::OneFOneB:
      return V == 1 ? "min(P - rank, m)" : "the sum over the rank's chunks c of min(P x V - c, m)";
    case ScheduleKind::Interleaved:
      return "min(V x m, 2 x (P - rank - 1) + (V - 1) x P + 1)";
    }
    return "";
  }

  const Schedule &s;
  int P, V, m;
  int64_t C;
  std::vector<int> steps;
};

} // namespace

llvm::Error verifySchedule(const Schedule &s) { return Verifier(s).run(); }

} // namespace megac::pipeline
