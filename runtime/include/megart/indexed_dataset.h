// Megatron indexed datasets: PREFIX.idx (sequence lengths, byte offsets, document boundaries)
// and PREFIX.bin (raw token ids). Format in /work/shared/reference/facts.md. Reading checks the
// whole index against the .bin up front, so training never trips over a bad file mid-run.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace megart {

// Token element type; the values are Megatron's dtype codes in the .idx header.
enum class TokenDType : uint8_t {
  UInt8 = 1,
  Int8 = 2,
  Int16 = 3,
  Int32 = 4,
  Int64 = 5,
  Float64 = 6, // defined by the format, never valid for tokens
  Float32 = 7, // idem
  UInt16 = 8,
};

const char *token_dtype_name(TokenDType dtype); // "uint16", ...
int token_dtype_size(TokenDType dtype);         // bytes per token
// Megatron's choice: uint16 when every id fits (vocab < 65500), else int32.
TokenDType dtype_for_vocab(int64_t vocab_size);

class IndexedDataset {
public:
  // Opens PREFIX.idx and PREFIX.bin (mapped, not read) and validates both.
  static IndexedDataset open(const std::string &prefix);

  const std::string &prefix() const { return prefix_; }
  TokenDType dtype() const { return dtype_; }
  int64_t num_sequences() const { return static_cast<int64_t>(sizes_.size()); }
  int64_t num_documents() const { return static_cast<int64_t>(doc_idx_.size()) - 1; }
  // Tokens in all sequences together (the training stream).
  int64_t num_tokens() const { return token_starts_.back(); }
  int32_t sequence_length(int64_t i) const;
  std::vector<int32_t> sequence(int64_t i) const;
  // Megatron's document index: starts at 0, one entry per document end (sequence numbers).
  const std::vector<int64_t> &document_index() const { return doc_idx_; }

  // Tokens of the stream before document `doc` (0 <= doc <= num_documents()).
  int64_t document_token_start(int64_t doc) const;

  // `count` tokens of the concatenated stream starting at token `start`.
  void read_tokens(int64_t start, int64_t count, int32_t *out) const;

  // Training samples without shuffling: sample i is stream[i*s, i*s + s] (s + 1 tokens:
  // inputs are the first s, labels the last s), so num_samples = (num_tokens - 1) / s.
  int64_t num_samples(int64_t seq_length) const;
  void sample(int64_t i, int64_t seq_length, int32_t *out /* seq_length + 1 tokens */) const;

private:
  struct Mapping;
  IndexedDataset() = default;
  int64_t sequence_at_token(int64_t token) const;

  std::string prefix_;
  TokenDType dtype_ = TokenDType::UInt16;
  std::shared_ptr<const Mapping> bin_; // shared: copies of a dataset share one mapping
  std::vector<int32_t> sizes_;
  std::vector<int64_t> pointers_;
  std::vector<int64_t> doc_idx_;
  std::vector<int64_t> token_starts_; // token_starts_[i] = tokens before sequence i; back() = total
};

// A permutation of 0..num_samples-1 that depends only on the seed (Fisher-Yates driven by a
// SplitMix64 generator), identical on every platform and rank.
std::vector<int64_t> shuffled_sample_order(int64_t num_samples, uint64_t seed);

// Builds PREFIX.bin / PREFIX.idx, one sequence per document (Megatron's preprocess_data with one
// sentence per document). Token data streams to a temporary file; finalize() puts both files in
// place. If finalize() is never called, nothing is left behind.
class IndexedDatasetWriter {
public:
  IndexedDatasetWriter(std::string prefix, TokenDType dtype);
  ~IndexedDatasetWriter();
  IndexedDatasetWriter(const IndexedDatasetWriter &) = delete;
  IndexedDatasetWriter &operator=(const IndexedDatasetWriter &) = delete;

  // An empty document adds no sequence, only a document boundary (as Megatron does).
  void add_document(const std::vector<int32_t> &tokens);
  void finalize();

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace megart
