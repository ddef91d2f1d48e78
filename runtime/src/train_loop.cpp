#include "megart/train_loop.h"

#include "megart/aligned_buffer.h"
#include "megart/grad_norm.h"
#include "megart/grad_sync.h"
#include "megart/optimizer.h"
#include "megart/train_checkpoint.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

namespace megart {

double model_flops_per_iteration(const ProgramDesc &p, int64_t global_batch_size) {
  if (!p.model_family || std::strcmp(p.model_family, "gpt2") != 0 || p.num_layers <= 0 ||
      p.hidden_size <= 0)
    return -1;
  const double B = static_cast<double>(global_batch_size), s = static_cast<double>(p.seq_length),
               l = static_cast<double>(p.num_layers), h = static_cast<double>(p.hidden_size),
               V = static_cast<double>(p.vocab_size);
  return 72.0 * B * s * l * h * h * (1.0 + s / (6.0 * h) + V / (16.0 * l * h));
}

namespace {

// What the log line reports: sums over the iterations since the last log line.
struct LogWindow {
  int64_t iterations = 0;
  double seconds = 0;
  double loss_sum = 0;
  int64_t loss_count = 0;
  int64_t skipped = 0;
  int64_t nan = 0;
};

class Optimizer {
public:
  Optimizer(const TrainFlags &f, ParamStore &store, Communicator &tp)
      : store_(store), tp_(tp), schedule_{f.lr_decay_style, f.lr, f.min_lr, f.lr_warmup_iters,
                                          f.lr_decay_iters},
        config_{f.adam_beta1, f.adam_beta2, f.adam_eps, f.weight_decay},
        clip_(static_cast<float>(f.clip_grad)) {
    for (int64_t i = 0; i < store.size(); ++i)
      grads_.emplace_back(store.grad(i), store.numel(i));
  }

  double lr_for_iteration(int64_t k) const { return schedule_.lr_for_iteration(k); }

  // The whole model's norm before clipping (the same on every tp rank, so every rank makes the
  // same decision); clips this rank's gradients in place. A non-finite norm is left alone: the
  // caller skips the step.
  double clip() {
    const double norm = model_grad_norm(store_, tp_);
    if (!std::isfinite(norm))
      return norm;
    const float coeff = clip_coefficient(norm, clip_);
    if (coeff < 1.0f)
      scale_grads(grads_, coeff);
    return norm;
  }

  void step(double lr) {
    ++steps_;
    AdamWConfig no_decay = config_;
    no_decay.weight_decay = 0;
    const AdamWScalars with_wd = adamw_scalars(lr, config_, steps_);
    const AdamWScalars without_wd = adamw_scalars(lr, no_decay, steps_);
    for (int64_t i = 0; i < store_.size(); ++i)
      adamw_update(store_.desc(i).weight_decay ? with_wd : without_wd, store_.param(i),
                   store_.grad(i), store_.exp_avg(i), store_.exp_avg_sq(i), store_.numel(i));
  }

