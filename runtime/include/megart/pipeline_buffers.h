// The buffers a pipeline stage's executor holds: stashes (Activations) and the activations and
// gradients it sends and receives (Communication), taken from a pool keyed by (category, bytes)
// and given back when done with. How many of each the pool ever needs follows from the schedules
// of all stages: a sent buffer comes back at the first step by which its stage knows, through the
// messages it has received, that the receiver has finished the matching receive
// (send_reclaim_steps); the executor waits for the send there, which then returns at once. A
// buffer that comes back earlier can only save an allocation. The executor allocates exactly this
// plan up front, and megac predicts a rank's memory with the same functions, so prediction and
// measurement are one definition. Header-only, free of MLIR and of the rest of the runtime.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <list>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

namespace megart {

// The pool's two categories (values of MemoryCategory).
enum class PipelineBufferKind : int32_t { Activations = 4, Communication = 6 };

// One step of a stage's schedule, as PipeOp has it (kind: Forward 0, Backward 1, SendActivation
// 2, RecvActivation 3, SendGrad 4, RecvGrad 5; peer: the other pp rank of a send or receive).
struct PipelineStep {
  int32_t kind, chunk, peer;
};
// One chunk of the stage, by global chunk index.
struct PipelineChunkSizes {
  int64_t chunk, stash_bytes, input_bytes, output_bytes;
};

struct PipelineBufferPlan {
  // (kind, bytes) -> buffers of that size the pool holds.
  std::map<std::pair<PipelineBufferKind, int64_t>, int64_t> count;
  // The one buffer that opens every point-to-point channel once: a float per (direction, peer,
  // message kind) the schedule uses (none on a one-stage pipeline). Communication memory.
  int64_t channel_bytes = 0;

