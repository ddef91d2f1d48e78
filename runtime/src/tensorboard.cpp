#include "megart/tensorboard.h"

#include "megart/error.h"
#include "megart/metrics.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <unistd.h>

namespace megart {

namespace {

// Protocol-buffer encoding of the few fields an Event needs.
void varint(std::string &out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
void key(std::string &out, int field, int wire) { varint(out, (static_cast<uint64_t>(field) << 3) | wire); }
void bytes_field(std::string &out, int field, const std::string &bytes) {
  key(out, field, 2);
  varint(out, bytes.size());
  out += bytes;
}
template <typename T> void fixed_field(std::string &out, int field, T value) {
  key(out, field, sizeof(T) == 8 ? 1 : 5);
  char raw[sizeof(T)];
  std::memcpy(raw, &value, sizeof(T)); // little-endian, as x86-64 stores it
  out.append(raw, sizeof(T));
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Event { wall_time = 1 (double), step = 2 (int64), file_version = 3 (string), summary = 5 }.
std::string event(int64_t step, const std::string *file_version, const std::string *summary) {
  std::string e;
  fixed_field(e, 1, now_seconds());
  key(e, 2, 0);
  varint(e, static_cast<uint64_t>(step));
  if (file_version)
    bytes_field(e, 3, *file_version);
  if (summary)
    bytes_field(e, 5, *summary);
  return e;
}

} // namespace

TensorBoardWriter TensorBoardWriter::open(const std::string &dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    throw Error("--tensorboard-dir " + dir + ": cannot create it: " + ec.message());
  char host[256] = "localhost";
  gethostname(host, sizeof host - 1);
  const std::string path = dir + "/events.out.tfevents." +
                           std::to_string(static_cast<int64_t>(now_seconds())) + "." + host + "." +
                           std::to_string(getpid()) + ".megac";
  std::FILE *file = std::fopen(path.c_str(), "wb");
  if (!file)
    throw Error("--tensorboard-dir " + dir + ": cannot write " + path + ": " + std::strerror(errno));
  TensorBoardWriter w(file, path);
  const std::string version = "brain.Event:2";
  w.record(event(0, &version, nullptr));
  return w;
}

TensorBoardWriter::TensorBoardWriter(TensorBoardWriter &&other) noexcept
    : file_(other.file_), path_(std::move(other.path_)) {
  other.file_ = nullptr;
}

TensorBoardWriter::~TensorBoardWriter() {
  if (file_)
    std::fclose(file_);
}

void TensorBoardWriter::record(const std::string &data) {
  const uint64_t length = data.size();
  const uint32_t length_crc = masked_crc32c(&length, sizeof length), data_crc = masked_crc32c(data.data(), data.size());
  const bool ok = std::fwrite(&length, sizeof length, 1, file_) == 1 &&
                  std::fwrite(&length_crc, sizeof length_crc, 1, file_) == 1 &&
                  std::fwrite(data.data(), 1, data.size(), file_) == data.size() &&
                  std::fwrite(&data_crc, sizeof data_crc, 1, file_) == 1 && std::fflush(file_) == 0;
  if (!ok)
    throw Error("--tensorboard-dir: writing " + path_ + " failed: " + std::strerror(errno));
}

void TensorBoardWriter::scalar(const std::string &tag, int64_t step, double value) {
  // Summary { value = 1: Value { tag = 1 (string), simple_value = 2 (float) } }.
  std::string value_message;
  bytes_field(value_message, 1, tag);
  fixed_field(value_message, 2, static_cast<float>(value));
  std::string summary;
  bytes_field(summary, 1, value_message);
  record(event(step, nullptr, &summary));
}

void TensorBoardWriter::iteration(const IterationMetrics &m) {
  const int64_t step = m.iteration;
  scalar("lm loss", step, m.lm_loss);
  for (const auto &[name, value] : m.reported)
    scalar(name, step, value);
  scalar("learning-rate", step, m.lr);
  scalar("batch-size", step, static_cast<double>(m.global_batch_size));
  scalar("iteration-time", step, m.ms_per_iter / 1000.0);
  scalar("tokens-per-second", step, m.tokens_per_s);
  if (m.grad_norm >= 0)
    scalar("grad-norm", step, m.grad_norm);
  // Megatron's evaluation tags.
  for (const auto &[name, loss] : {std::pair{"validation", m.valid_lm_loss}, std::pair{"test", m.test_lm_loss}})
    if (loss) {
      scalar(std::string("lm loss ") + name, step, *loss);
      scalar(std::string("lm loss ") + name + " ppl", step, std::exp(std::min(20.0, *loss)));
    }
  if (m.loss_scale >= 0)
    scalar("loss-scale", step, m.loss_scale);
  if (m.tflops_per_gpu >= 0)
    scalar("throughput", step, m.tflops_per_gpu);
  if (!m.memory.empty())
    scalar("mem-max-allocated-bytes", step, static_cast<double>(m.memory[0].peak_total));
}

} // namespace megart
