#include "megart/pipeline_executor.h"

#include "megart/closing_actions.h"
#include "megart/error.h"

#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <tuple>

namespace megart {

const char *pipe_op_name(PipeOpKind kind) {
  switch (kind) {
  case PipeOpKind::Forward: return "Forward";
  case PipeOpKind::Backward: return "Backward";
  case PipeOpKind::SendActivation: return "SendActivation";
  case PipeOpKind::RecvActivation: return "RecvActivation";
  case PipeOpKind::SendGrad: return "SendGrad";
  case PipeOpKind::RecvGrad: return "RecvGrad";
  case PipeOpKind::GradSync: return "GradSync";
  case PipeOpKind::TiedSum: return "TiedSum";
  case PipeOpKind::TiedSumShards: return "TiedSumShards";
  case PipeOpKind::OptimizerStep: return "OptimizerStep";
  case PipeOpKind::ParamGather: return "ParamGather";
  }
  return "unknown op";
}

namespace {

constexpr const char *kFix = "; regenerate with megac compile";

std::string op_text(const PipeOp &op) {
  const int32_t k = static_cast<int32_t>(op.kind);
  const std::string name = k >= 0 && k <= static_cast<int32_t>(PipeOpKind::ParamGather) ? pipe_op_name(op.kind)
                                            : "op kind " + std::to_string(k);
  return name + " chunk " + std::to_string(op.chunk) + " microbatch " +
         std::to_string(op.microbatch);
}

// The pp rank a send or receive of `op` talks to: the one running the neighbouring chunk.
int64_t expected_peer(const PipeOp &op, int64_t pp_size) {
  const bool next = op.kind == PipeOpKind::SendActivation || op.kind == PipeOpKind::RecvGrad;
  return ((op.chunk + (next ? 1 : -1)) % pp_size + pp_size) % pp_size;
}

// What the schedule has done to one (chunk, microbatch): one bit per op kind.
struct Done {
  unsigned bits = 0;
  bool has(PipeOpKind k) const { return bits & (1u << static_cast<int>(k)); }
  void set(PipeOpKind k) { bits |= 1u << static_cast<int>(k); }
};

} // namespace

void validate_pipeline_stage(const PipelineStageDesc &stage, int64_t pp_rank, int64_t pp_size,
                             int64_t V, int64_t m) {
  const std::string who = "compiled program: pp rank " + std::to_string(pp_rank) + "'s stage";
  auto fail = [&](const std::string &problem) { throw Error(who + ": " + problem + kFix); };
  if (pp_size < 1 || pp_rank < 0 || pp_rank >= pp_size || V < 1 || m < 1)
    fail("pp rank " + std::to_string(pp_rank) + " of " + std::to_string(pp_size) + ", " +
         std::to_string(V) + " chunks per rank and " + std::to_string(m) +
         " microbatches do not make a pipeline");
  const int64_t num_chunks = pp_size * V;
  if (stage.num_chunks != V || (V > 0 && !stage.chunks))
    fail("it has " + std::to_string(stage.num_chunks) + " chunks; the pipeline has " +
         std::to_string(V) + " per rank");
  if (stage.arena_bytes < 0)
    fail("arena_bytes is " + std::to_string(stage.arena_bytes));
  for (int64_t i = 0; i < V; ++i) {
    const ChunkDesc &c = stage.chunks[i];
    const std::string name = "chunk " + std::to_string(c.chunk);
    if (c.chunk != pp_rank + i * pp_size)
      fail("its chunk " + std::to_string(i) + " is " + name + "; pp rank " +
           std::to_string(pp_rank) + " runs chunks " + std::to_string(pp_rank) + ", " +
           std::to_string(pp_rank + pp_size) + ", ... in ascending order");
    if (!c.forward || !c.backward)
      fail(name + " has no " + (c.forward ? "backward" : "forward") + " function");
    if (c.stash_bytes < 0)
      fail(name + " has stash_bytes " + std::to_string(c.stash_bytes));
    const bool first = c.chunk == 0, last = c.chunk == num_chunks - 1;
    if (first ? c.input_numel != 0 : c.input_numel < 1)
      fail(name + " has input_numel " + std::to_string(c.input_numel) + "; it must be " +
           (first ? "0 on the first chunk" : "positive"));
    if (last ? c.output_numel != 0 : c.output_numel < 1)
      fail(name + " has output_numel " + std::to_string(c.output_numel) + "; it must be " +
           (last ? "0 on the last chunk" : "positive"));
    if (c.element_bytes != 4 && c.element_bytes != 2)
      fail(name + " has element_bytes " + std::to_string(c.element_bytes) + "; it must be 4 (fp32) or 2 (16-bit)");
    if ((c.input_numel * c.element_bytes) % 4 != 0 || (c.output_numel * c.element_bytes) % 4 != 0)
      fail(name + " passes an odd number of 16-bit elements; the pipeline sends whole fp32 words");
  }
  if (stage.num_ops < 0 || (stage.num_ops > 0 && !stage.ops))
    fail("it has " + std::to_string(stage.num_ops) + " ops and no table");

  validate_closing_ops(stage.ops, stage.num_ops, "pp rank " + std::to_string(pp_rank) + "'s stage");
  // Walk the schedule as the executor will, tracking which buffers exist.
  std::vector<Done> done(static_cast<size_t>(V * m));
  for (int64_t i = 0; i < schedule_steps(stage.ops, stage.num_ops); ++i) {
    const PipeOp &op = stage.ops[i];
    auto bad = [&](const std::string &problem) {
      throw Error("compiled program: pp rank " + std::to_string(pp_rank) + "'s schedule, step " +
                  std::to_string(i) + " (" + op_text(op) + "): " + problem + kFix);
    };
    const int32_t kind = static_cast<int32_t>(op.kind);
    if (kind < 0 || kind > static_cast<int32_t>(PipeOpKind::RecvGrad))
      bad("unknown op kind " + std::to_string(kind));
    if (op.chunk < 0 || op.chunk >= num_chunks || op.chunk % pp_size != pp_rank)
      bad("chunk " + std::to_string(op.chunk) + " does not run on this rank (the pipeline has " +
          std::to_string(num_chunks) + " chunks; chunk c runs on pp rank c % " +
          std::to_string(pp_size) + ")");
    if (op.microbatch < 0 || op.microbatch >= m)
      bad("microbatch " + std::to_string(op.microbatch) + " is outside 0.." +
          std::to_string(m - 1));
    const bool first = op.chunk == 0, last = op.chunk == num_chunks - 1;
    const bool compute = op.kind == PipeOpKind::Forward || op.kind == PipeOpKind::Backward;
    if (!compute) {
      if ((op.kind == PipeOpKind::SendActivation || op.kind == PipeOpKind::RecvGrad) && last)
        bad("the last chunk has no next chunk to exchange with");
      if ((op.kind == PipeOpKind::RecvActivation || op.kind == PipeOpKind::SendGrad) && first)
        bad("the first chunk has no previous chunk to exchange with");
      if (op.peer != expected_peer(op, pp_size))
        bad("peer is pp rank " + std::to_string(op.peer) + "; the neighbouring chunk runs on pp rank " +
            std::to_string(expected_peer(op, pp_size)));
    }
    Done &d = done[static_cast<size_t>((op.chunk / pp_size) * m + op.microbatch)];
    if (d.has(op.kind))
      bad("it appears twice");
    switch (op.kind) {
    case PipeOpKind::Forward:
      if (!first && !d.has(PipeOpKind::RecvActivation))
        bad("it runs before its RecvActivation");
      break;
    case PipeOpKind::RecvActivation:
      if (d.has(PipeOpKind::Forward))
        bad("it comes after the Forward that needs it");
      break;
    case PipeOpKind::SendActivation:
      if (!d.has(PipeOpKind::Forward))
        bad("it sends an activation before the Forward that computes it");
      break;
    case PipeOpKind::RecvGrad:
      if (d.has(PipeOpKind::Backward))
        bad("it comes after the Backward that needs it");
      break;
    case PipeOpKind::Backward:
      if (!d.has(PipeOpKind::Forward))
        bad("it runs before its Forward");
      if (!last && !d.has(PipeOpKind::RecvGrad))
        bad("it runs before its RecvGrad");
      break;
    case PipeOpKind::SendGrad:
      if (!d.has(PipeOpKind::Backward))
        bad("it sends a gradient before the Backward that computes it");
      break;
    default: // closing ops come after the schedule's steps
      break;
    }
    d.set(op.kind);
  }
  // Everything each (chunk, microbatch) needs, in the order a reader expects to see missing.
  for (int64_t lc = 0; lc < V; ++lc)
    for (int64_t mb = 0; mb < m; ++mb) {
      const int64_t chunk = pp_rank + lc * pp_size;
      const bool first = chunk == 0, last = chunk == num_chunks - 1;
      const Done &d = done[static_cast<size_t>(lc * m + mb)];
      std::vector<PipeOpKind> needed = {PipeOpKind::Forward, PipeOpKind::Backward};
      if (!first)
        needed.insert(needed.end(), {PipeOpKind::RecvActivation, PipeOpKind::SendGrad});
      if (!last)
        needed.insert(needed.end(), {PipeOpKind::SendActivation, PipeOpKind::RecvGrad});
      for (PipeOpKind k : needed)
        if (!d.has(k))
          fail("the schedule has no " + std::string(pipe_op_name(k)) + " for chunk " +
               std::to_string(chunk) + " microbatch " + std::to_string(mb) + " (every one of the " +
               std::to_string(m) + " microbatches must pass through every chunk)");
    }
}

// ---------------------------------------------------------------------------------------------

StageBufferPlan stage_buffer_plan(const PipelineStageDesc *stages, int64_t pp_rank, int64_t pp_size,
                                  int64_t num_chunks) {
  std::vector<std::vector<PipelineStep>> steps(static_cast<size_t>(pp_size));
  for (int64_t r = 0; r < pp_size; ++r)
    for (int64_t i = 0; i < schedule_steps(stages[r].ops, stages[r].num_ops); ++i)
      steps[r].push_back({static_cast<int32_t>(stages[r].ops[i].kind), stages[r].ops[i].chunk, stages[r].ops[i].peer});
  StageBufferPlan plan;
  plan.reclaim = send_reclaim_steps(steps)[static_cast<size_t>(pp_rank)];
  const PipelineStageDesc &stage = stages[pp_rank];
  std::vector<PipelineChunkSizes> chunks;
  for (int64_t i = 0; i < stage.num_chunks; ++i) {
    const ChunkDesc &c = stage.chunks[i];
    chunks.push_back({c.chunk, c.stash_bytes, c.input_numel * c.element_bytes, c.output_numel * c.element_bytes});
  }
  plan.pool = plan_pipeline_buffers(steps[static_cast<size_t>(pp_rank)], chunks, num_chunks, plan.reclaim);
  return plan;
}

DeviceBuffer PipelineExecutor::BufferPool::take(int64_t bytes, MemoryCategory category) {
  auto it = free_.find({category, static_cast<size_t>(bytes)});
  if (it == free_.end() || it->second.empty())
    return DeviceBuffer(device_, static_cast<size_t>(bytes), category);
  DeviceBuffer b = std::move(it->second.back());
  it->second.pop_back();
  return b;
}

void PipelineExecutor::BufferPool::reserve(MemoryCategory category, int64_t bytes, int64_t count) {
  std::vector<DeviceBuffer> &free = free_[{category, static_cast<size_t>(bytes)}];
  for (int64_t i = 0; i < count; ++i)
    free.emplace_back(device_, static_cast<size_t>(bytes), category);
}

void PipelineExecutor::BufferPool::give(DeviceBuffer buffer) {
  if (buffer.data())
    free_[{buffer.category(), buffer.bytes()}].push_back(std::move(buffer));
}

PipelineExecutor::PipelineExecutor(const PipelineStageDesc *stages, int64_t pp_rank,
                                   int64_t pp_size, int64_t virtual_size,
                                   int64_t num_microbatches, Device &device)
    : stage_(stages[pp_rank]), steps_(schedule_steps(stages[pp_rank].ops, stages[pp_rank].num_ops)), pp_rank_(pp_rank), pp_size_(pp_size), num_chunks_(pp_size * virtual_size),
      num_microbatches_(num_microbatches), pool_(device) {
  const PipelineStageDesc &stage = stage_;
  validate_pipeline_stage(stage, pp_rank, pp_size, virtual_size, num_microbatches);
  arena_ = DeviceBuffer(device, static_cast<size_t>(stage.arena_bytes), MemoryCategory::Workspace);
  StageBufferPlan plan = stage_buffer_plan(stages, pp_rank, pp_size, pp_size * virtual_size);
  reclaim_ = std::move(plan.reclaim);
  for (const auto &[key, count] : plan.pool.count)
    pool_.reserve(static_cast<MemoryCategory>(key.first), key.second, count);
  pool_.reserve(MemoryCategory::Communication, plan.pool.channel_bytes, plan.pool.channel_bytes > 0 ? 1 : 0);
  slots_.resize(static_cast<size_t>(virtual_size * num_microbatches));
  final_backward_.assign(static_cast<size_t>(stage.num_ops), 0);
  std::vector<bool> seen(static_cast<size_t>(pp_size * virtual_size), false);
  for (int64_t i = stage.num_ops - 1; i >= 0; --i) // validated above: chunks are in range
    if (stage.ops[i].kind == PipeOpKind::Backward && !seen[static_cast<size_t>(stage.ops[i].chunk)]) {
      seen[static_cast<size_t>(stage.ops[i].chunk)] = true;
      final_backward_[static_cast<size_t>(i)] = 1;
    }
}

// run() returns with no send in flight; one is left only when an error unwound it, and then
// its request is abandoned before its buffer is freed (PendingSend's member order).
PipelineExecutor::~PipelineExecutor() = default;

PipelineExecutor::Slots &PipelineExecutor::slots(int32_t chunk, int32_t microbatch) {
  return slots_[static_cast<size_t>((chunk / pp_size_) * num_microbatches_ + microbatch)];
}

void PipelineExecutor::reclaim_sends(int64_t step, Communicator &pp) {
  size_t kept = 0;
  for (PendingSend &s : sends_) {
    const bool due = s.reclaim_before <= step;
    if (due)
      pp.wait(*s.request); // the receiver is known to have its message: returns at once
    if (due || s.request->test()) {
      s.request.reset();
      pool_.give(std::move(s.buffer));
    } else {
      sends_[kept++] = std::move(s);
    }
  }
  sends_.resize(kept);
}

// One float over every (direction, peer, tag) the schedule uses, before its first real message:
// NCCL makes a point-to-point channel (a communicator, then its connection) on first use, and
// doing that while other transfers or collectives are running on the GPU can deadlock. Every
// transfer is posted before the first wait, so this exchange cannot wait on itself; with MPI it
// is one small message more per channel, once.
void PipelineExecutor::open_channels(Communicator &pp) {
  std::set<std::tuple<bool, int32_t, int>> channels; // (send, peer, tag)
  for (int64_t i = 0; i < steps_; ++i) {
    const PipeOp &op = stage_.ops[i];
    if (op.kind == PipeOpKind::Forward || op.kind == PipeOpKind::Backward)
      continue;
    const bool send = op.kind == PipeOpKind::SendActivation || op.kind == PipeOpKind::SendGrad;
    const bool act = op.kind == PipeOpKind::SendActivation || op.kind == PipeOpKind::RecvActivation;
    channels.insert({send, op.peer, act ? p2p_tag::kPipelineActivation : p2p_tag::kPipelineGrad});
  }
  if (channels.empty()) // one stage: nothing to open
    return;
  DeviceBuffer floats =
      pool_.take(static_cast<int64_t>(channels.size() * sizeof(float)), MemoryCategory::Communication);
  std::vector<std::unique_ptr<Request>> requests;
  float *slot = floats.as<float>();
  for (bool sends : {true, false})
    for (const auto &[send, peer, tag] : channels)
      if (send == sends)
        requests.push_back(send ? pp.isend(slot++, 1, peer, tag) : pp.irecv(slot++, 1, peer, tag));
  for (std::unique_ptr<Request> &r : requests)
    pp.wait(*r);
  pool_.give(std::move(floats));
}

int64_t PipelineExecutor::rounds(int64_t microbatches) const {
  if (microbatches == 0)
    return 1;
  if (microbatches < 0 || microbatches % num_microbatches_ != 0)
    throw Error("pipeline executor: an iteration of " + std::to_string(microbatches) +
                " microbatches, but the schedule runs rounds of " + std::to_string(num_microbatches_));
  return microbatches / num_microbatches_;
}

PipelineIterationResult PipelineExecutor::run(const StepContext &ctx, float *const *params,
                                              float *const *grads, const int32_t *ids,
                                              const int32_t *labels,
                                              int64_t tokens_per_microbatch, float dloss,
                                              int64_t microbatches) {
  const int64_t n = rounds(microbatches);
  Communicator &pp = *ctx.pp;
  if (pp.size() != pp_size_ || pp.rank() != pp_rank_)
    throw Error("pipeline executor for pp rank " + std::to_string(pp_rank_) + " of " +
                std::to_string(pp_size_) + " got a pp communicator of rank " +
                std::to_string(pp.rank()) + " of " + std::to_string(pp.size()));
  CommActivity &activity = comm_activity();
  if (!channels_open_) {
    const char *phase = activity.phase;
    activity.phase = "opening the pipeline's point-to-point channels";
    open_channels(pp);
    activity.phase = phase;
    channels_open_ = true;
  }
  PipelineIterationResult result;
  StepContext counted = ctx; // the compiled forwards add their metrics to the result
  counted.metrics = result.metric_sums.data();
  for (int64_t r = 0; r < n; ++r)
    run_round(counted, params, grads, ids, labels, tokens_per_microbatch, dloss, r * num_microbatches_, r == n - 1,
              result);
  return result;
}

void PipelineExecutor::run_round(const StepContext &ctx, float *const *params, float *const *grads,
                                 const int32_t *ids, const int32_t *labels, int64_t tokens_per_microbatch,
                                 float dloss, int64_t first_microbatch, bool last_round,
                                 PipelineIterationResult &result) {
  Communicator &pp = *ctx.pp;
  CommActivity &activity = comm_activity();
  StepContext plain = ctx; // every op but a chunk's last backward: no bucket starts there
  plain.grad_sync = nullptr;
  int64_t live = 0; // stashes alive now
  for (int64_t i = 0; i < steps_; ++i) {
    const PipeOp &op = stage_.ops[i];
    activity.step = i;
    activity.op = pipe_op_name(op.kind);
    activity.chunk = op.chunk;
    const int64_t microbatch = first_microbatch + op.microbatch; // of the iteration
    activity.microbatch = static_cast<int32_t>(microbatch);
    const ChunkDesc &chunk = stage_.chunks[op.chunk / pp_size_];
    const bool first = op.chunk == 0, last = op.chunk == num_chunks_ - 1;
    const int32_t *mb_ids = ids + microbatch * tokens_per_microbatch;
    const int32_t *mb_labels = labels + microbatch * tokens_per_microbatch;
    reclaim_sends(i, pp); // their buffers may serve this op
    Slots &s = slots(op.chunk, op.microbatch);
    const int64_t in_bytes = chunk.input_numel * chunk.element_bytes,
                  out_bytes = chunk.output_numel * chunk.element_bytes;
    constexpr int64_t kWord = sizeof(float); // what pp.isend / irecv count
    switch (op.kind) {
    case PipeOpKind::Forward: {
      s.stash = pool_.take(chunk.stash_bytes, MemoryCategory::Activations);
      if (!last) // sent to the next stage
        s.output = pool_.take(out_bytes, MemoryCategory::Communication);
      const float loss = chunk.forward(
          plain.for_microbatch(microbatch), params, arena_.as<char>(), mb_ids, mb_labels,
          first ? nullptr : s.input.as<const float>(),
          last ? nullptr : s.output.as<float>(), s.stash.as<char>());
      if (last) {
        result.loss_sum += loss;
        result.loss_count += 1;
      }
      pool_.give(std::move(s.input)); // the backward reads the stash, not the input
      result.peak_stash = std::max(result.peak_stash, ++live);
      break;
    }
    case PipeOpKind::Backward: {
      if (!first)
        s.input_grad = pool_.take(in_bytes, MemoryCategory::Communication); // sent back
      chunk.backward((last_round && final_backward_[static_cast<size_t>(i)] ? ctx : plain).for_microbatch(microbatch),
                     params,
                     grads, arena_.as<char>(),
                     mb_ids, mb_labels, dloss, s.stash.as<char>(),
                     last ? nullptr : s.output_grad.as<const float>(),
                     first ? nullptr : s.input_grad.as<float>());
      pool_.give(std::move(s.stash));
      pool_.give(std::move(s.output_grad));
      --live;
      break;
    }
    case PipeOpKind::SendActivation:
    case PipeOpKind::SendGrad: {
      const bool act = op.kind == PipeOpKind::SendActivation;
      DeviceBuffer &buffer = act ? s.output : s.input_grad;
      PendingSend send;
      send.request = pp.isend(buffer.as<const float>(), (act ? out_bytes : in_bytes) / kWord, op.peer,
                              act ? p2p_tag::kPipelineActivation : p2p_tag::kPipelineGrad);
      send.buffer = std::move(buffer);
      send.reclaim_before = reclaim_[static_cast<size_t>(i)];
      sends_.push_back(std::move(send));
      break;
    }
    case PipeOpKind::RecvActivation:
    case PipeOpKind::RecvGrad: {
      const bool act = op.kind == PipeOpKind::RecvActivation;
      DeviceBuffer &buffer = act ? s.input : s.output_grad;
      buffer = pool_.take(act ? in_bytes : out_bytes, MemoryCategory::Communication);
      std::unique_ptr<Request> r =
          pp.irecv(buffer.as<float>(), (act ? in_bytes : out_bytes) / kWord, op.peer,
                   act ? p2p_tag::kPipelineActivation : p2p_tag::kPipelineGrad);
      pp.wait(*r);
      break;
    }
    default: // the closing ops run once after every round (run_closing_ops)
      break;
    }
  }
  const char *phase = activity.phase;
  activity = CommActivity{activity.iteration, "completing the schedule's last sends"};
  reclaim_sends(steps_, pp); // nothing of this round is still in flight
  activity.phase = phase;
}

PipelineIterationResult PipelineExecutor::run_forward_only(const StepContext &ctx, float *const *params,
                                                           const int32_t *ids, const int32_t *labels,
                                                           int64_t tokens_per_microbatch, int64_t microbatches) {
  const int64_t count = rounds(microbatches) * num_microbatches_;
  Communicator &pp = *ctx.pp;
  CommActivity &activity = comm_activity();
  PipelineIterationResult result;
  StepContext plain = ctx;
  plain.grad_sync = nullptr;
  plain.metrics = result.metric_sums.data();
  plain.expert_load = nullptr; // the load histogram counts training's microbatches
  constexpr int64_t kWord = sizeof(float);
  for (int64_t m = 0; m < count; ++m) {
    const int32_t *mb_ids = ids + m * tokens_per_microbatch, *mb_labels = labels + m * tokens_per_microbatch;
    for (int64_t c = pp_rank_; c < num_chunks_; c += pp_size_) {
      const ChunkDesc &chunk = stage_.chunks[c / pp_size_];
      const bool first = c == 0, last = c == num_chunks_ - 1;
      activity.op = "evaluation forward";
      activity.chunk = static_cast<int32_t>(c);
      activity.microbatch = static_cast<int32_t>(m);
      DeviceBuffer input, output;
      if (!first) { // from the stage of chunk c - 1, which ran it just before
        input = pool_.take(chunk.input_numel * chunk.element_bytes, MemoryCategory::Communication);
        std::unique_ptr<Request> r = pp.irecv(input.as<float>(), chunk.input_numel * chunk.element_bytes / kWord,
                                              static_cast<int>((c - 1) % pp_size_), p2p_tag::kPipelineActivation);
        pp.wait(*r);
      }
      DeviceBuffer stash = pool_.take(chunk.stash_bytes, MemoryCategory::Activations);
      if (!last)
        output = pool_.take(chunk.output_numel * chunk.element_bytes, MemoryCategory::Communication);
      const float loss = chunk.forward(plain, params, arena_.as<char>(), mb_ids, mb_labels,
                                       first ? nullptr : input.as<const float>(),
                                       last ? nullptr : output.as<float>(), stash.as<char>());
      if (last) {
        result.loss_sum += loss;
        result.loss_count += 1;
      } else { // the next chunk's stage receives it before anything else
        std::unique_ptr<Request> r = pp.isend(output.as<const float>(), chunk.output_numel * chunk.element_bytes / kWord,
                                              static_cast<int>((c + 1) % pp_size_), p2p_tag::kPipelineActivation);
        pp.wait(*r);
      }
      pool_.give(std::move(input));
      pool_.give(std::move(output));
      pool_.give(std::move(stash));
    }
  }
  return result;
}

} // namespace megart
