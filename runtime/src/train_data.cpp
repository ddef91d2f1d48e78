#include "megart/train_data.h"

#include "megart/checked_math.h"
#include "megart/error.h"
#include "megart/json.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>

namespace megart {

namespace {

void check_vocab(const IndexedDataset &ds, int64_t vocab_size) {
  constexpr int64_t kChunk = 1 << 20;
  std::vector<int32_t> buf(static_cast<size_t>(std::min<int64_t>(kChunk, ds.num_tokens())));
  for (int64_t start = 0; start < ds.num_tokens(); start += kChunk) {
    const int64_t n = std::min(kChunk, ds.num_tokens() - start);
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

// PREFIX.tokenizer.json, written by megac data: a tokenizer whose vocabulary is larger than the
// model's can give ids the model has no row for, even where this dataset happens not to.
void check_tokenizer(const std::string &prefix, int64_t vocab_size) {
  const std::string path = prefix + ".tokenizer.json";
  std::ifstream in(path);
  if (!in)
    return; // datasets made by other tools say nothing of their tokenizer
  std::stringstream text;
  text << in.rdbuf();
  const JsonValue record = parse_json(text.str(), path);
  const JsonValue *type = record.get("tokenizer_type"), *vocab = record.get("vocab_size");
  if (!type || !type->is_string() || !vocab || !vocab->is_integer())
    throw Error(path + ": needs a string tokenizer_type and an integer vocab_size (megac data writes it); "
                "remake the dataset with megac data, or delete the file");
  if (vocab->integer > vocab_size)
    throw Error("--data-path " + prefix + " was tokenized by " + type->string + " with a vocabulary of " +
                std::to_string(vocab->integer) + " (" + path + "), more than the model's vocab_size " +
                std::to_string(vocab_size) + "; compile a spec with vocab_size >= " +
                std::to_string(vocab->integer) + " (Megatron pads it to a multiple of 128), or tokenize "
                "the data with the model's tokenizer");
}

} // namespace

TrainData::TrainData(const std::string &prefix, int64_t seq_length, int64_t vocab_size)
    : dataset_(IndexedDataset::open(prefix)), seq_length_(seq_length),
      num_samples_(dataset_.num_samples(seq_length)),
      scratch_(static_cast<size_t>(seq_length + 1)) {
  check_tokenizer(prefix, vocab_size);
  check_vocab(dataset_, vocab_size);
}

void TrainData::require_samples(int64_t first, int64_t iterations, int64_t global_batch_size) const {
  const std::optional<int64_t> used = checked_mul(iterations, global_batch_size);
  const std::optional<int64_t> need = used ? checked_add(first, *used) : std::nullopt;
  if (need && *need <= num_samples_)
    return;
  const int64_t left = std::max<int64_t>(num_samples_ - first, 0);
  const int64_t max_iters = left / global_batch_size;
  const std::string after = first > 0 ? " after the " + std::to_string(first) + " already used" : "";
  throw Error(std::string(first > 0 ? "the remaining iterations (" : "--train-iters (") +
              std::to_string(iterations) + ") x --global-batch-size (" +
              std::to_string(global_batch_size) + ") needs " +
              (used ? std::to_string(*used) : std::string("more than 2^63")) + " samples of " +
              std::to_string(seq_length_) + "+1 tokens" + after + ", but " + dataset_.prefix() +
              " has " + std::to_string(num_samples_) + " (" + std::to_string(dataset_.num_tokens()) +
              " tokens); " +
              (max_iters > 0 ? "use --train-iters " + std::to_string(max_iters + (first > 0 ? first / global_batch_size : 0)) + " or fewer"
                             : "use a smaller --global-batch-size") +
              ", or more data (samples are not reused)");
}

void TrainData::set_order(bool shuffle, uint64_t seed) {
  order_.clear();
  if (shuffle)
    order_ = shuffled_sample_order(num_samples_, seed);
}

void TrainData::fill(int64_t first, int64_t count, int32_t *ids, int32_t *labels) {
  const size_t s = static_cast<size_t>(seq_length_);
  for (int64_t j = 0; j < count; ++j) {
    const int64_t pos = first + j;
    const int64_t sample = order_.empty() ? pos : order_.at(static_cast<size_t>(pos));
    dataset_.sample(sample, seq_length_, scratch_.data());
    std::memcpy(ids + j * s, scratch_.data(), s * sizeof(int32_t));
    std::memcpy(labels + j * s, scratch_.data() + 1, s * sizeof(int32_t));
  }
}

} // namespace megart
