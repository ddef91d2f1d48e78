#include "megart/metrics.h"

#include "megart/atomic_file.h"
#include "megart/error.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <fcntl.h>
#include <unistd.h>

namespace megart {

namespace {

std::string format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char *fmt, ...) {
  char buf[256];
  va_list args;
  va_start(args, fmt);
  int n = std::vsnprintf(buf, sizeof buf, fmt, args);
  va_end(args);
  return std::string(buf, static_cast<size_t>(n < 0 ? 0 : std::min<int>(n, sizeof buf - 1)));
}

// JSON has no NaN or infinity; null keeps the line parseable by strict readers.
std::string json_number(double x) { return std::isfinite(x) ? format("%.9g", x) : "null"; }
// Reads back as the same double: losses, norms and rates are compared bit for bit (resume).
std::string json_exact(double x) { return std::isfinite(x) ? format("%.17g", x) : "null"; }

// Exact integers: the compiler's prediction is compared with them byte for byte.
std::string memory_json(const MemoryUsage &u) {
  std::string s = "{";
  for (MemoryCategory c : memory_categories())
    s += std::string("\"") + memory_category_key(c) + "\":" + std::to_string(u.peak_of(c)) + ",";
  return s + "\"peak_total\":" + std::to_string(u.peak_total) + "}";
}

// 0.0123, 1.23, 12.3, 123: a CPU's fraction of a TFLOP/s reads as more than "0.0".
std::string three_significant_digits(double x) {
  if (x >= 100)
    return format("%.0f", x);
  if (x >= 10)
    return format("%.1f", x);
  if (x >= 1)
    return format("%.2f", x);
  return format("%.3g", x);
}

// "45 s", "12 min 05 s", "3 h 02 min".
std::string duration_text(double seconds) {
  const long long s = static_cast<long long>(std::llround(std::min(seconds, 1e12)));
  if (s < 60)
    return format("%lld s", s);
  if (s < 3600)
    return format("%lld min %02lld s", s / 60, s % 60);
  return format("%lld h %02lld min", s / 3600, s % 3600 / 60);
}

} // namespace

std::string current_timestamp() {
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &local);
  return buf;
}

std::string format_log_line(const IterationMetrics &m, int64_t train_iters) {
  return format_log_line(m, train_iters, current_timestamp());
}

std::string format_log_line(const IterationMetrics &m, int64_t train_iters,
                            const std::string &timestamp) {
  // Field widths and formats follow Megatron's training_log (training.py).
  std::string s = " [" + timestamp + "]";
  s += format(" iteration %8lld/%8lld |", static_cast<long long>(m.iteration),
              static_cast<long long>(train_iters));
  s += format(" consumed samples: %12lld |", static_cast<long long>(m.consumed_samples));
  s += format(" elapsed time per iteration (ms): %.1f |", m.ms_per_iter);
  s += format(" throughput (tokens/s): %.1f |", m.tokens_per_s);
  if (m.tflops_per_gpu >= 0)
    s += " throughput per GPU (TFLOP/s/GPU): " + three_significant_digits(m.tflops_per_gpu) + " |";
  if (m.mfu >= 0)
    s += format(" MFU: %.1f%% |", 100.0 * m.mfu);
  s += format(" learning rate: %.6E |", m.lr);
  s += format(" global batch size: %5lld |", static_cast<long long>(m.global_batch_size));
  s += format(" lm loss: %.6E |", m.lm_loss);
  for (const auto &[name, value] : m.reported)
    s += format(" %s: %.6E |", name.c_str(), value);
  if (m.loss_scale >= 0)
    s += format(" loss scale: %.1f |", m.loss_scale);
  if (m.grad_norm >= 0 || std::isnan(m.grad_norm))
    s += format(" grad norm: %.3f |", m.grad_norm);
  s += format(" number of skipped iterations: %3lld |", static_cast<long long>(m.skipped_iterations));
  s += format(" number of nan iterations: %3lld |", static_cast<long long>(m.nan_iterations));
  if (m.eta_seconds >= 0)
    s += " ETA: " + duration_text(m.eta_seconds) + " |";
  return s;
}

std::string format_eval_block(const std::string &what, const std::string &at, double loss) {
  const std::string line = " " + what + " loss at " + at + " | lm loss value: " + format("%.6E", loss) +
                           " | lm loss PPL: " + format("%.6E", std::exp(std::min(20.0, loss))) + " | ";
  const std::string dashes(line.size() + 1, '-');
  return dashes + "\n" + line + "\n" + dashes;
}

