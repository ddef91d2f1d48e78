// The samples a run reads from one split (train, valid or test) of a blend of datasets: opens
// each dataset, takes the split's documents of it, checks that every token fits the compiled
// vocabulary and that the run's sample positions can be counted, and hands out microbatches: the
// blend's order across the datasets (megart/data_blend.h), and within each dataset its samples
// epoch after epoch, each epoch in order or shuffled by the seed (megart/epoch_order.h). As in
// Megatron's blends, each dataset cycles through its own epochs: one that the blend draws from
// more than it has samples repeats while the others are still in their first pass.
#pragma once

#include "megart/data_blend.h"
#include "megart/epoch_order.h"
#include "megart/indexed_dataset.h"
#include "megart/mlm_masking.h"
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
  // "PREFIX" for one dataset, or a line per dataset: weight, documents, samples, how many of
  // the first `used` samples of the blend it gives and over how many of its epochs.
  std::string describe(int64_t used) const;
  // The epochs that positions [first, end) span ("3 epochs, the last partial"; see
  // describe_epochs); empty for a blend, whose datasets each have their own (describe's lines).
  std::string describe_epochs(int64_t first, int64_t end) const;

  // Throws unless positions first .. first + iterations * global_batch_size - 1 can be read:
  // the data has a sample, every dataset the blend draws from has one, and the positions and
  // one iteration's tokens fit in 64 bits (a resumed run starts past the samples it consumed).
  // Names the numbers and fixes; products are checked, so flags never wrap. Positions past the
  // data's samples are further epochs. `iterations_flag` names the flag the iterations came from.
  void require_samples(int64_t first, int64_t iterations, int64_t global_batch_size,
                       const std::string &iterations_flag = "--train-iters") const;

  // Each dataset's order: EpochOrder(its samples, shuffle, a seed that is `seed` for the first
  // dataset and derived from it for the others). Until called, dataset order.
  void set_order(bool shuffle, uint64_t seed);

  // A masked language model's batches (megart/mlm_masking.h): a sample's s tokens, masked, and
  // the labels of the chosen positions (the rest ignored). Until called, a causal LM's.
  void set_masking(MlmMasking masking) { masking_ = std::move(masking); }

  // Fills ids and labels ([count, seq_length] each) with the samples at positions
  // first .. first + count - 1 of the blend: ids are a sample's first s tokens, labels its last s
  // (with masking: its s tokens masked, and their labels at the positions chosen).
  // Reading positions in increasing order, as a run does, draws each epoch's shuffle once.
  void fill(int64_t first, int64_t count, int32_t *ids, int32_t *labels);

private:
  // One dataset's documents in the split, cut into samples of s + 1 tokens every s tokens.
  struct Part {
    IndexedDataset dataset;
    double weight;
    DocumentRange documents;
    int64_t token_begin, token_end;
    int64_t num_samples;
    EpochOrder order;
  };

  // Throws if the blend's first `need` positions draw from a dataset with no sample.
  void require_drawn_parts_have_samples(int64_t need, const std::string &tokens) const;

  std::string flag_;
  int64_t seq_length_;
  std::vector<Part> parts_;
  int64_t num_samples_ = 0;
  BlendOrder blend_;
  std::optional<TokenizerRecord> tokenizer_;
  std::vector<int32_t> scratch_;
  std::optional<MlmMasking> masking_; // set_masking: a masked LM's batches
};

} // namespace megart
