// The samples a training run reads: opens the dataset, checks that every token fits the
// compiled vocabulary and that there are enough samples for the whole run (no wrap-around),
// and hands out microbatches in (optionally shuffled) order.
#pragma once

#include "megart/indexed_dataset.h"

#include <cstdint>
#include <string>
#include <vector>

namespace megart {

class TrainData {
public:
  // Opens PREFIX.bin/.idx and scans every token once: an id outside [0, vocab_size) throws
  // megart::Error naming the id and its stream position.
  TrainData(const std::string &prefix, int64_t seq_length, int64_t vocab_size);

  const IndexedDataset &dataset() const { return dataset_; }
  int64_t seq_length() const { return seq_length_; }
  int64_t num_samples() const { return num_samples_; }

  // Throws unless samples first .. first + iterations * global_batch_size - 1 exist (a resumed
  // run starts past the samples it consumed), naming the numbers and fixes. The product is
  // checked: flags from users never wrap.
  void require_samples(int64_t first, int64_t iterations, int64_t global_batch_size) const;

  // Sample order: dataset order, or shuffled_sample_order(num_samples, seed).
  void set_order(bool shuffle, uint64_t seed);

  // Fills ids and labels ([count, seq_length] each) with the samples at positions
  // first .. first + count - 1 of the order: ids are a sample's first s tokens, labels its last s.
  void fill(int64_t first, int64_t count, int32_t *ids, int32_t *labels);

private:
  IndexedDataset dataset_;
  int64_t seq_length_;
  int64_t num_samples_;
  std::vector<int64_t> order_; // empty: dataset order
  std::vector<int32_t> scratch_;
};

} // namespace megart
