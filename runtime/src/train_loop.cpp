#include "megart/train_loop.h"
#include "megart/tensorboard.h"

#include "megart/aligned_buffer.h"
#include "megart/checkpoint_contents.h"
#include "megart/closing_actions.h"
#include "megart/error.h"
#include "megart/exit_signal.h"
#include "megart/grad_norm.h"
#include "megart/grad_sync.h"
#include "megart/loss_scaler.h"
#include "megart/memory_report.h"
#include "megart/optimizer.h"
#include "megart/pipeline_executor.h"
#include "megart/resident_memory.h"
#include "megart/train_checkpoint.h"
#include "megart/train_pipeline.h"

#include <array>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

namespace megart {

double model_flops_per_iteration(const ProgramDesc &p, int64_t global_batch_size) {
  if (!(p.model_flops_per_sample > 0))
    return -1;
  return static_cast<double>(global_batch_size) * p.model_flops_per_sample;
}

namespace {

// What the log line reports: sums over the iterations since the last log line.
struct LogWindow {
  int64_t iterations = 0;
  double seconds = 0;
  double loss_sum = 0;
  int64_t loss_count = 0;
  std::array<double, kNumMetrics> metric_sums{}; // over the same iterations as loss_sum
  int64_t skipped = 0;
  int64_t nan = 0;
};

// With the distributed optimizer (store.sharded()) it works on this rank's shard pieces of the
// reduce-scattered gradients: unscaling, the norm (model_grad_norm), clipping and AdamW.
class Optimizer {
public:
  // `pp`, `counted` and `ep` are model_grad_norm's.
  Optimizer(const TrainFlags &f, int64_t steps_taken, ParamStore &store, Communicator &tp, Communicator &pp,
            const std::vector<char> &counted, Communicator &ep)
      : store_(store), device_(store.device()), tp_(tp), pp_(pp), counted_(counted), ep_(ep),
        sharded_(store.sharded()),
        schedule_(lr_schedule(f)),
        config_{f.adam_beta1, f.adam_beta2, f.adam_eps, f.weight_decay},
        clip_(static_cast<float>(f.clip_grad)), steps_(steps_taken) {
    if (sharded_) {
      grads_ = sharded_->shard_grads(); // the pieces never move
      return;
    }
    for (int64_t i = 0; i < store.size(); ++i) {
      grads_.emplace_back(store.grad(i), store.numel(i));
      tensors_.push_back({store.param(i), store.grad(i), store.exp_avg(i), store.exp_avg_sq(i),
                          store.numel(i), store.desc(i).weight_decay});
    }
  }

  // The rate of the next update: the schedule after the updates made so far.
  double lr_after_steps() const { return schedule_.lr_at(steps_); }

  // Undoes the loss scale on this rank's gradients (inf and NaN stay so: the norm sees them).
  void unscale(double loss_scale) { device_.scale(grads_, static_cast<float>(1.0 / loss_scale)); }

  // The whole model's norm before clipping (the same on every tp rank, so every rank makes the
  // same decision); clips this rank's gradients in place. A non-finite norm is left alone: the
  // caller skips the step.
  double clip() {
    const double norm = model_grad_norm(store_, tp_, pp_, counted_, &ep_);
    if (!std::isfinite(norm))
      return norm;
    const float coeff = clip_coefficient(norm, clip_);
    if (coeff < 1.0f)
      device_.scale(grads_, coeff);
    return norm;
  }

  void step(double lr) {
    ++steps_;
    AdamWConfig no_decay = config_;
    no_decay.weight_decay = 0;
    if (sharded_)
      sharded_->step(adamw_scalars(lr, config_, steps_), adamw_scalars(lr, no_decay, steps_));
    else
      device_.adamw(tensors_, adamw_scalars(lr, config_, steps_), adamw_scalars(lr, no_decay, steps_));
  }

