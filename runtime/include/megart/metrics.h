// What a training run reports each logged iteration: Megatron's log line for people, and a
// JSONL file (one object per line) for scripts and tests.
#pragma once

#include "megart/comm_counting.h"
#include "megart/memory_accounting.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace megart {

struct IterationMetrics {
  int64_t iteration = 0;         // 1-based
  int64_t consumed_samples = 0;  // after this iteration
  int64_t global_batch_size = 0;
  double ms_per_iter = 0;        // elapsed wall time per iteration, milliseconds
  double tokens_per_s = 0;
  double lr = 0;
  double lm_loss = 0;
  // The program's reported metrics (a mixture of experts' load_balancing_loss), by name: the
  // iteration's mean, as lm_loss. Empty: none.
  std::vector<std::pair<std::string, double>> reported;
  // A mixture of experts' load histogram: per layer, the token choices each expert computed in
  // the iteration (every microbatch of every dp rank; dropped choices not counted). Empty:
  // omitted. JSONL only.
  std::vector<std::vector<int64_t>> tokens_per_expert;
  double grad_norm = -1;         // < 0: not computed (no clipping); omitted from the log line
  double loss_scale = -1;        // < 0: no loss scaling (fp32/bf16); omitted
  double tflops_per_gpu = -1;    // < 0: not measured; omitted
  double mfu = -1;               // model FLOPs utilisation, fraction of peak; < 0: omitted
  int64_t skipped_iterations = 0;
  int64_t nan_iterations = 0;
  double eta_seconds = -1;       // the remaining iterations at the logged pace; < 0: omitted (log line only)
  // Pipeline parallelism, first iteration only (empty otherwise; omitted): each pp rank's peak
  // of stashed (chunk, microbatch) activations as its executor counted it, and as the compiler
  // predicted it (PipelineStageDesc::predicted_peak_stash). JSONL only.
  std::vector<int64_t> pipeline_stash_peak_measured, pipeline_stash_peak_predicted;
  // First iteration only (empty otherwise; omitted): the device memory the runtime allocated
  // (memory_report.h), this rank's usage first; with pipeline parallelism one entry per pp
  // stage, in stage order. JSONL only.
  std::vector<MemoryUsage> memory;
  // First iteration only (-1 otherwise; omitted): how much this process's resident memory grew
  // from before the training state was allocated to the end of the iteration (resident_memory.h).
  int64_t resident_growth_bytes = -1;
  // What a rank of each pp stage sent over each axis during the iteration's training work (from
  // its start to this record: not the checkpoint saves after it), as comm_counting.h counts;
  // one entry without pp. Empty: omitted.
  std::vector<CommunicationBytes> communication;
  // Evaluation after this iteration (--eval-interval, and the last): the mean loss over
  // --eval-iters batches of the validation / test data; none: omitted.
  std::optional<double> valid_lm_loss, test_lm_loss;
};

// Megatron's evaluation block: " validation loss at iteration 10 | lm loss value: ... | lm loss
// PPL: ... | " between two lines of dashes (`what` "validation" or "test"; PPL = exp(min(20, loss))).
std::string format_eval_block(const std::string &what, const std::string &at, double loss);

// Megatron's training_log line, e.g.
//  [2026-11-21 10:00:00] iteration        3/      10 | consumed samples:           24 | ...
// The first form stamps the current local time.
std::string format_log_line(const IterationMetrics &m, int64_t train_iters);
std::string format_log_line(const IterationMetrics &m, int64_t train_iters,
                            const std::string &timestamp);
// "YYYY-MM-DD HH:MM:SS", local time.
std::string current_timestamp();

// One JSON object (no newline) with iteration, lm_loss, grad_norm, lr, tokens_per_s,
// ms_per_iter, consumed_samples, global_batch_size (+ loss_scale / tflops_per_gpu / mfu when set,
// + tokens_per_expert as an array of integer arrays, one per layer, when set,
// + pipeline_stash_peak_measured / _predicted as integer arrays when set, + "memory" when set:
// {"parameters": bytes, ... every category's high-water mark ..., "peak_total": bytes} for
// memory[0], and with several entries "memory_per_pp_stage": [one such object per stage]).
// lm_loss, grad_norm, lr and loss_scale use %.17g (they read back bit for bit, so a resumed run
// can be compared exactly), the timings %.9g; NaN and infinities become null.
std::string format_metrics_json(const IterationMetrics &m);

// Appends one JSON line per append(), each written with a single write() and no buffering,
// so a crash loses at most the line being written and readers can follow the file live.
class MetricsFile {
public:
  // Truncates an existing file unless `append_existing`.
  static MetricsFile open(const std::string &path, bool append_existing = false);
  // For a run resumed after iteration `kept`: the records up to it stay, later ones (of a run
  // that went on past the checkpoint it resumes) and a half-written last line go; then appends.
  static MetricsFile open_resumed(const std::string &path, int64_t kept);
  ~MetricsFile();
  MetricsFile(MetricsFile &&other) noexcept;
  MetricsFile &operator=(MetricsFile &&other) noexcept;
  MetricsFile(const MetricsFile &) = delete;
  MetricsFile &operator=(const MetricsFile &) = delete;

  void append(const IterationMetrics &m);
  const std::string &path() const { return path_; }

private:
  MetricsFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string path_;
  int fd_ = -1;
};

} // namespace megart
