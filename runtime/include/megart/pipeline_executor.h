// Runs one pp rank's compiled pipeline schedule (PipelineStageDesc::ops) for one iteration:
// chunk forwards and backwards, and the point-to-point messages between stages over the pp
// communicator. The compiler's verifier proved the schedule deadlock-free; the executor checks
// the table is well-formed before the first step, so a broken program fails with a message
// instead of a crash or a hang.
#pragma once

#include <array>

#include "megart/comm.h"
#include "megart/device.h"
#include "megart/pipeline_buffers.h"
#include "megart/program.h"

#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

namespace megart {

// Name of an op kind for messages: "Forward", "RecvGrad", ...
const char *pipe_op_name(PipeOpKind kind);

// Throws megart::Error ("compiled program: pp rank R's schedule, step i (...): ...; regenerate
// with megac compile") unless `stage`, run by pp rank `pp_rank` of `pp_size` with
// `virtual_size` chunks per rank and `num_microbatches` microbatches, is well-formed: its chunks
// are pp_rank, pp_rank + pp_size, ... with functions and sizes (input on every chunk but the
// first, output on every chunk but the last); every op names a chunk of this rank, a microbatch
// in range and, for sends and receives, the pp rank that runs the neighbouring chunk; every
// (chunk, microbatch) is forwarded and backwarded exactly once, each receive comes before the op
// that reads it and each send after the op that writes it, and nothing is missing at the end.
void validate_pipeline_stage(const PipelineStageDesc &stage, int64_t pp_rank, int64_t pp_size,
                             int64_t virtual_size, int64_t num_microbatches);

// The buffer pool stage `pp_rank` of the program's `pp_size` stages needs, and the step before
// which each of its sends comes back (pipeline_buffers.h: both follow from every stage's schedule).
struct StageBufferPlan {
  PipelineBufferPlan pool;
  std::vector<int64_t> reclaim;
};
StageBufferPlan stage_buffer_plan(const PipelineStageDesc *stages, int64_t pp_rank, int64_t pp_size,
                                  int64_t num_chunks);

struct PipelineIterationResult {
  double loss_sum = 0;     // sum of the last chunk's microbatch losses (0 on other ranks)
  int64_t loss_count = 0;  // microbatches in loss_sum: all of them on the last chunk's rank
  int64_t peak_stash = 0;  // most (chunk, microbatch) stashes alive at once this iteration
  std::array<double, kNumMetrics> metric_sums{}; // the reported metrics' sums, as loss_sum
};

class PipelineExecutor {
public:
  // Runs `stages[pp_rank]` (the program's table of all `pp_size` stages: when a sent buffer
  // comes back depends on the other stages' schedules). Validates the stage
  // (validate_pipeline_stage) and allocates its workspace on `device`, where its activations,
  // gradients and stashes live too.
  PipelineExecutor(const PipelineStageDesc *stages, int64_t pp_rank, int64_t pp_size,
                   int64_t virtual_size, int64_t num_microbatches, Device &device = cpu_device());
  ~PipelineExecutor();
  PipelineExecutor(const PipelineExecutor &) = delete;
  PipelineExecutor &operator=(const PipelineExecutor &) = delete;

  // One iteration of `microbatches` microbatches (0: the schedule's own number; else a multiple
  // of it): the schedule once per round of its microbatches (pipe.schedule's rule; one round but
  // for a one-stage schedule, compiled for a single microbatch). ids / labels hold the
  // microbatches one after another, tokens_per_microbatch each; params / grads are the stage's
  // tables; ctx.pp numbers the peers. Gradients are added to grads; every send has completed when
  // it returns. Sets comm_activity()'s schedule step while it runs. ctx.grad_sync
  // (--overlap-grad-reduce) goes only to each chunk's last backward of the last round, after
  // which its gradients are final.
  PipelineIterationResult run(const StepContext &ctx, float *const *params, float *const *grads,
                              const int32_t *ids, const int32_t *labels,
                              int64_t tokens_per_microbatch, float dloss, int64_t microbatches = 0);

  // The forward of every one of `microbatches` microbatches (0: the schedule's number), no
  // backward: evaluation. Chunk by chunk in global order (chunk c, then c + 1 on the next stage),
  // so each stage receives what the stage before it just sent: no schedule to verify, no overlap
  // between stages. Returns the last chunk's losses; leaves gradients and the training
  // schedule's buffers as they were.
  PipelineIterationResult run_forward_only(const StepContext &ctx, float *const *params, const int32_t *ids,
                                           const int32_t *labels, int64_t tokens_per_microbatch,
                                           int64_t microbatches = 0);

private:
  // Activation, gradient and stash buffers, reused across microbatches and iterations so the
  // steady state allocates nothing. Keyed by category and size in bytes: a buffer is reused
  // only for what it was counted as (stashes are activations, sent and received buffers
  // communication). Filled up front with the stage's plan (pipeline_buffers.h), which is
  // megac's prediction; a take past it allocates, and the memory report then shows more than
  // predicted.
  class BufferPool {
  public:
    explicit BufferPool(Device &device) : device_(device) {}
    void reserve(MemoryCategory category, int64_t bytes, int64_t count);
    DeviceBuffer take(int64_t bytes, MemoryCategory category);
    void give(DeviceBuffer buffer);

  private:
    Device &device_;
    std::map<std::pair<MemoryCategory, size_t>, std::vector<DeviceBuffer>> free_;
  };
  // A send in flight and the buffer it reads (declared first: it outlives the request); it is
  // waited for before step `reclaim_before` at the latest (send_reclaim_steps).
  struct PendingSend {
    DeviceBuffer buffer;
    std::unique_ptr<Request> request;
    int64_t reclaim_before = 0;
  };
  // Buffers waiting for the op that uses them, per (local chunk, microbatch).
  struct Slots {
    DeviceBuffer input, output, output_grad, input_grad, stash;
  };

  // Gives back the buffers of sends that have finished; waits for those due before `step`
  // (every one when `step` is past the last).
  void reclaim_sends(int64_t step, Communicator &pp);
  void open_channels(Communicator &pp);
  Slots &slots(int32_t chunk, int32_t microbatch);
  // The rounds an iteration of `microbatches` takes (throws unless a positive multiple).
  int64_t rounds(int64_t microbatches) const;
  // One pass over the schedule, its microbatches `first` ... `first` + m - 1; `last` gives the
  // chunks' final backwards ctx.grad_sync.
  void run_round(const StepContext &ctx, float *const *params, float *const *grads, const int32_t *ids,
                 const int32_t *labels, int64_t tokens_per_microbatch, float dloss, int64_t first, bool last,
                 PipelineIterationResult &result);

  const PipelineStageDesc &stage_;
  int64_t steps_; // the schedule's steps in the stage's table (its closing ops follow)
  std::vector<char> final_backward_; // per op: the last Backward of its chunk
  std::vector<int64_t> reclaim_;      // per op: for a send, the step its buffer is due back before
  int64_t pp_rank_, pp_size_, num_chunks_, num_microbatches_;
  DeviceBuffer arena_;
  BufferPool pool_;
  std::vector<Slots> slots_; // [local chunk * num_microbatches + microbatch]
  std::vector<PendingSend> sends_;
  bool channels_open_ = false;
};

} // namespace megart
