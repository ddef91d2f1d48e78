// Megatron's data flags, parsed: a blend (`--data-path 0.3 A 0.7 B`, or prefixes alone) and the
// train/valid/test split of each dataset's documents (`--split 949,50,1`), and the order in
// which a blend draws its samples (megatron-core's greedy blending: each next sample comes from
// the dataset furthest behind its weight).
#pragma once

#include <cstdint>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace megart {

struct BlendEntry {
  double weight = 0; // normalised to sum 1; < 0: none given (weighted by size)
  std::string prefix;
};

// `values` as Megatron reads them: an even count whose every other value is a number is
// (weight, prefix) pairs, weights normalised to sum 1; otherwise every value is a prefix and
// the weights are left unset (-1). `flag` names the flag in errors (megart::Error).
std::vector<BlendEntry> parse_blend(const std::vector<std::string> &values, const std::string &flag);

// `--split "949,50,1"`: up to three non-negative numbers (missing ones are 0), normalised.
std::vector<double> parse_split(const std::string &text);

// Documents [begin, end) of `num_documents` that split `which` (0 train, 1 valid, 2 test) takes:
// Megatron's bookends round(cumulative fraction x num_documents).
struct DocumentRange {
  int64_t begin = 0, end = 0;
};
DocumentRange split_documents(const std::vector<double> &split, int which, int64_t num_documents);

// The dataset each sample of a blend comes from, in order: sample i goes to the dataset whose
// weight x max(i, 1) minus the samples it already gave is largest (the first such), as
// megatron-core's build_blending_indices. Walks forward from any position; going back restarts.
class BlendOrder {
public:
  explicit BlendOrder(std::vector<double> weights);
  // The dataset of blended sample `position` and that sample's index within its dataset.
  std::pair<int, int64_t> at(int64_t position);
  // Samples each dataset gives to the first `count` samples of the blend. The greedy order has
  // no closed form (a count strays from weight x count by up to ~1.7, depending on the whole
  // history), so up to `walk_limit` positions it is walked, exactly; a longer run (up to 2^63
  // positions, which no walk finishes) gets weight x count shared out by largest remainder,
  // within 2 of the walk's for up to 16 datasets, and `exact` false.
  struct Counts {
    std::vector<int64_t> samples;
    bool exact = true;
  };
  static constexpr int64_t kCountWalkLimit = int64_t{1} << 24; // ~0.1 s for a few datasets
  Counts counts(int64_t count, int64_t walk_limit = kCountWalkLimit) const;

private:
  size_t advance(); // takes sample position_; returns its dataset
  std::vector<double> weights_;
  std::vector<int64_t> taken_; // per dataset, before position_
  int64_t position_ = 0;
};

} // namespace megart
