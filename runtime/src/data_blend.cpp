#include "megart/data_blend.h"

#include "megart/error.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <regex>

namespace megart {

namespace {

// A whole-string finite number, or nothing.
bool parse_number(const std::string &text, double &value) {
  if (text.empty())
    return false;
  char *end = nullptr;
  errno = 0;
  value = std::strtod(text.c_str(), &end);
  return end == text.c_str() + text.size() && errno == 0 && std::isfinite(value);
}

std::string share_text(double share) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", share);
  return buf;
}

} // namespace

std::vector<BlendEntry> parse_blend(const std::vector<std::string> &values, const std::string &flag) {
  if (values.empty())
    throw Error(flag + " needs a dataset prefix, or weights and prefixes: " + flag + " 0.3 PREFIX_A 0.7 PREFIX_B");
  std::vector<BlendEntry> blend;
  size_t numbers = 0;
  for (size_t i = 0; i + 1 < values.size(); i += 2) {
    double w;
    numbers += parse_number(values[i], w);
  }
  const bool weighted = values.size() % 2 == 0 && numbers == values.size() / 2;
  if (!weighted) {
    for (const std::string &v : values) {
      double w;
      if (parse_number(v, w))
        throw Error(flag + ": " + v + " looks like a weight, but the values are not weight-prefix pairs; give " +
                    flag + " W1 PREFIX1 W2 PREFIX2 ..., or prefixes alone");
      blend.push_back({-1, v});
    }
    return blend;
  }
  double total = 0;
  for (size_t i = 0; i < values.size(); i += 2) {
    double w = 0;
    parse_number(values[i], w);
    if (w < 0)
      throw Error(flag + ": weight " + values[i] + " of " + values[i + 1] + " is negative; weights must be >= 0");
    total += w;
    blend.push_back({w, values[i + 1]});
  }
  if (!(total > 0))
    throw Error(flag + ": the weights add up to 0; give at least one dataset a positive weight");
  if (!std::isfinite(total))
    throw Error(flag + ": the weights add up to more than a double holds; scale them down (only their ratios count)");
  for (BlendEntry &e : blend) {
    // A share below 1e-15 draws no sample in any run (and a subnormal one loses its value):
    // say so rather than drop the dataset silently.
    if (e.weight > 0 && e.weight / total < 1e-15)
      throw Error(flag + ": the weight of " + e.prefix + " is " + share_text(e.weight / total) +
                  " of the total, so it would give no sample; weights are relative: give it 0 to leave it out, or "
                  "weights whose ratios are below 1e15");
    e.weight /= total;
  }
  return blend;
}

std::vector<double> parse_split(const std::string &text) {
  // Megatron reads every run of digits and dots as a number: "949,50,1", "949, 50, 1", "98/2".
  if (text.find('-') != std::string::npos)
    throw Error("--split " + text + ": the parts must not be negative; e.g. --split 949,50,1");
  static const std::regex number("[.0-9]+");
  std::vector<double> split;
  for (std::sregex_iterator it(text.begin(), text.end(), number), end; it != end; ++it) {
    double v;
    if (!parse_number(it->str(), v))
      throw Error("--split " + text + ": " + it->str() + " is not a number");
    split.push_back(v);
  }
  if (split.empty() || split.size() > 3)
    throw Error("--split " + text + ": needs one to three numbers (train, valid, test), e.g. --split 949,50,1");
  split.resize(3, 0.0);
  const double total = split[0] + split[1] + split[2];
  if (!(total > 0))
    throw Error("--split " + text + ": the parts add up to 0; e.g. --split 949,50,1");
  for (double &v : split)
    v /= total;
  return split;
}

DocumentRange split_documents(const std::vector<double> &split, int which, int64_t num_documents) {
  double before = 0;
  for (int i = 0; i < which; ++i)
    before += split.at(static_cast<size_t>(i));
  const double after = before + split.at(static_cast<size_t>(which));
  const double n = static_cast<double>(num_documents);
  // Megatron rounds each bookend (Python's round: halves to even, as std::nearbyint does).
  return {static_cast<int64_t>(std::nearbyint(before * n)), static_cast<int64_t>(std::nearbyint(after * n))};
}

BlendOrder::BlendOrder(std::vector<double> weights)
    : weights_(std::move(weights)), taken_(weights_.size(), 0) {}

size_t BlendOrder::advance() {
  const double i = std::max(static_cast<double>(position_), 1.0);
  size_t best = 0;
  double best_error = weights_[0] * i - static_cast<double>(taken_[0]);
  for (size_t d = 1; d < weights_.size(); ++d) {
    const double error = weights_[d] * i - static_cast<double>(taken_[d]);
    if (error > best_error) {
      best_error = error;
      best = d;
    }
  }
  ++taken_[best];
  ++position_;
  return best;
}

std::pair<int, int64_t> BlendOrder::at(int64_t position) {
  if (position < position_) {
    std::fill(taken_.begin(), taken_.end(), 0);
    position_ = 0;
  }
  while (position_ < position)
    advance();
  const size_t d = advance();
  return {static_cast<int>(d), taken_[d] - 1};
}

BlendOrder::Counts BlendOrder::counts(int64_t count, int64_t walk_limit) const {
  if (count <= walk_limit) {
    BlendOrder walk(weights_);
    while (walk.position_ < count)
      walk.advance();
    return {walk.taken_, true};
  }
  // floor(weight x count) each, then the samples left over to the largest remainders (the first
  // dataset on ties, as the walk). long double: a count near 2^63 keeps its last digits.
  const long double n = static_cast<long double>(count);
  std::vector<int64_t> samples(weights_.size());
  std::vector<long double> remainder(weights_.size());
  int64_t left = count;
  for (size_t d = 0; d < weights_.size(); ++d) {
    const long double share = static_cast<long double>(weights_[d]) * n;
    samples[d] = std::min(static_cast<int64_t>(std::floor(share)), left);
    remainder[d] = share - static_cast<long double>(samples[d]);
    left -= samples[d];
  }
  std::vector<size_t> order(weights_.size());
  for (size_t d = 0; d < order.size(); ++d)
    order[d] = d;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return remainder[a] > remainder[b]; });
  for (size_t j = 0; left > 0; j = (j + 1) % order.size(), --left) // weights add up to ~1: a few at most
    ++samples[order[j]];
  return {samples, false};
}

} // namespace megart