  int64_t bytes(PipelineBufferKind kind) const {
    int64_t total = kind == PipelineBufferKind::Communication ? channel_bytes : 0;
    for (const auto &[key, n] : count)
      if (key.first == kind)
        total += key.second * n;
    return total;
  }
};

// Per stage, per step: for a send, the index of the step of its own stage before which its buffer
// comes back (steps.size(): only at the end of the iteration); -1 for other steps. A stage
// receives its k-th message on a channel (sender, receiver, activation or gradient) from the
// sender's k-th send on it, in order (MPI's non-overtaking rule, one tag per kind). The schedule
// is run with vector clocks (clock[r][q]: how many of q's steps r knows are done; a receive
// learns what its sender knew when it sent, and the receiver completes a receive before its next
// step): a send to q whose receive is q's step j is known done once clock[r][q] > j, which only a
// receive can make true. If the schedules cannot all run to the end (a deadlock the verifier
// would have refused), every send comes back at the end.
inline std::vector<std::vector<int64_t>> send_reclaim_steps(const std::vector<std::vector<PipelineStep>> &stages) {
  const int64_t p = static_cast<int64_t>(stages.size());
  std::vector<std::vector<int64_t>> reclaim(stages.size());
  for (size_t r = 0; r < stages.size(); ++r) {
    reclaim[r].assign(stages[r].size(), -1);
    for (size_t i = 0; i < stages[r].size(); ++i)
      if (stages[r][i].kind == 2 || stages[r][i].kind == 4)
        reclaim[r][i] = static_cast<int64_t>(stages[r].size());
  }
  struct Message {
    int64_t sender_step;
    std::vector<int64_t> clock; // the sender's when it sent
  };
  // (sender, receiver, activation?) -> messages sent and not yet received, in order.
  std::map<std::tuple<int64_t, int64_t, bool>, std::deque<Message>> in_flight;
  // Per stage, per send step: the receiver's step that received it (-1: not yet); and the send
  // steps whose buffers are not known back yet.
  std::vector<std::vector<int64_t>> received_at(stages.size());
  std::vector<std::list<int64_t>> outstanding(stages.size());
  for (size_t r = 0; r < stages.size(); ++r)
    received_at[r].assign(stages[r].size(), -1);
  std::vector<std::vector<int64_t>> clock(stages.size(), std::vector<int64_t>(stages.size(), 0));
  std::vector<size_t> next(stages.size(), 0);
  bool progress = true;
  while (progress) {
    progress = false;
    for (int64_t r = 0; r < p; ++r) {
      while (next[r] < stages[r].size()) {
        const PipelineStep &s = stages[r][next[r]];
        const int64_t i = static_cast<int64_t>(next[r]);
        const bool receive = s.kind == 3 || s.kind == 5, send = s.kind == 2 || s.kind == 4;
        if ((receive || send) && (s.peer < 0 || s.peer >= p))
          return reclaim; // malformed: the executor's validation says so
        if (receive) {
          auto &queue = in_flight[{s.peer, r, s.kind == 3}];
          if (queue.empty())
            break; // its message is not sent yet
          const Message m = std::move(queue.front());
          queue.pop_front();
          for (int64_t q = 0; q < p; ++q)
            clock[r][q] = std::max(clock[r][q], m.clock[q]);
          received_at[s.peer][m.sender_step] = i;
        }
        clock[r][r] = i + 1;
        if (send) {
          outstanding[r].push_back(i);
          in_flight[{r, s.peer, s.kind == 2}].push_back({i, clock[r]});
        }
        if (receive) // what this stage has learned may settle its sends still out
          for (auto it = outstanding[r].begin(); it != outstanding[r].end();) {
            const int64_t at = received_at[r][*it];
            if (at >= 0 && clock[r][stages[r][*it].peer] > at) {
              reclaim[r][*it] = i + 1;
              it = outstanding[r].erase(it);
            } else {
              ++it;
            }
          }
        ++next[r];
        progress = true;
      }
    }
  }
  for (size_t r = 0; r < stages.size(); ++r)
    if (next[r] != stages[r].size()) { // deadlocked: back at the end, as without the analysis
      for (size_t q = 0; q < stages.size(); ++q)
        for (int64_t &at : reclaim[q])
          if (at >= 0)
            at = static_cast<int64_t>(stages[q].size());
      break;
    }
  return reclaim;
}

// The pool's plan for `steps` (one iteration of a stage) over its chunks `chunks` of
// `num_chunks` (chunk 0 has no input, the last no output). Walks the executor's takes and gives
// in its order (pipeline_executor.cpp): a forward takes its stash and (not on the last chunk) its
// output, then gives back its input; a backward takes its input gradient (not on chunk 0), then
// gives back its stash and output gradient; a receive takes its buffer; a sent buffer stays taken
// until the step `reclaim` (send_reclaim_steps for this stage; empty: the end of the iteration).
// Sizes the caller has checked (no overflow).
inline PipelineBufferPlan plan_pipeline_buffers(const std::vector<PipelineStep> &steps,
                                                const std::vector<PipelineChunkSizes> &chunks,
                                                int64_t num_chunks, const std::vector<int64_t> &reclaim = {}) {
  using Key = std::pair<PipelineBufferKind, int64_t>;
  const auto act = PipelineBufferKind::Activations, comm = PipelineBufferKind::Communication;
  PipelineBufferPlan plan;
  std::map<Key, int64_t> free;
  auto take = [&](Key k) {
    if (k.second <= 0)
      return;
    if (free[k] > 0)
      --free[k];
    else
      ++plan.count[k];
  };
  auto give = [&](Key k) {
    if (k.second > 0)
      ++free[k];
  };
  auto sizes = [&](int32_t chunk) {
    for (const PipelineChunkSizes &c : chunks)
      if (c.chunk == chunk)
        return c;
    return PipelineChunkSizes{chunk, 0, 0, 0};
  };
  std::map<std::pair<int32_t, int32_t>, bool> channels; // (kind of send or receive, peer)
  std::multimap<int64_t, Key> coming_back;               // step index -> a sent buffer back before it
  for (size_t i = 0; i < steps.size(); ++i) {
    const PipelineStep &s = steps[i];
    for (auto [it, end] = coming_back.equal_range(static_cast<int64_t>(i)); it != end; ++it)
      give(it->second);
    const PipelineChunkSizes c = sizes(s.chunk);
    const bool first = s.chunk == 0, last = s.chunk == num_chunks - 1;
    if (s.kind >= 2)
      channels[{s.kind, s.peer}] = true;
    switch (s.kind) {
    case 0: // Forward
      take({act, c.stash_bytes});
      if (!last)
        take({comm, c.output_bytes});
      if (!first)
        give({comm, c.input_bytes});
      break;
    case 1: // Backward
      if (!first)
        take({comm, c.input_bytes});
      give({act, c.stash_bytes});
      if (!last)
        give({comm, c.output_bytes});
      break;
    case 3: // RecvActivation
      take({comm, c.input_bytes});
      break;
    case 5: // RecvGrad
      take({comm, c.output_bytes});
      break;
    default: // a send: its buffer comes back before step reclaim[i] (or at the end)
      if (i < reclaim.size() && reclaim[i] >= 0)
        coming_back.insert({reclaim[i], {comm, s.kind == 2 ? c.output_bytes : c.input_bytes}});
      break;
    }
  }
  plan.channel_bytes = 4 * static_cast<int64_t>(channels.size());
  return plan;
}

} // namespace megart
