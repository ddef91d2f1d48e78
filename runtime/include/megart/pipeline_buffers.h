// The buffers a pipeline stage's executor holds: stashes (Activations) and the activations and
// gradients it sends and receives (Communication), taken from a pool keyed by (category, bytes)
// and given back when done with. How many of each the pool ever needs follows from the schedule
// alone if a sent buffer comes back only at the end of the iteration (the latest a send can
// complete): a buffer that comes back earlier can only save an allocation. The executor
// allocates exactly this plan up front, and megac predicts a rank's memory with the same function,
// so prediction and measurement are one definition. Header-only, free of MLIR and of the rest
// of the runtime.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
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
  // message kind) the schedule uses, at least one. Communication memory.
  int64_t channel_bytes = 4;

  int64_t bytes(PipelineBufferKind kind) const {
    int64_t total = kind == PipelineBufferKind::Communication ? channel_bytes : 0;
    for (const auto &[key, n] : count)
      if (key.first == kind)
        total += key.second * n;
    return total;
  }
};

// The pool's plan for `steps` (one iteration of a stage) over its chunks `chunks` of
// `num_chunks` (chunk 0 has no input, the last no output). Walks the executor's takes and gives
// in its order (pipeline_executor.cpp): a forward takes its stash and (not on the last chunk) its
// output, then gives back its input; a backward takes its input gradient (not on chunk 0), then
// gives back its stash and output gradient; a receive takes its buffer; a sent buffer stays taken
// to the end of the iteration. Sizes the caller has checked (no overflow).
inline PipelineBufferPlan plan_pipeline_buffers(const std::vector<PipelineStep> &steps,
                                                const std::vector<PipelineChunkSizes> &chunks,
                                                int64_t num_chunks) {
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
  for (const PipelineStep &s : steps) {
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
    default: // a send: its buffer comes back at the end
      break;
    }
  }
  plan.channel_bytes = 4 * std::max<int64_t>(1, static_cast<int64_t>(channels.size()));
  return plan;
}

} // namespace megart