std::string format_metrics_json(const IterationMetrics &m) {
  std::string s = "{";
  s += "\"iteration\":" + std::to_string(m.iteration);
  s += ",\"lm_loss\":" + json_exact(m.lm_loss);
  for (const auto &[name, value] : m.reported)
    s += ",\"" + name + "\":" + json_exact(value);
  s += ",\"grad_norm\":" +
       (m.grad_norm >= 0 || std::isnan(m.grad_norm) ? json_exact(m.grad_norm) : "null");
  s += ",\"lr\":" + json_exact(m.lr);
  s += ",\"tokens_per_s\":" + json_number(m.tokens_per_s);
  s += ",\"ms_per_iter\":" + json_number(m.ms_per_iter);
  s += ",\"consumed_samples\":" + std::to_string(m.consumed_samples);
  s += ",\"global_batch_size\":" + std::to_string(m.global_batch_size);
  if (m.loss_scale >= 0) // exact: 2^32 in %.9g would read back as 4294967300
    s += ",\"loss_scale\":" + (std::isfinite(m.loss_scale) ? format("%.17g", m.loss_scale) : "null");
  if (m.tflops_per_gpu >= 0)
    s += ",\"tflops_per_gpu\":" + json_number(m.tflops_per_gpu);
  if (m.mfu >= 0)
    s += ",\"mfu\":" + json_number(m.mfu);
  s += ",\"skipped_iterations\":" + std::to_string(m.skipped_iterations);
  s += ",\"nan_iterations\":" + std::to_string(m.nan_iterations);
  auto array = [](const std::vector<int64_t> &v) {
    std::string a = "[";
    for (size_t i = 0; i < v.size(); ++i)
      a += (i ? "," : "") + std::to_string(v[i]);
    return a + "]";
  };
  if (!m.tokens_per_expert.empty()) {
    s += ",\"tokens_per_expert\":[";
    for (size_t l = 0; l < m.tokens_per_expert.size(); ++l)
      s += (l ? "," : "") + array(m.tokens_per_expert[l]);
    s += "]";
  }
  if (!m.pipeline_stash_peak_measured.empty())
    s += ",\"pipeline_stash_peak_measured\":" + array(m.pipeline_stash_peak_measured) +
         ",\"pipeline_stash_peak_predicted\":" + array(m.pipeline_stash_peak_predicted);
  for (const auto &[name, loss] : {std::pair{"valid", m.valid_lm_loss}, std::pair{"test", m.test_lm_loss}})
    if (loss)
      s += std::string(",\"") + name + "_lm_loss\":" + json_exact(*loss) + ",\"" + name +
           "_ppl\":" + json_exact(std::exp(std::min(20.0, *loss)));
  if (!m.memory.empty())
    s += ",\"memory\":" + memory_json(m.memory[0]);
  if (!m.communication.empty()) {
    s += ",\"communication_bytes\":[";
    for (size_t i = 0; i < m.communication.size(); ++i) {
      const CommunicationBytes &c = m.communication[i];
      s += std::string(i ? "," : "") + "{\"tp\":" + json_exact(c.tp) + ",\"dp\":" + json_exact(c.dp) +
           ",\"pp\":" + json_exact(c.pp) + ",\"ep\":" + json_exact(c.ep) + "}";
    }
    s += "]";
  }
  if (m.resident_growth_bytes >= 0)
    s += ",\"resident_growth_bytes\":" + std::to_string(m.resident_growth_bytes);
  if (m.memory.size() > 1) {
    s += ",\"memory_per_pp_stage\":[";
    for (size_t i = 0; i < m.memory.size(); ++i)
      s += (i ? "," : "") + memory_json(m.memory[i]);
    s += "]";
  }
  return s + "}";
}

MetricsFile MetricsFile::open(const std::string &path, bool append_existing) {
  int flags = O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (append_existing ? 0 : O_TRUNC);
  int fd = ::open(path.c_str(), flags, 0644);
  if (fd < 0)
    throw Error(path + ": cannot open metrics file for writing: " + std::strerror(errno) +
                "; check that the folder exists and is writable");
  return MetricsFile(path, fd);
}

MetricsFile MetricsFile::open_resumed(const std::string &path, int64_t kept) {
  std::ifstream in(path);
  if (in) {
    AtomicFile rewritten(path);
    std::string line;
    const std::string key = "{\"iteration\":";
    while (std::getline(in, line)) {
      if (in.eof() || line.rfind(key, 0) != 0) // the last line without its newline was cut off
        continue;
      const int64_t iteration = std::strtoll(line.c_str() + key.size(), nullptr, 10);
      if (iteration >= 1 && iteration <= kept) {
        line += "\n";
        rewritten.write(line.data(), line.size());
      }
    }
    rewritten.commit();
  }
  return open(path, true);
}

MetricsFile::~MetricsFile() {
  if (fd_ >= 0)
    ::close(fd_);
}

MetricsFile::MetricsFile(MetricsFile &&other) noexcept : path_(std::move(other.path_)), fd_(other.fd_) {
  other.fd_ = -1;
}

MetricsFile &MetricsFile::operator=(MetricsFile &&other) noexcept {
  if (this != &other) {
    if (fd_ >= 0)
      ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

void MetricsFile::append(const IterationMetrics &m) {
  if (fd_ < 0)
    throw Error(path_ + ": metrics file is closed");
  const std::string line = format_metrics_json(m) + "\n";
  // O_APPEND + one write per line: the line lands whole at the end of the file.
  size_t done = 0;
  while (done < line.size()) {
    ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      throw Error(path_ + ": writing metrics for iteration " + std::to_string(m.iteration) +
                  " failed: " + std::strerror(errno) + "; check free disk space");
    done += static_cast<size_t>(n);
  }
}

} // namespace megart