  int64_t steps() const { return steps_; }

private:
  ParamStore &store_;
  Communicator &tp_;
  LrSchedule schedule_;
  AdamWConfig config_;
  float clip_;
  std::vector<std::pair<float *, int64_t>> grads_;
  int64_t steps_ = 0;
};

} // namespace

TrainResult run_train_loop(const ProgramDesc &program, const TrainFlags &f, ParamStore &store,
                           TrainData &data, const ProcessGrid &grid, MetricsFile *metrics,
                           std::ostream &out) {
  using Clock = std::chrono::steady_clock;
  const int64_t b = program.micro_batch_size, s = program.seq_length;
  const int64_t B = f.global_batch_size, dp = grid.shape().dp;
  const int64_t per_rank = B / dp, num_micro = per_rank / b; // resolve_train_flags checked B
  // Each microbatch's mean loss is weighted 1/(all microbatches of all dp ranks): after the SUM
  // over dp the gradients are the average over the global batch, as on one rank.
  const float dloss = 1.0f / static_cast<float>(num_micro * dp);
  const double flops = model_flops_per_iteration(program, B);
  const bool saves = grid.coord().dp == 0 && grid.coord().pp == 0; // one replica writes
  const double world = static_cast<double>(grid.world_size());       // per-GPU throughput

  // One workspace for every microbatch; the compiler's memory plan places tensors inside it.
  AlignedBuffer<char> arena(static_cast<size_t>(program.arena_bytes));
  AlignedBuffer<int32_t> ids(static_cast<size_t>(b * s)), labels(static_cast<size_t>(b * s));
  Optimizer optimizer(f, store, grid.tp());
  data.set_order(f.shuffle, static_cast<uint64_t>(f.seed)); // the same order on every rank

  const StepContext ctx = grid.step_context();
  TrainResult result;
  LogWindow window;
  for (int64_t k = 1; k <= f.train_iters; ++k) {
    const auto start = Clock::now();
    store.zero_grads();
    const int64_t first = (k - 1) * B + grid.coord().dp * per_rank;
    double loss_sum = 0; // double: many microbatches add up without drift
    for (int64_t m = 0; m < num_micro; ++m) {
      data.fill(first + m * b, b, ids.data(), labels.data());
      loss_sum += program.step(ctx, store.param_table(), store.grad_table(), arena.data(),
                               ids.data(), labels.data(), dloss);
    }
    double loss = loss_sum / static_cast<double>(num_micro);
    if (dp > 1) {
      if (program.sync_gradients)
        program.sync_gradients(ctx, store.grad_table());
      else
        all_reduce_in_buckets(grid.dp(), store.flat_grads(), store.flat_grads_numel(),
                              f.ddp_bucket_size);
      grid.dp().all_reduce_sum(&loss, 1);
      loss /= static_cast<double>(dp);
    }
    const double norm = optimizer.clip();
    const double lr = optimizer.lr_for_iteration(k);
    const bool finite = std::isfinite(norm);
    if (finite)
      optimizer.step(lr);
    // Floor: a clock tick of 0 would make the throughput infinite.
    const double seconds =
        std::max(std::chrono::duration<double>(Clock::now() - start).count(), 1e-9);

    IterationMetrics it;
    it.iteration = k;
    it.consumed_samples = k * B;
    it.global_batch_size = B;
    it.ms_per_iter = seconds * 1e3;
    it.tokens_per_s = static_cast<double>(B * s) / seconds;
    it.lr = lr;
    it.lm_loss = loss;
    it.grad_norm = norm;
    it.tflops_per_gpu = flops > 0 ? flops / seconds / 1e12 / world : -1;
    it.skipped_iterations = finite ? 0 : 1;
    it.nan_iterations = finite && std::isfinite(loss) ? 0 : 1;
    if (metrics)
      metrics->append(it);

    window.iterations += 1;
    window.seconds += seconds;
    if (std::isfinite(loss)) {
      window.loss_sum += loss;
      window.loss_count += 1;
    }
    window.skipped += it.skipped_iterations;
    window.nan += it.nan_iterations;
    if (k % f.log_interval == 0 || k == f.train_iters) {
      IterationMetrics line = it;
      const double avg = window.seconds / static_cast<double>(window.iterations);
      line.ms_per_iter = avg * 1e3;
      line.tokens_per_s = static_cast<double>(B * s) / avg;
      line.tflops_per_gpu = flops > 0 ? flops / avg / 1e12 / world : -1;
      line.lm_loss = window.loss_count ? window.loss_sum / static_cast<double>(window.loss_count)
                                       : std::numeric_limits<double>::quiet_NaN();
      line.skipped_iterations = window.skipped;
      line.nan_iterations = window.nan;
      out << format_log_line(line, f.train_iters) << std::endl;
      window = LogWindow{};
    }

    if (saves && !f.save.empty() &&
        ((f.save_interval > 0 && k % f.save_interval == 0) || k == f.train_iters)) {
      const std::string path = save_checkpoint(f.save, k, store, grid.tp());
      out << "saved checkpoint at iteration " << k << ": " << path << std::endl;
    }
    result.iterations = k;
    result.skipped_iterations += it.skipped_iterations;
    result.final_loss = loss;
  }
  result.optimizer_steps = optimizer.steps();
  return result;
}

} // namespace megart
