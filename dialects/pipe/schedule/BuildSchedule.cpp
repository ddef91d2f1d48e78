// The orders of GPipe, 1F1B and interleaved 1F1B (Megatron's), with their messages.
#include "pipe/schedule/Schedule.h"

#include "ScheduleRun.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/CheckedArithmetic.h"

#include <algorithm>
#include <tuple>

namespace megac::pipeline {
namespace {

struct Compute {
  bool forward;
  int chunk;
  int microbatch;
};
using ChunkMb = std::pair<int, int>;

llvm::Error fail(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), "pipeline schedule: " + message);
}

// Rejects plans no schedule of `kind` exists for, saying which flag to change.
llvm::Error checkParameters(ScheduleKind kind, int P, int V, int m) {
  if (P < 1)
    return fail("--pipeline-model-parallel-size (P) must be at least 1, got " + llvm::Twine(P) +
                "; use 1 for no pipeline parallelism");
  if (V < 1)
    return fail("--vpp (virtual stages per rank, V) must be at least 1, got " + llvm::Twine(V) +
                "; use 1 for one chunk per rank");
  if (m < 1)
    return fail("the number of microbatches (m) must be at least 1, got " + llvm::Twine(m) +
                "; m = global batch size / (micro batch size x data parallel size)");
  std::optional<int64_t> slots = llvm::checkedMul<int64_t>(int64_t(P) * V, m); // P x V < 2^62
  if (!slots || *slots > kMaxScheduleSlots)
    return fail("P x V x m = " + llvm::Twine(P) + " x " + llvm::Twine(V) + " x " + llvm::Twine(m) +
                " (chunk, microbatch) pairs is more than the " + llvm::Twine(kMaxScheduleSlots) +
                " a schedule may have; use fewer microbatches (a smaller --global-batch-size or a larger "
                "--micro-batch-size), a smaller --vpp or a smaller --pipeline-model-parallel-size");
  if (P == 1 && V > 1)
    return fail("--vpp " + llvm::Twine(V) +
                " needs pipeline parallelism, but --pipeline-model-parallel-size is 1 (all chunks "
                "would be on one rank); use --vpp 1, or --pipeline-model-parallel-size 2 or more");
  if (kind == ScheduleKind::Interleaved && V == 1)
    return fail("--pipeline-schedule interleaved needs more than one chunk per rank, but --vpp is 1; "
                "use --pipeline-schedule 1f1b, or give --vpp 2 or more");
  if (kind == ScheduleKind::Interleaved && m % P != 0) {
    int below = m / P * P, above = below + P;
    std::string nearest = below == 0 || m - below > above - m
                              ? "m = " + std::to_string(above)
                          : m - below < above - m
                              ? "m = " + std::to_string(below)
                              : "m = " + std::to_string(below) + " or m = " + std::to_string(above);
    return fail("--pipeline-schedule interleaved needs the number of microbatches (m) to be a "
                "multiple of the pipeline size P (--pipeline-model-parallel-size), got m = " +
                llvm::Twine(m) + ", P = " + llvm::Twine(P) + "; the nearest valid is " + nearest +
                " (or use --pipeline-schedule 1f1b)");
  }
  return llvm::Error::success();
}

// Megatron's skeleton: `warmup` forwards, then one forward / one backward while forwards are
// left, then the remaining backwards.
std::vector<Compute> oneForwardOneBackward(llvm::ArrayRef<ChunkMb> forwards,
                                           llvm::ArrayRef<ChunkMb> backwards, size_t warmup) {
  std::vector<Compute> order;
  size_t f = 0, b = 0;
  for (; f < warmup; ++f)
    order.push_back({true, forwards[f].first, forwards[f].second});
  for (; f < forwards.size(); ++f, ++b) {
    order.push_back({true, forwards[f].first, forwards[f].second});
    order.push_back({false, backwards[b].first, backwards[b].second});
  }
  for (; b < backwards.size(); ++b)
    order.push_back({false, backwards[b].first, backwards[b].second});
  return order;
}

// All forwards (local chunks in order, microbatches in order), then all backwards (local
// chunks last to first).
std::vector<Compute> gpipeOrder(int P, int V, int m, int r) {
  std::vector<Compute> order;
  for (int v = 0; v < V; ++v)
    for (int mb = 0; mb < m; ++mb)
      order.push_back({true, v * P + r, mb});
  for (int v = V - 1; v >= 0; --v)
    for (int mb = 0; mb < m; ++mb)
      order.push_back({false, v * P + r, mb});
  return order;
}

// Megatron's 1F1B: rank r runs P - r - 1 warmup forwards.
std::vector<Compute> oneFOneBOrder(int P, int m, int r) {
  std::vector<ChunkMb> microbatches;
  for (int mb = 0; mb < m; ++mb)
    microbatches.push_back({r, mb});
  return oneForwardOneBackward(microbatches, microbatches, std::min(P - r - 1, m));
}

// Megatron's interleaved 1F1B with microbatch groups of P: forward k runs local chunk
// (k / P) % V on microbatch (k / (P V)) P + k % P; backward k the same with the chunks reversed.
std::vector<Compute> interleavedOrder(int P, int V, int m, int r) {
  std::vector<ChunkMb> forwards, backwards;
  for (int k = 0; k < V * m; ++k) {
    int v = (k / P) % V, mb = (k / (P * V)) * P + k % P;
    forwards.push_back({v * P + r, mb});
    backwards.push_back({(V - 1 - v) * P + r, mb});
  }
  size_t warmup = std::min(V * m, (P - r - 1) * 2 + (V - 1) * P);
  return oneForwardOneBackward(forwards, backwards, warmup);
}

