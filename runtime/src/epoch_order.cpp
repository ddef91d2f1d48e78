#include "megart/epoch_order.h"

#include "megart/error.h"
#include "megart/indexed_dataset.h"

namespace megart {

namespace {

// SplitMix64's output function: a bijection of 64-bit words that scatters neighbouring inputs.
uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

} // namespace

uint64_t epoch_seed(uint64_t seed, int64_t epoch) {
  // Not seed + epoch x SplitMix64's increment: that would start each epoch's generator a step
  // further along the first epoch's stream, and the shuffles would share their random numbers.
  // mix64 is a bijection, so every epoch of one seed gets its own.
  return epoch == 0 ? seed : mix64(seed + mix64(static_cast<uint64_t>(epoch)));
}

EpochOrder::EpochOrder(int64_t num_samples, bool shuffle, uint64_t seed)
    : num_samples_(num_samples), shuffle_(shuffle), seed_(seed) {
  if (num_samples < 0)
    throw Error("EpochOrder: num_samples is " + std::to_string(num_samples) + "; it must be >= 0");
}

int64_t EpochOrder::sample_at(int64_t position) {
  if (num_samples_ == 0 || position < 0) // TrainData::require_samples refuses such runs first
    throw Error("EpochOrder: position " + std::to_string(position) + " of a dataset of " +
                std::to_string(num_samples_) + " samples");
  const int64_t epoch = position / num_samples_, index = position % num_samples_;
  if (!shuffle_)
    return index;
  if (epoch != epoch_) {
    order_ = shuffled_sample_order(num_samples_, epoch_seed(seed_, epoch));
    epoch_ = epoch;
  }
  return order_[static_cast<size_t>(index)];
}

std::string describe_epochs(int64_t first, int64_t end, int64_t num_samples) {
  if (num_samples <= 0 || end <= first || first < 0)
    return "";
  const int64_t first_epoch = first / num_samples, last_epoch = (end - 1) / num_samples;
  const int64_t count = last_epoch - first_epoch + 1;
  std::string text;
  if (first == 0)
    text = std::to_string(count) + (count == 1 ? " epoch" : " epochs");
  else if (count == 1)
    text = "epoch " + std::to_string(first_epoch + 1);
  else
    text = "epochs " + std::to_string(first_epoch + 1) + " to " + std::to_string(last_epoch + 1);
  if (end % num_samples != 0)
    text += count == 1 ? ", partial" : ", the last partial";
  return text;
}

} // namespace megart
