#include "megart/train_data.h"

#include "megart/checked_math.h"
#include "megart/error.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>

namespace megart {

namespace {

// Every token of [begin, end) of the stream within [0, vocab_size).
void check_vocab(const IndexedDataset &ds, int64_t begin, int64_t end, int64_t vocab_size) {
  constexpr int64_t kChunk = 1 << 20;
  std::vector<int32_t> buf(static_cast<size_t>(std::min<int64_t>(kChunk, end - begin)));
  for (int64_t start = begin; start < end; start += kChunk) {
    const int64_t n = std::min(kChunk, end - start);
    ds.read_tokens(start, n, buf.data());
    for (int64_t i = 0; i < n; ++i)
      if (buf[i] < 0 || buf[i] >= vocab_size)
        throw Error(ds.prefix() + ".bin: token id " + std::to_string(buf[i]) +
                    " at position " + std::to_string(start + i) +
                    " is outside the compiled vocabulary [0, " + std::to_string(vocab_size) +
                    "); tokenize the data with the model's tokenizer, or compile a spec with a "
                    "larger vocab_size");
  }
}

// A tokenizer whose vocabulary is larger than the model's can give ids the model has no row
// for, even where this dataset happens not to.
void check_tokenizer(const TokenizerRecord &record, const std::string &prefix, int64_t vocab_size) {
  if (record.vocab_size > vocab_size)
    throw Error("--data-path " + prefix + " was tokenized by " + record.type + " with a vocabulary of " +
                std::to_string(record.vocab_size) + " (" + record.path + "), more than the model's vocab_size " +
                std::to_string(vocab_size) + "; compile a spec with vocab_size >= " +
                std::to_string(record.vocab_size) + " (Megatron pads it to a multiple of 128), or tokenize "
                "the data with the model's tokenizer");
}

} // namespace

TrainData::TrainData(const std::string &prefix, int64_t seq_length, int64_t vocab_size)
    : TrainData({{-1, prefix}}, {}, 0, seq_length, vocab_size, "--data-path") {}

TrainData::TrainData(const std::vector<BlendEntry> &blend, const std::vector<double> &split, int which,
                     int64_t seq_length, int64_t vocab_size, const std::string &flag)
    : flag_(flag), seq_length_(seq_length), blend_(std::vector<double>{}),
      scratch_(static_cast<size_t>(seq_length + 1)) {
  if (seq_length <= 0)
    throw Error("seq_length is " + std::to_string(seq_length) + "; it must be positive");
  for (const BlendEntry &entry : blend) {
    IndexedDataset ds = IndexedDataset::open(entry.prefix);
    if (std::optional<TokenizerRecord> record = read_tokenizer_record(entry.prefix)) {
      check_tokenizer(*record, entry.prefix, vocab_size);
      // One blend, one tokenizer: the same id must mean the same text in every dataset.
      if (tokenizer_ && (record->type != tokenizer_->type || record->files != tokenizer_->files))
        throw Error(flag + ": " + record->path + " and " + tokenizer_->path + " name different tokenizers (" +
                    record->type + ", " + tokenizer_->type + "); blend datasets made with the same tokenizer");
      if (!tokenizer_)
        tokenizer_ = std::move(record);
    }
    const DocumentRange docs =
        split.empty() ? DocumentRange{0, ds.num_documents()} : split_documents(split, which, ds.num_documents());
    const int64_t begin = ds.document_token_start(docs.begin), end = ds.document_token_start(docs.end);
    check_vocab(ds, begin, end, vocab_size);
    const int64_t samples = end - begin > 1 ? (end - begin - 1) / seq_length : 0;
    parts_.push_back({std::move(ds), entry.weight, docs, begin, end, samples, EpochOrder(samples, false, 0)});
    num_samples_ += samples;
  }
  std::vector<double> weights;
  for (const Part &part : parts_) // unweighted: by size, so each dataset's epochs keep pace
    weights.push_back(part.weight >= 0 ? part.weight
                                       : static_cast<double>(part.num_samples) /
                                             static_cast<double>(std::max<int64_t>(num_samples_, 1)));
  blend_ = BlendOrder(std::move(weights));
}

int64_t TrainData::num_tokens() const {
  int64_t tokens = 0;
  for (const Part &part : parts_)
    tokens += part.token_end - part.token_begin;
  return tokens;
}

std::string TrainData::describe(int64_t used) const {
  const bool whole = parts_.size() == 1 && parts_[0].documents.begin == 0 &&
                     parts_[0].documents.end == parts_[0].dataset.num_documents();
  if (whole)
    return parts_[0].dataset.prefix();
  const BlendOrder::Counts counts = blend_.counts(used);
  std::string text;
  for (size_t d = 0; d < parts_.size(); ++d) {
    const Part &p = parts_[d];
    char weight[32];
    std::snprintf(weight, sizeof weight, "%.4g", p.weight >= 0 ? p.weight : 0.0);
    text += "\n    " + std::string(p.weight >= 0 ? weight : "by size") + " " + p.dataset.prefix() + ": documents " +
            std::to_string(p.documents.begin) + ".." + std::to_string(p.documents.end) + " of " +
            std::to_string(p.dataset.num_documents()) + ", " + std::to_string(p.num_samples) +
            " samples; gives " + (counts.exact ? "" : "about ") + std::to_string(counts.samples[d]);
    if (const std::string epochs = megart::describe_epochs(0, counts.samples[d], p.num_samples); !epochs.empty())
      text += " (" + epochs + ")";
  }
  return text;
}

void TrainData::require_samples(int64_t first, int64_t iterations, int64_t global_batch_size,
                                const std::string &iterations_flag) const {
  const std::string tokens = std::to_string(seq_length_) + "+1 tokens";
  if (num_samples_ == 0) {
    const Part &p = parts_[0];
    throw Error((parts_.size() == 1 ? p.dataset.prefix() + ": documents " + std::to_string(p.documents.begin) + ".." +
                                          std::to_string(p.documents.end) + " hold " + std::to_string(num_tokens()) +
                                          " tokens, fewer than one sample of " + tokens
                                    : flag_ + ": no dataset holds one sample of " + tokens + " (" +
                                          std::to_string(num_tokens()) + " tokens in all)") +
                "; use more data, or compile a spec with a smaller seq_length");
  }
  // The step's host and device buffers hold one iteration's ids and labels: B x s tokens each.
  const std::optional<int64_t> batch_tokens = checked_mul(global_batch_size, seq_length_ + 1);
  if (!batch_tokens || !checked_mul(*batch_tokens, 2 * static_cast<int64_t>(sizeof(int32_t))))
    throw Error("--global-batch-size (" + std::to_string(global_batch_size) + ") needs more than 2^63 bytes for " +
                "one iteration's samples of " + tokens + "; use a smaller --global-batch-size");
  // Positions past the data are further epochs; they must still be counted in 64 bits.
  const std::optional<int64_t> used = checked_mul(iterations, global_batch_size);
  const std::optional<int64_t> need = used ? checked_add(first, *used) : std::nullopt;
  if (need) {
    require_drawn_parts_have_samples(*need, tokens);
    return;
  }
  const int64_t most = (std::numeric_limits<int64_t>::max() - first) / global_batch_size;
  const int64_t done = first / global_batch_size; // --train-iters counts them too
  throw Error((first > 0 ? std::string("the remaining iterations (") : iterations_flag + " (") +
              std::to_string(iterations) + ") x --global-batch-size (" + std::to_string(global_batch_size) +
              ") needs more than 2^63 samples" +
              (first > 0 ? " after the " + std::to_string(first) + " already used" : std::string()) +
              ", more than a sample's position can count; " +
              (most > 0 ? "use " + iterations_flag + " " + std::to_string(most + done) + " or fewer"
                        : std::string("use a smaller --global-batch-size")));
}

void TrainData::require_drawn_parts_have_samples(int64_t need, const std::string &tokens) const {
  // Each dataset repeats as often as the blend draws from it, but one with no sample cannot give
  // even one. The counts are needed only then (the header takes them too); past the blend's walk
  // limit they are estimates, and fill() still refuses a draw from such a dataset.
  if (std::none_of(parts_.begin(), parts_.end(), [](const Part &p) { return p.num_samples == 0; }))
    return;
  const BlendOrder::Counts counts = blend_.counts(need);
  for (size_t d = 0; d < parts_.size(); ++d) {
    const Part &p = parts_[d];
    if (counts.samples[d] > 0 && p.num_samples == 0)
      throw Error(flag_ + ": " + p.dataset.prefix() + " must give " + (counts.exact ? "" : "about ") +
                  std::to_string(counts.samples[d]) +
                  " of the blend's first " + std::to_string(need) + " samples (weight " +
                  std::to_string(std::max(p.weight, 0.0)) + "), but has not one sample of " + tokens + " (" +
                  std::to_string(p.token_end - p.token_begin) + " tokens in documents " +
                  std::to_string(p.documents.begin) + ".." + std::to_string(p.documents.end) +
                  "); leave it out of " + flag_ + ", or give it more documents");
  }
}

std::string TrainData::describe_epochs(int64_t first, int64_t end) const {
  return parts_.size() == 1 ? megart::describe_epochs(first, end, num_samples_) : std::string();
}

void TrainData::set_order(bool shuffle, uint64_t seed) {
  // The first dataset keeps the seed itself: one dataset's order is what it always was.
  for (size_t d = 0; d < parts_.size(); ++d)
    parts_[d].order = EpochOrder(parts_[d].num_samples, shuffle, seed ^ (0x9E3779B97F4A7C15ull * d));
}

void TrainData::fill(int64_t first, int64_t count, int32_t *ids, int32_t *labels) {
  const size_t s = static_cast<size_t>(seq_length_);
  for (int64_t j = 0; j < count; ++j) {
    const auto [d, index] = blend_.at(first + j);
    Part &part = parts_[static_cast<size_t>(d)];
    if (part.num_samples == 0) // require_samples prevents it
      throw Error(part.dataset.prefix() + ": the blend asks it for sample " + std::to_string(index) +
                  ", but it has none");
    const int64_t sample = part.order.sample_at(index); // index / num_samples is its epoch
    part.dataset.read_tokens(part.token_begin + sample * seq_length_, seq_length_ + 1, scratch_.data());
    if (masking_) { // the sample's place in the stream, the same on every rank and plan
      mask_sample(*masking_, first + j, scratch_.data(), seq_length_, ids + j * s, labels + j * s);
      continue;
    }
    std::memcpy(ids + j * s, scratch_.data(), s * sizeof(int32_t));
    std::memcpy(labels + j * s, scratch_.data() + 1, s * sizeof(int32_t));
  }
}

} // namespace megart