// Puts each receive right before the op that needs it, and each send after the op that
// produces it as soon as the receiver has taken every message it expects earlier on that
// channel: messages between two ranks are matched in order. When all ranks run their chunks in
// the same pattern (GPipe, 1F1B, interleaved) that is right after the producing op.
// Neighbouring chunks on the same rank (only when P == 1) exchange no message.
std::vector<std::vector<Action>> placeMessages(const std::vector<std::vector<Compute>> &orders,
                                               int P, int C, int m) {
  auto rankOf = [&](int chunk) { return chunk % P; };
  auto channel = [&](int src, int dst, bool activation) { return detail::channelIndex(P, src, dst, activation); };
  // What each channel must carry, in the order its receiver takes it: (sender chunk, mb).
  std::vector<std::vector<ChunkMb>> expected(detail::channelCount(P));
  for (int r = 0; r < P; ++r)
    for (const Compute &op : orders[r]) {
      int from = op.forward ? op.chunk - 1 : op.chunk + 1;
      if (from >= 0 && from < C && rankOf(from) != r)
        expected[channel(rankOf(from), r, op.forward)].push_back({from, op.microbatch});
    }

  std::vector<std::vector<Action>> lists(P);
  for (int r = 0; r < P; ++r) {
    std::vector<Action> &actions = lists[r];
    actions.reserve(orders[r].size() * 2);
    std::vector<char> done(2 * static_cast<size_t>(C) * m, 0); // (forward?, chunk, mb) computed
    std::vector<size_t> next(expected.size(), 0);
    auto flushSends = [&]() {
      for (bool activation : {true, false}) {
        int to = activation ? rankOf(r + 1) : rankOf(r + P - 1);
        if (to == r)
          continue;
        size_t ch = channel(r, to, activation);
        for (; next[ch] < expected[ch].size(); ++next[ch]) {
          auto [chunk, mb] = expected[ch][next[ch]];
          if (!done[((activation ? 0 : 1) * static_cast<size_t>(C) + chunk) * m + mb])
            break;
          actions.push_back({activation ? ActionKind::SendActivation : ActionKind::SendGrad, chunk,
                             mb, to});
        }
      }
    };
    for (const Compute &op : orders[r]) {
      int c = op.chunk, mb = op.microbatch;
      int from = op.forward ? c - 1 : c + 1;
      if (from >= 0 && from < C && rankOf(from) != r)
        actions.push_back({op.forward ? ActionKind::RecvActivation : ActionKind::RecvGrad, c, mb,
                           rankOf(from)});
      actions.push_back({op.forward ? ActionKind::Forward : ActionKind::Backward, c, mb, -1});
      done[((op.forward ? 0 : 1) * static_cast<size_t>(C) + c) * m + mb] = 1;
      flushSends();
    }
  }
  return lists;
}

// 1F1B over the C = P V chunks as if each chunk had its own device: time the C-stage 1F1B
// schedule (tf = 1, tb = 2), then give each rank its chunks' ops in order of start time,
// backwards first on ties (frees stash sooner), then by chunk.
std::vector<std::vector<Compute>> virtualOneFOneBOrders(int P, int V, int m) {
  int C = P * V;
  std::vector<std::vector<Compute>> perChunkOrders;
  for (int c = 0; c < C; ++c)
    perChunkOrders.push_back(oneFOneBOrder(C, m, c));
  Schedule perChunk{ScheduleKind::OneFOneB, C, 1, m, placeMessages(perChunkOrders, C, C, m)};
  Simulation timing = simulate(perChunk, 1.0, 2.0);

  struct Timed {
    double start;
    Compute op;
  };
  std::vector<std::vector<Timed>> timed(P);
  for (const SimEvent &e : timing.events)
    if (e.kind == ActionKind::Forward || e.kind == ActionKind::Backward)
      timed[e.chunk % P].push_back({e.start, {e.kind == ActionKind::Forward, e.chunk, e.microbatch}});
  std::vector<std::vector<Compute>> orders(P);
  for (int r = 0; r < P; ++r) {
    std::sort(timed[r].begin(), timed[r].end(), [](const Timed &a, const Timed &b) {
      return std::make_tuple(a.start, a.op.forward, a.op.chunk) <
             std::make_tuple(b.start, b.op.forward, b.op.chunk);
    });
    for (const Timed &t : timed[r])
      orders[r].push_back(t.op);
  }
  return orders;
}

} // namespace

llvm::Error checkScheduleExists(ScheduleKind kind, int P, int V, int m) { return checkParameters(kind, P, V, m); }

llvm::Expected<Schedule> buildSchedule(ScheduleKind kind, int P, int V, int m) {
  if (llvm::Error error = checkParameters(kind, P, V, m))
    return std::move(error);
  std::vector<std::vector<Compute>> orders;
  if (kind == ScheduleKind::OneFOneB && V > 1) {
    orders = virtualOneFOneBOrders(P, V, m);
  } else {
    for (int r = 0; r < P; ++r)
      orders.push_back(kind == ScheduleKind::GPipe       ? gpipeOrder(P, V, m, r)
                       : kind == ScheduleKind::OneFOneB ? oneFOneBOrder(P, m, r)
                                                         : interleavedOrder(P, V, m, r));
  }
  return Schedule{kind, P, V, m, placeMessages(orders, P, P * V, m)};
}

} // namespace megac::pipeline
