// The samples a run reads from one split (train, valid or test) of a blend of datasets: opens
// each dataset, takes the split's documents of it, checks that every token fits the compiled
// vocabulary and that there are enough samples for the whole run (no wrap-around), and hands
// out microbatches: the blend's order across the datasets (megart/data_blend.h), and within each
// dataset its samples in order or shuffled by the seed.
#pragma once

#include "megart/data_blend.h"
#include "megart/indexed_dataset.h"
#include "megart/tokenizer_record.h"

#include <cstdint>
#include <string>
#include <vector>

namespace megart {

class TrainData {
public:
  // One dataset, all of it: PREFIX.bin/.idx.
  TrainData(const std::string &prefix, int64_t seq_length, int64_t vocab_size);
  // Split `which` (0 train, 1 valid, 2 test) of each dataset of `blend` (`split` empty: every
  // document). Unweighted entries are weighted by their samples. Each dataset's tokens in
  // the split are scanned once: an id outside [0, vocab_size) throws megart::Error naming the
  // id and its stream position. `flag` names the flag the blend came from in errors.
  TrainData(const std::vector<BlendEntry> &blend, const std::vector<double> &split, int which,
            int64_t seq_length, int64_t vocab_size, const std::string &flag);

  int64_t seq_length() const { return seq_length_; }
  int64_t num_samples() const { return num_samples_; } // all datasets together
  int64_t num_tokens() const;
  // The tokenizer the datasets were made with (PREFIX.tokenizer.json; every dataset of a blend
  // must name the same), or none.
  const std::optional<TokenizerRecord> &tokenizer() const { return tokenizer_; }
  // "PREFIX" for one dataset, or a line per dataset: weight, documents, samples, and how many
  // of the first `used` samples of the blend it gives.
  std::string describe(int64_t used) const;

  // Throws unless samples first .. first + iterations * global_batch_size - 1 exist, each
  // dataset having the ones the blend draws from it (a resumed run starts past the samples it
  // consumed), naming the numbers and fixes. The product is checked: flags never wrap.
  // `iterations_flag` names the flag the iterations came from.
  void require_samples(int64_t first, int64_t iterations, int64_t global_batch_size,
                       const std::string &iterations_flag = "--train-iters") const;

  // Each dataset's sample order: its order, or shuffled_sample_order(its samples, a seed that
  // is `seed` for the first dataset and derived from it for the others).
  void set_order(bool shuffle, uint64_t seed);

  // Fills ids and labels ([count, seq_length] each) with the samples at positions
  // first .. first + count - 1 of the blend: ids are a sample's first s tokens, labels its last s.
  void fill(int64_t first, int64_t count, int32_t *ids, int32_t *labels);

private:
  // One dataset's documents in the split, cut into samples of s + 1 tokens every s tokens.
  struct Part {
    IndexedDataset dataset;
    double weight;
    DocumentRange documents;
    int64_t token_begin, token_end;
    int64_t num_samples;
    std::vector<int64_t> order; // empty: in order
  };

  std::string flag_;
  int64_t seq_length_;
  std::vector<Part> parts_;
  int64_t num_samples_ = 0;
  BlendOrder blend_;
  std::optional<TokenizerRecord> tokenizer_;
  std::vector<int32_t> scratch_;
};

} // namespace megart