  int64_t steps() const { return steps_; }

private:
  ParamStore &store_;
  Device &device_;
  Communicator &tp_;
  Communicator &pp_;
  const std::vector<char> &counted_;
  Communicator &ep_;
  DistributedOptimizerState *sharded_;
  LrSchedule schedule_;
  AdamWConfig config_;
  float clip_;
  int64_t steps_; // updates made, by earlier runs too: AdamW's step and the schedule's
  std::vector<std::pair<float *, int64_t>> grads_;
  std::vector<AdamWTensor> tensors_; // the store's arrays never move
};

std::string format_number(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

// Why the run stops after iteration k before --train-iters, or "" to go on. Every rank gets the
// same answer: a signal or the clock seen by one rank is shared with all (one small all-reduce
// per iteration, only when those flags are given).
std::string stop_early(const TrainFlags &f, int64_t k, std::chrono::steady_clock::time_point since,
                       const ProcessGrid &grid) {
  if (f.exit_interval > 0 && k % f.exit_interval == 0)
    return "--exit-interval " + std::to_string(f.exit_interval);
  if (!f.exit_signal_handler && f.exit_duration_in_mins <= 0)
    return "";
  const double minutes =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count() / 60;
  // 2: a signal (said first), 1: the duration.
  float why = f.exit_signal_handler && exit_signal_received() ? 2.0f
              : f.exit_duration_in_mins > 0 && minutes >= f.exit_duration_in_mins ? 1.0f
                                                                                 : 0.0f;
  if (grid.world_size() > 1)
    grid.world().all_reduce_max(&why, 1);
  if (why == 2.0f)
    return "SIGTERM received (--exit-signal-handler)";
  if (why == 1.0f)
    return "--exit-duration-in-mins " + format_number(f.exit_duration_in_mins) + " reached";
  return "";
}

// How long ranks wait for a checkpoint save before giving up: a week (a save never takes that
// long; a dead writer ends the job through MPI long before).
constexpr double kSaveWaitSeconds = 7 * 24 * 3600.0;

// This rank's stage (pp = 1: the one), its executor and its tied weights.
struct Pipeline {
  Pipeline(const ProgramDesc &program, const ParamStore &store, const ProcessGrid &grid)
      : stage(program.stages[grid.coord().pp]),
        executor(program.stages, grid.coord().pp, grid.shape().pp, program.virtual_pipeline_size,
                 program.num_microbatches, store.device()),
        tied(program, store, grid) {}
  const PipelineStageDesc &stage;
  PipelineExecutor executor;
  TiedGradients tied;
};

// Names the iteration in communication timeouts while the loop runs; clears it after.
struct ActivityScope {
  ActivityScope() { comm_activity() = CommActivity{}; }
  ~ActivityScope() { comm_activity() = CommActivity{}; }
  void phase(const char *what) { comm_activity().phase = what; }
};

} // namespace

TrainResult run_train_loop(const ProgramDesc &program, const TrainFlags &f, const TrainState &start,
                           ParamStore &store, TrainData &data, ProcessGrid &grid,
                           MetricsFile *metrics, std::ostream &out, int64_t resident_at_start,
                           TensorBoardWriter *tensorboard, TrainData *valid, TrainData *test,
                           const ParamStore *frozen) {
  using Clock = std::chrono::steady_clock;
  const int64_t b = program.micro_batch_size, s = program.seq_length;
  const int64_t B = f.global_batch_size, dp = grid.shape().dp;
  const int64_t per_rank = B / dp, num_micro = per_rank / b; // resolve_train_flags checked B
  // Each microbatch's mean loss is weighted 1/(all microbatches of all dp ranks): after the SUM
  // over dp the gradients are the average over the global batch, as on one rank.
  const float dloss = 1.0f / static_cast<float>(num_micro * dp);
  const double flops = model_flops_per_iteration(program, B);
  // Reports per pp stage (stash peaks, memory by stage) where there are several.
  const bool several_stages = grid.shape().pp > 1;
  // One replica writes; with pipeline parallelism every stage of it contributes its tensors, with
  // expert parallelism every ep rank of its group its experts.
  const bool saves = grid.coord().dp < grid.shape().ep;
  const double world = static_cast<double>(grid.world_size());       // per-GPU throughput
  const double peak = f.peak_tflops > 0 ? f.peak_tflops : store.device().peak_tflops();
  auto mfu = [&](double tflops) { return tflops > 0 && peak > 0 ? tflops / peak : -1.0; };
  ActivityScope activity;

  // The executor of the compiled schedule: its own workspace and buffers, every microbatch of the
  // iteration in rounds of the schedule's.
  activity.phase("building the tied-weight groups");
  Pipeline pipe(program, store, grid);
  Device &device = store.device();
  // The data loader fills host buffers with every microbatch of the iteration; the compiled code
  // reads the device's copies, uploaded once per iteration (each upload waits for the device).
  const int64_t tokens_per_micro = b * s, tokens = num_micro * tokens_per_micro;
  const size_t token_bytes = static_cast<size_t>(tokens) * sizeof(int32_t);
  AlignedBuffer<int32_t> ids(static_cast<size_t>(tokens)), labels(static_cast<size_t>(tokens));
  DeviceBuffer device_ids(device, token_bytes, MemoryCategory::Data),
      device_labels(device, token_bytes, MemoryCategory::Data);
  Optimizer optimizer(f, start.optimizer_steps, store, grid.tp(), grid.pp(), pipe.tied.norm_counted(), grid.ep());
  const SyncFn compiled_sync = pipe.stage.sync_gradients;
  // The rank's compiled table: its schedule's steps, then what closes the iteration.
  const PipeOp *const table = pipe.stage.ops;
  const int64_t table_ops = pipe.stage.num_ops;
  // The distributed optimizer (a flat layout): the sync reduce-scatters, the optimizer updates
  // this rank's shards, and the compiled gather_params all-gathers the updated parameters (the
  // validator made sure the stage has both where they run).
  DistributedOptimizerState *const sharded = store.sharded();
  const GatherParamsFn compiled_gather = pipe.stage.gather_params;
  data.set_order(start.shuffle, start.seed); // the same order on every rank
  for (TrainData *eval : {valid, test})
    if (eval)
      eval->set_order(start.shuffle, start.seed);
  // fp16 only. Every rank sees the same norm, so every rank's scaler takes the same path.
  const std::unique_ptr<LossScaler> scaler = make_loss_scaler(f);
  if (scaler && start.loss_scaler)
    scaler->restore(*start.loss_scaler);
  const CheckpointGroup checkpoint_group{grid.tp(), &grid.pp(), &program, &grid.ep()};
  // prepare_training checked that the tokenizer's files are there.
  const CheckpointOptions checkpoint_options =
      checkpoint_contents(program, f.keep_latest_k,
                          !f.save.empty() && saves && data.tokenizer() ? &*data.tokenizer() : nullptr,
                          start.base_weights);
  const std::string args_json = format_train_args(f), plan_json = format_program_plan(program);

  StepContext ctx = grid.step_context();
  if (frozen) {
    ctx.frozen = frozen->param_table();
    ctx.frozen_nf4 = frozen->nf4_table();
  }
  // ZeRO-2/3: the compiled backward reduce-scatters each microbatch's buckets into these shards.
  const bool grads_in_backward = sharded && sharded->grads_sharded();
  if (grads_in_backward)
    ctx.grad_shards = store.flat_grads();
  // ZeRO-3: the compiled functions gather the parameters they use from these shards.
  const bool params_sharded = store.params_sharded();
  if (params_sharded)
    ctx.param_shards = store.flat_params();
  // --overlap-param-gather (ZeRO-1/2): the step's all-gathers run on into the next forward.
  const bool gathers_overlap = sharded && !params_sharded && program.overlap_param_gather && dp > 1;
  if (gathers_overlap)
    ctx.param_gathers = sharded;
  // --overlap-grad-reduce: the last microbatch (a chunk's last backward) starts the dp buckets;
  // otherwise the compiled sync_gradients starts them after the last microbatch.
  const bool overlapped = dp > 1 && program.overlap_grad_reduce;
  GradSync grad_sync(grid.dp(), device);
  // The distributed optimizer overlapped: the step starts each bucket's reduce-scatter.
  if (sharded && overlapped)
    grad_sync.shard_over(grid.dp_shard(), grid.dp_replicate().size() > 1 ? &grid.dp_replicate() : nullptr);
  if (dp > 1 && f.grad_reduce_in_bf16)
    grad_sync.reduce_in_bf16(store.flat_grads(), store.flat_grads_numel());
  // A mixture of experts' load histogram: this rank's training choices per (layer, expert), summed
  // over the iteration's microbatches, then over pp (each stage its layers) and dp.
  std::vector<int64_t> expert_load(static_cast<size_t>(program.expert_load_layers * program.expert_load_experts));
  if (!expert_load.empty())
    ctx.expert_load = expert_load.data();
  StepContext sync_ctx = ctx;
  sync_ctx.grad_sync = &grad_sync;
  // The mean loss of the first --eval-iters global batches of `eval_data`: every chunk's forward
  // down the pipeline, no backward; each dp rank its share of each batch, as in training.
  auto evaluate = [&](TrainData &eval_data) {
    activity.phase("evaluation");
    StepContext eval_ctx = ctx;
    eval_ctx.dropout = DropoutDraw{}; // off: dropout is the identity in evaluation
    double total = 0;
    for (int64_t e = 0; e < f.eval_iters; ++e) {
      eval_data.fill(e * B + grid.coord().dp * per_rank, num_micro * b, ids.data(), labels.data());
      device.copy_from_host(device_ids.data(), ids.data(), token_bytes);
      device.copy_from_host(device_labels.data(), labels.data(), token_bytes);
      const double loss_sum = pipe.executor
                                  .run_forward_only(eval_ctx, store.param_table(), device_ids.as<int32_t>(),
                                                    device_labels.as<int32_t>(), tokens_per_micro, num_micro)
                                  .loss_sum; // only the last stage has the losses; 0 elsewhere
      double loss = loss_sum / static_cast<double>(num_micro);
      grid.pp().all_reduce_sum(&loss, 1);
      if (dp > 1) {
        grid.dp().all_reduce_sum(&loss, 1);
        loss /= static_cast<double>(dp);
      }
      total += loss;
    }
    return total / static_cast<double>(f.eval_iters);
  };
  TrainResult result;
  if (f.skip_train) { // the loaded weights, evaluated
    for (auto [eval, what] : {std::pair{valid, "validation"}, std::pair{test, "test"}})
      if (eval)
        out << format_eval_block(what, "iteration " + std::to_string(start.iteration), evaluate(*eval))
            << std::endl;
    result.iterations = start.iteration;
    result.optimizer_steps = start.optimizer_steps;
    return result;
  }
  LogWindow window;
  const int64_t skipped_before = start.skipped_iterations;
  const Clock::time_point trained_since = Clock::now();
  for (int64_t k = start.iteration + 1; k <= f.train_iters; ++k) {
    const auto started = Clock::now();
    comm_activity().iteration = k;
    grid.reset_sent_bytes();
    store.zero_grads();
    // resolve_train_flags and require_samples bounded every sample index.
    const int64_t consumed_before = start.consumed_samples + (k - start.iteration - 1) * B;
    const int64_t first = consumed_before + grid.coord().dp * per_rank;
    // The backward pass starts from dloss x scale (exact for a power-of-2 scale); the loss the
    // step returns is the forward's, unscaled.
    const double loss_scale = scaler ? scaler->scale() : 1.0;
    const float scaled_dloss = static_cast<float>(static_cast<double>(dloss) * loss_scale);
    data.fill(first, num_micro * b, ids.data(), labels.data());
    std::fill(expert_load.begin(), expert_load.end(), 0);
    for (StepContext *c : {&ctx, &sync_ctx}) { // this iteration's dropout masks (megart/dropout.h)
      c->dropout.on = true;
      c->dropout.iteration_key = dropout_iteration_key(static_cast<uint64_t>(f.seed), k);
      c->dropout.rank_first_sample = grid.coord().dp * per_rank;
      c->dropout.micro_batch_size = b;
    }
    device.copy_from_host(device_ids.data(), ids.data(), token_bytes);
    device.copy_from_host(device_labels.data(), labels.data(), token_bytes);
    activity.phase("pipeline schedule"); // it interleaves the microbatches
    // The losses summed in double (many microbatches add up without drift); only the last stage
    // has them, 0 elsewhere.
    const PipelineIterationResult r =
        pipe.executor.run(overlapped ? sync_ctx : ctx, store.param_table(), store.grad_table(),
                          device_ids.as<int32_t>(), device_labels.as<int32_t>(), tokens_per_micro, scaled_dloss,
                          num_micro);
    // The loss and the reported metrics: the microbatches' means, summed over pp and averaged over
    // dp together (one reduction each), the load histogram's counts summed in the same reductions
    // (exact: integers in doubles).
    constexpr int64_t kMeans = 1 + kNumMetrics;
    std::vector<double> means(static_cast<size_t>(kMeans) + expert_load.size());
    means[0] = r.loss_sum;
    std::copy(r.metric_sums.begin(), r.metric_sums.end(), means.begin() + 1);
    for (int64_t i = 0; i < kMeans; ++i)
      means[static_cast<size_t>(i)] /= static_cast<double>(num_micro);
    std::copy(expert_load.begin(), expert_load.end(), means.begin() + kMeans);
    const int64_t reduced =
        !expert_load.empty() ? static_cast<int64_t>(means.size()) : program.reported_metrics ? kMeans : 1;
    double &loss = means[0];
    const double *reported = means.data() + 1;
    StashPeaks peaks;
    double norm = 0, lr = 0;
    bool finite = false;
    ClosingActions closing;
    closing.grad_sync = [&] {
      if (dp > 1 && sharded && !grads_in_backward) {
        activity.phase("data-parallel gradient reduce-scatter");
        if (!overlapped)
          compiled_sync(sync_ctx, store.grad_table());
        const int64_t started = grad_sync.finish();
        if (overlapped ? started == 0 : started != 0)
          throw Error(overlapped ? "compiled program: built with --overlap-grad-reduce and the distributed optimizer, "
                                   "but its step started no gradient reduce-scatter (regenerate the program with "
                                   "megac compile)"
                                 : "compiled program: it has a flat_layout (the distributed optimizer), but its "
                                   "sync_gradients started all-reduce buckets instead of reduce-scattering them "
                                   "(regenerate the program with megac compile)");
      } else if (dp > 1 && !sharded) {
        activity.phase("data-parallel gradient sync");
        if (!overlapped)
          compiled_sync(sync_ctx, store.grad_table());
        if (grad_sync.finish() == 0)
          throw Error(overlapped ? "compiled program: built with --overlap-grad-reduce, but its step "
                                   "started no gradient bucket (regenerate the program with megac compile)"
                                 : "compiled program: its sync_gradients started no gradient bucket "
                                   "(regenerate the program with megac compile)");
      }
    };
    // Where the table puts it: before the dp sync (the plain distributed optimizer: whole
    // gradients, which its reduce-scatter would leave in different shards on the two stages),
    // after it on the shards it left (ZeRO-2/3, overlapped ZeRO-1), else after it as Megatron does.
    closing.tied_sum = [&](bool shards) {
      activity.phase("tied-weight gradient sync");
      pipe.tied.sync(store, shards);
    };
    closing.optimizer_step = [&] {
      // The loss and the stash peaks are reduced here, after the gradient sums and before any
      // parameter gather starts: nothing is in flight on the dp or pp groups.
      activity.phase("loss sum over the pipeline");
      grid.pp().all_reduce_sum(means.data(), reduced);
      if (dp > 1) {
        activity.phase("loss average over data parallel ranks");
        grid.dp().all_reduce_sum(means.data(), reduced);
        for (int64_t i = 0; i < kMeans; ++i)
          means[static_cast<size_t>(i)] /= static_cast<double>(dp);
      }
      // The schedule is the same every iteration: the first one reports its stash peaks.
      if (several_stages && k == start.iteration + 1) {
        activity.phase("stash peak report");
        peaks = gather_stash_peaks(program, r.peak_stash, grid.pp());
      }
      // Unscaled after every sum (dp, tied copies): the norm, clipping and AdamW see true gradients.
      if (scaler)
        optimizer.unscale(loss_scale);
      activity.phase("gradient norm");
      norm = optimizer.clip();
      // Megatron steps the schedule only after an update: skipped iterations keep the rate.
      lr = optimizer.lr_after_steps();
      finite = std::isfinite(norm);
      if (finite)
        optimizer.step(lr);
      return finite;
    };
    closing.param_gather = [&] {
      if (gathers_overlap) {
        sharded->start_all_gather_params(); // the next forward waits for each bucket
        return;
      }
      activity.phase("data-parallel parameter all-gather");
      compiled_gather(ctx, store.param_table());
    };
    run_closing_ops(table, table_ops, closing);
    if (scaler)
      scaler->update(finite);
    device.synchronize(); // the iteration's time includes its queued device work
    // Floor: a clock tick of 0 would make the throughput infinite.
    const double seconds =
        std::max(std::chrono::duration<double>(Clock::now() - started).count(), 1e-9);
    // The first iteration has allocated everything the run holds (the pipeline's buffers come
    // back to its pool): report the high-water marks once, outside the timed iteration.
    std::vector<MemoryUsage> memory;
    int64_t resident_growth = -1;
    if (k == start.iteration + 1) {
      const int64_t resident = resident_bytes();
      if (resident >= 0 && resident_at_start >= 0)
        resident_growth = resident - resident_at_start;
      activity.phase("memory report");
      memory = gather_memory_usage(memory_tracker().usage(), grid.pp());
    }

    // What each stage sent over its axes (read before the exchange over pp that collects them).
    activity.phase("communication report");
    const std::vector<CommunicationBytes> sent = gather_sent_bytes(grid.sent_bytes(), grid.pp());

    IterationMetrics it;
    it.communication = sent;
    it.iteration = k;
    it.consumed_samples = consumed_before + B;
    it.global_batch_size = B;
    it.ms_per_iter = seconds * 1e3;
    it.tokens_per_s = static_cast<double>(B * s) / seconds;
    it.lr = lr;
    it.lm_loss = loss;
    for (int64_t m = 0; m < kNumMetrics; ++m)
      if (program.reported_metrics & (1u << m))
        it.reported.push_back({metric_name(m), reported[m]});
    for (int64_t l = 0; l < program.expert_load_layers; ++l) {
      const double *row = means.data() + kMeans + l * program.expert_load_experts;
      std::vector<int64_t> &counts = it.tokens_per_expert.emplace_back();
      for (int64_t e = 0; e < program.expert_load_experts; ++e)
        counts.push_back(static_cast<int64_t>(row[e]));
    }
    it.grad_norm = finite ? norm : -1; // a skipped update has no norm to log (Megatron: None)
    it.loss_scale = scaler ? scaler->scale() : -1; // after the update, as Megatron logs it
    it.tflops_per_gpu = flops > 0 ? flops / seconds / 1e12 / world : -1;
    it.mfu = mfu(it.tflops_per_gpu);
    it.skipped_iterations = finite ? 0 : 1;
    // Megatron's count: skipped iterations whose loss itself is not finite.
    it.nan_iterations = !finite && !std::isfinite(loss) ? 1 : 0;
    it.pipeline_stash_peak_measured = peaks.measured;
    it.pipeline_stash_peak_predicted = peaks.predicted;
    it.memory = memory;
    it.resident_growth_bytes = resident_growth;
    const bool at_end = k == f.train_iters; // Megatron evaluates again after training
    if (valid && (k % f.eval_interval == 0 || at_end))
      it.valid_lm_loss = evaluate(*valid);
    if (test && at_end)
      it.test_lm_loss = evaluate(*test);
    if (metrics)
      metrics->append(it);
    if (tensorboard && (it.iteration % f.tensorboard_log_interval == 0 || !it.memory.empty()))
      tensorboard->iteration(it);

    window.iterations += 1;
    window.seconds += seconds;
    if (finite && std::isfinite(loss)) { // Megatron averages the updated iterations' losses
      window.loss_sum += loss;
      window.loss_count += 1;
      for (int64_t m = 0; m < kNumMetrics; ++m)
        window.metric_sums[static_cast<size_t>(m)] += reported[m];
    }
    window.skipped += it.skipped_iterations;
    window.nan += it.nan_iterations;
    if (k % f.log_interval == 0 || k == f.train_iters) {
      IterationMetrics line = it;
      const double avg = window.seconds / static_cast<double>(window.iterations);
      line.ms_per_iter = avg * 1e3;
      line.tokens_per_s = static_cast<double>(B * s) / avg;
      line.tflops_per_gpu = flops > 0 ? flops / avg / 1e12 / world : -1;
      line.mfu = mfu(line.tflops_per_gpu);
      line.lm_loss = window.loss_count ? window.loss_sum / static_cast<double>(window.loss_count)
                                       : std::numeric_limits<double>::quiet_NaN();
      line.reported.clear();
      for (int64_t m = 0; m < kNumMetrics; ++m)
        if (program.reported_metrics & (1u << m))
          line.reported.push_back({metric_name(m), window.loss_count ? window.metric_sums[static_cast<size_t>(m)] /
                                                                           static_cast<double>(window.loss_count)
                                                                     : std::numeric_limits<double>::quiet_NaN()});
      line.skipped_iterations = window.skipped;
      line.nan_iterations = window.nan;
      if (k < f.train_iters)
        line.eta_seconds = avg * static_cast<double>(f.train_iters - k);
      out << format_log_line(line, f.train_iters) << std::endl;
      window = LogWindow{};
    }
    if (it.valid_lm_loss)
      out << format_eval_block("validation", "iteration " + std::to_string(k), *it.valid_lm_loss) << std::endl;
    if (it.test_lm_loss)
      out << format_eval_block("test", "the end of training", *it.test_lm_loss) << std::endl;

    if (!peaks.measured.empty()) {
      out << peaks.describe() << std::endl;
      if (!peaks.match())
        out << "warning: pipeline: the measured stash peaks differ from the compiler's "
               "predictions; its activation memory bound is wrong for this schedule"
            << std::endl;
    }
    for (size_t i = 0; i < memory.size(); ++i)
      out << describe_memory(memory[i], several_stages ? "pp stage " + std::to_string(i) : "each rank")
          << (metrics ? " (exact bytes in the metrics file)" : "") << std::endl;
    if (resident_growth >= 0)
      out << "resident memory of global rank 0 grew by " << format_bytes(resident_growth)
          << " since before the training state was allocated" << std::endl;

    result.iterations = k;
    result.skipped_iterations += it.skipped_iterations;
    result.final_loss = loss;
    const std::string exit_reason = k < f.train_iters ? stop_early(f, k, trained_since, grid) : "";
    if (!f.save.empty() && ((f.save_interval > 0 && k % f.save_interval == 0) ||
                            k == f.train_iters || !exit_reason.empty())) {
      // A run that has not updated the weights once has nothing worth saving (every step was
      // skipped: non-finite gradients); the end of the run reports it as a failure.
      if (optimizer.steps() == start.optimizer_steps) {
        out << "not saving at iteration " << k
            << ": no iteration of this run has updated the weights yet" << std::endl;
      } else {
        // The distributed optimizer's moments (with ZeRO-3 the parameters too) are sharded over
        // the shard group: every rank of it gives the writer its shards (temporary whole
        // buffers, freed after the save).
        if (sharded) {
          activity.phase("gathering the optimizer state for the checkpoint");
          if (gathers_overlap) // the weights are saved whole
            sharded->wait_all();
          store.gather_sharded_state();
        }
        if (saves) {
          activity.phase("checkpoint save");
          TrainState state;
          state.iteration = k;
          state.consumed_samples = it.consumed_samples;
          state.optimizer_steps = optimizer.steps();
          state.skipped_iterations = skipped_before + result.skipped_iterations;
          state.seed = start.seed;
          state.shuffle = start.shuffle;
          state.data_num_samples = data.num_samples();
          if (scaler)
            state.loss_scaler = scaler->state();
          state.args_json = args_json;
          state.plan_json = plan_json;
          state.program_summary = program.summary ? program.summary : "";
          state.spec_yaml = program.spec_yaml ? program.spec_yaml : "";
          state.base_weights = start.base_weights;
          state.base_weights_checksums = start.base_weights_checksums;
          state.adapter_config_json = program.adapter_config_json ? program.adapter_config_json : "";
          const std::string folder =
              save_checkpoint(f.save, state, store, checkpoint_group, checkpoint_options);
          out << "saved checkpoint at iteration " << k << ": " << folder << std::endl;
        }
        store.release_gathered_state();
      }
      // However long the one writer takes, the ranks waiting for it (in the save's gathers and
      // in the next iteration's collectives) must not time out: they wait here, untimed.
      if (grid.world_size() > 1) {
        activity.phase("waiting for the checkpoint save");
        grid.set_timeout(kSaveWaitSeconds);
        grid.world().barrier();
        grid.set_timeout(f.distributed_timeout_minutes * 60);
      }
    }
    if (!exit_reason.empty()) {
      out << "exiting at iteration " << k << " of " << f.train_iters << ": " << exit_reason
          << std::endl;
      break;
    }
  }
  if (gathers_overlap) { // the last step's gathers: the weights are whole when the run ends
    activity.phase("data-parallel parameter all-gather");
    sharded->wait_all();
  }
  result.optimizer_steps = optimizer.steps();
  return result;
}

} // namespace megart
