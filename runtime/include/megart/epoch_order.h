// Which sample of a dataset each position of a run reads. As Megatron's GPTDataset, a run that
// needs more samples than the dataset holds repeats it for as many epochs as it needs: position
// p reads sample p mod n of epoch p / n, each epoch every sample once, in its own order. That
// order is dataset order (--no-shuffle), or a shuffle drawn from a seed that is the run's seed
// for the first epoch (so a run inside one epoch reads what it always did) and a hash of
// (seed, epoch) for each later one. Nothing depends on the plan: every rank reads the same.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace megart {

// The seed of epoch `epoch`'s shuffle: `seed` itself for epoch 0, a hash of both after.
uint64_t epoch_seed(uint64_t seed, int64_t epoch);

class EpochOrder {
public:
  EpochOrder() = default;
  EpochOrder(int64_t num_samples, bool shuffle, uint64_t seed);

  // The sample (in 0 .. num_samples - 1) that `position` (>= 0) reads. Keeps the permutation of
  // the last epoch asked for: a run walks forward, so each epoch's is drawn once.
  int64_t sample_at(int64_t position);

private:
  int64_t num_samples_ = 0;
  bool shuffle_ = false;
  uint64_t seed_ = 0;
  int64_t epoch_ = -1;          // whose permutation order_ holds (shuffled only)
  std::vector<int64_t> order_;
};

// The epochs that positions [first, end) of a dataset of `num_samples` reach, for the run's
// header: "1 epoch", "3 epochs, the last partial", "epoch 2, partial", "epochs 2 to 4". Empty
// when the range or the dataset is.
std::string describe_epochs(int64_t first, int64_t end, int64_t num_samples);

} // namespace megart
