// --tensorboard-dir: the run's scalars as a TensorBoard event file, which TensorBoard (and its
// Python event reader) reads: TFRecord framing (length, masked CRC32C of the length, the record,
// masked CRC32C of the record) around Event protocol buffers (wall_time, step, file_version on
// the first, then a Summary of one simple_value per tag). Written by global rank 0, as Megatron
// writes it, under Megatron's tag names.
#pragma once

#include "megart/crc32c.h"

#include <cstdint>
#include <cstdio>
#include <string>

namespace megart {

struct IterationMetrics;

class TensorBoardWriter {
public:
  // Creates `dir` if needed and a new events.out.tfevents.<seconds>.<host>.<pid>.megac in it
  // (one file per run, as TensorFlow's writers name theirs); throws megart::Error naming the
  // path on failure.
  static TensorBoardWriter open(const std::string &dir);
  ~TensorBoardWriter();
  TensorBoardWriter(TensorBoardWriter &&other) noexcept;
  TensorBoardWriter &operator=(TensorBoardWriter &&) = delete;
  TensorBoardWriter(const TensorBoardWriter &) = delete;
  TensorBoardWriter &operator=(const TensorBoardWriter &) = delete;

  // One scalar at `step`; flushed at once (a crash loses nothing written before it).
  void scalar(const std::string &tag, int64_t step, double value);
  // An iteration's scalars: lm loss, learning-rate, grad-norm, loss-scale, iteration-time,
  // throughput (TFLOP/s per GPU), tokens-per-second, batch-size, and the first iteration's
  // memory peak (Megatron's tags where it has them).
  void iteration(const IterationMetrics &m);
  const std::string &path() const { return path_; }

private:
  TensorBoardWriter(std::FILE *file, std::string path) : file_(file), path_(std::move(path)) {}
  void record(const std::string &event);

  std::FILE *file_ = nullptr;
  std::string path_;
};

// TFRecord's mask of a CRC32C (megart/crc32c.h).
inline uint32_t masked_crc32c(const void *data, size_t size) {
  const uint32_t crc = crc32c(data, size);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

} // namespace megart
