#include "megart/train_loop.h"

#include "megart/aligned_buffer.h"
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
  Optimizer(const TrainFlags &f, ParamStore &store)
      : store_(store), schedule_{f.lr_decay_style, f.lr, f.min_lr, f.lr_warmup_iters,
                                 f.lr_decay_iters},
        config_{f.adam_beta1, f.adam_beta2, f.adam_eps, f.weight_decay},
        clip_(static_cast<float>(f.clip_grad)) {
    for (int64_t i = 0; i < store.size(); ++i)
      grads_.emplace_back(store.grad(i), store.numel(i));
  }

  double lr_for_iteration(int64_t k) const { return schedule_.lr_for_iteration(k); }

  // Norm before clipping; clips in place (clip_grad_norm leaves non-finite norms alone).
  double clip() { return clip_grad_norm(grads_, clip_); }

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
  LrSchedule schedule_;
  AdamWConfig config_;
  float clip_;
  std::vector<std::pair<float *, int64_t>> grads_;
  int64_t steps_ = 0;
};

} // namespace

TrainResult run_train_loop(const ProgramDesc &program, const TrainFlags &f, ParamStore &store,
                           TrainData &data, MetricsFile *metrics, std::ostream &out) {
  using Clock = std::chrono::steady_clock;
  const int64_t b = program.micro_batch_size, s = program.seq_length;
  const int64_t B = f.global_batch_size, num_micro = B / b;
  const float dloss = 1.0f / static_cast<float>(num_micro);
  const double flops = model_flops_per_iteration(program, B);

  // One workspace for every microbatch; the compiler's memory plan places tensors inside it.
  AlignedBuffer<char> arena(static_cast<size_t>(program.arena_bytes));
  AlignedBuffer<int32_t> ids(static_cast<size_t>(b * s)), labels(static_cast<size_t>(b * s));
  Optimizer optimizer(f, store);
  data.set_order(f.shuffle, static_cast<uint64_t>(f.seed));

  SelfCommunicator self;
  const StepContext ctx{&self, &self, &self};
  TrainResult result;
  LogWindow window;
  for (int64_t k = 1; k <= f.train_iters; ++k) {
    const auto start = Clock::now();
    store.zero_grads();
    double loss_sum = 0; // double: many microbatches add up without drift
    for (int64_t m = 0; m < num_micro; ++m) {
      data.fill((k - 1) * B + m * b, b, ids.data(), labels.data());
      loss_sum += program.step(ctx, store.param_table(), store.grad_table(), arena.data(),
                               ids.data(), labels.data(), dloss);
    }
    const double loss = loss_sum / static_cast<double>(num_micro);
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
    it.tflops_per_gpu = flops > 0 ? flops / seconds / 1e12 : -1;
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
      line.tflops_per_gpu = flops > 0 ? flops / avg / 1e12 : -1;
      line.lm_loss = window.loss_count ? window.loss_sum / static_cast<double>(window.loss_count)
                                       : std::numeric_limits<double>::quiet_NaN();
      line.skipped_iterations = window.skipped;
      line.nan_iterations = window.nan;
      out << format_log_line(line, f.train_iters) << std::endl;
      window = LogWindow{};
    }

    if (!f.save.empty() && ((f.save_interval > 0 && k % f.save_interval == 0) ||
                            k == f.train_iters)) {
      const std::string path = save_checkpoint(f.save, k, store);
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
