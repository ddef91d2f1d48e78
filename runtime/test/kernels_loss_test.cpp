#include "kernels_test_util.h"
#include "megart/kernels.h"
#include "megart/parallel_kernels.h"

#include <cmath>
#include <string>
#include <tuple>

namespace {

using namespace megart::test;
namespace cpu = megart::cpu;

double ref_cross_entropy(const DVec& logits, const std::vector<int32_t>& labels, int64_t vocab,
                         int64_t valid) {
  double total = 0.0;
  for (size_t t = 0; t < labels.size(); ++t) {
    const double* row = logits.data() + t * vocab;
    double mx = row[0];
    for (int64_t j = 0; j < valid; ++j)
      mx = std::max(mx, row[j]);
    double sum = 0.0;
    for (int64_t j = 0; j < valid; ++j)
      sum += std::exp(row[j] - mx);
    total += std::log(sum) + mx - row[labels[t]];
  }
  return total / static_cast<double>(labels.size());
}

// Analytic gradient in double: dloss (softmax - onehot) / tokens, 0 on padded columns.
DVec ref_grad(const DVec& logits, const std::vector<int32_t>& labels, int64_t vocab, int64_t valid,
              double dloss) {
  DVec g(logits.size(), 0.0);
  const double tokens = static_cast<double>(labels.size());
  for (size_t t = 0; t < labels.size(); ++t) {
    const double* row = logits.data() + t * vocab;
    double mx = row[0], sum = 0.0;
    for (int64_t j = 0; j < valid; ++j)
      mx = std::max(mx, row[j]);
    for (int64_t j = 0; j < valid; ++j)
      sum += std::exp(row[j] - mx);
    for (int64_t j = 0; j < valid; ++j)
      g[t * vocab + j] = dloss * (std::exp(row[j] - mx) / sum - (j == labels[t])) / tokens;
  }
  return g;
}

std::vector<int32_t> random_labels(int64_t tokens, int64_t valid, uint32_t seed) {
  const Vec r = random_vec(tokens, seed, 0.0f, 1.0f);
  std::vector<int32_t> labels(tokens);
  for (int64_t t = 0; t < tokens; ++t)
    labels[t] = std::min<int32_t>(static_cast<int32_t>(r[t] * valid), valid - 1);
  return labels;
}

// Padded columns hold large values: if they leaked into the softmax the loss would move by O(1).
Vec logits_with_padding(int64_t tokens, int64_t vocab, int64_t valid, uint32_t seed) {
  Vec logits = random_vec(tokens * vocab, seed, -4.0f, 4.0f);
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t j = valid; j < vocab; ++j)
      logits[t * vocab + j] = 50.0f;
  return logits;
}

// (tokens, vocab, valid_vocab)
const std::tuple<int64_t, int64_t, int64_t> kShapes[] = {
    {1, 1, 1}, {1, 5, 5}, {7, 11, 11}, {7, 16, 11}, {40, 129, 100}, {300, 64, 64}};

TEST(KernelsLoss, ForwardMatchesReference) {
  for (const auto& [tokens, vocab, valid] : kShapes) {
    const Vec logits = logits_with_padding(tokens, vocab, valid, 1);
    const auto labels = random_labels(tokens, valid, 2);
    const float got = cpu::cross_entropy_forward(logits.data(), labels.data(), tokens, vocab, valid);
    const double want = ref_cross_entropy(to_double(logits), labels, vocab, valid);
    // Summed in double; only the final rounding to float and the float logits remain.
    EXPECT_NEAR(got, want, 1e-6 * (std::fabs(want) + 1e-3))
        << tokens << "x" << vocab << " valid " << valid;
  }
}

TEST(KernelsLoss, BackwardMatchesFiniteDifferencesAndZeroesPadding) {
  for (const auto& [tokens, vocab, valid] : kShapes) {
    const Vec logits = logits_with_padding(tokens, vocab, valid, 3);
    const auto labels = random_labels(tokens, valid, 4);
    const float dloss = 1.75f;
    Vec dlogits(tokens * vocab, 99.0f);
    cpu::cross_entropy_backward(dlogits.data(), dloss, logits.data(), labels.data(), tokens, vocab,
                                valid);
    const std::string shape = std::to_string(tokens) + "x" + std::to_string(vocab);
    // Softmax in double, rounded once to float: 1e-5 against the rms floor is generous.
    expect_close(dlogits, ref_grad(to_double(logits), labels, vocab, valid, dloss), 1e-5,
                 "cross_entropy grad " + shape);
    // Finite differences re-evaluate the whole loss per element: small shapes only.
    if (tokens * vocab <= 6000)
      expect_close(dlogits,
                   fd_grad([&](const DVec& x) {
                     return DVec{ref_cross_entropy(x, labels, vocab, valid)};
                   }, to_double(logits), DVec{dloss}),
                   1e-5, "cross_entropy grad (finite differences) " + shape);
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t j = valid; j < vocab; ++j)
        EXPECT_EQ(dlogits[t * vocab + j], 0.0f) << "padded column " << j;
  }
}

TEST(KernelsLoss, LargeLogitsStayFinite) {
  const int64_t tokens = 3, vocab = 4;
  const Vec logits = {1000.0f, -1000.0f, 999.0f, 0.0f, 88.0f, 89.0f, 90.0f, -90.0f,
                      -500.0f, -501.0f, -502.0f, -503.0f};
  const std::vector<int32_t> labels = {1, 2, 0};
  const float loss = cpu::cross_entropy_forward(logits.data(), labels.data(), tokens, vocab, vocab);
  EXPECT_NEAR(loss, ref_cross_entropy(to_double(logits), labels, vocab, vocab), 1e-3);
  Vec d(tokens * vocab);
  cpu::cross_entropy_backward(d.data(), 1.0f, logits.data(), labels.data(), tokens, vocab, vocab);
  for (float x : d)
    EXPECT_TRUE(std::isfinite(x));
}

TEST(KernelsLoss, BadArgumentsThrow) {
  const int64_t tokens = 3, vocab = 8, valid = 6;
  const Vec logits = random_vec(tokens * vocab, 5);
  Vec d(tokens * vocab);
  // -1, a padded column (6), and past the end (8) are all rejected.
  for (int32_t bad : {-1, 6, 8}) {
    const std::vector<int32_t> labels = {0, bad, 1};
    try {
      cpu::cross_entropy_forward(logits.data(), labels.data(), tokens, vocab, valid);
      ADD_FAILURE() << "label " << bad << " accepted";
    } catch (const megart::Error& e) {
      EXPECT_NE(std::string(e.what()).find("position 1"), std::string::npos) << e.what();
    }
    EXPECT_THROW(cpu::cross_entropy_backward(d.data(), 1.0f, logits.data(), labels.data(), tokens,
                                             vocab, valid),
                 megart::Error);
  }
  const std::vector<int32_t> ok = {0, 1, 2};
  EXPECT_THROW(cpu::cross_entropy_forward(logits.data(), ok.data(), tokens, vocab, vocab + 1),
               megart::Error);
  EXPECT_THROW(cpu::cross_entropy_forward(logits.data(), ok.data(), 0, vocab, vocab),
               megart::Error);
}

// A masked LM's loss: tokens labelled ignore_index (-100) take no part. The mean is the plain
// loss of the others alone, their rows' gradients are the plain gradient of those rows alone
// (1 / counted, not 1 / tokens), the ignored rows 0; the vocabulary-parallel pieces agree.
TEST(KernelsLoss, IgnoredLabelsTakeNoPart) {
  const int64_t tokens = 9, vocab = 16, valid = 13;
  const Vec logits = logits_with_padding(tokens, vocab, valid, 21);
  std::vector<int32_t> labels = random_labels(tokens, valid, 22);
  std::vector<int32_t> kept_labels;
  Vec kept;
  for (int64_t t = 0; t < tokens; ++t) {
    if (t % 3 == 1) {
      labels[t] = -100;
      continue;
    }
    kept_labels.push_back(labels[t]);
    kept.insert(kept.end(), logits.begin() + t * vocab, logits.begin() + (t + 1) * vocab);
  }
  const int64_t n = static_cast<int64_t>(kept_labels.size());
  const float loss = cpu::cross_entropy_forward(logits.data(), labels.data(), tokens, vocab, valid, -100);
  EXPECT_EQ(loss, cpu::cross_entropy_forward(kept.data(), kept_labels.data(), n, vocab, valid));
  EXPECT_NE(loss, cpu::cross_entropy_forward(logits.data(), random_labels(tokens, valid, 22).data(), tokens, vocab,
                                             valid));
  Vec d(tokens * vocab, 99.0f), d_kept(n * vocab);
  cpu::cross_entropy_backward(d.data(), 0.75f, logits.data(), labels.data(), tokens, vocab, valid, -100);
  cpu::cross_entropy_backward(d_kept.data(), 0.75f, kept.data(), kept_labels.data(), n, vocab, valid);
  for (int64_t t = 0, k = 0; t < tokens; ++t) {
    const Vec row(d.begin() + t * vocab, d.begin() + (t + 1) * vocab);
    if (labels[t] == -100) {
      EXPECT_EQ(row, Vec(vocab, 0.0f)) << "ignored row " << t;
      continue;
    }
    EXPECT_EQ(row, Vec(d_kept.begin() + k * vocab, d_kept.begin() + (k + 1) * vocab)) << "row " << t;
    ++k;
  }
  // The statistics' path (tp's vocabulary-parallel cross-entropy) on one whole share.
  Vec max(tokens), sum(tokens), target(tokens), d_stats(tokens * vocab);
  cpu::logits_max(max.data(), logits.data(), tokens, vocab, valid);
  cpu::logits_sum_exp(sum.data(), logits.data(), max.data(), tokens, vocab, valid);
  cpu::target_logit(target.data(), logits.data(), labels.data(), tokens, vocab, 0);
  EXPECT_NEAR(cpu::cross_entropy_from_stats(max.data(), sum.data(), target.data(), tokens, labels.data(), -100), loss,
              1e-6 * std::abs(loss));
  cpu::cross_entropy_backward_from_stats(d_stats.data(), 0.75f, logits.data(), labels.data(), max.data(), sum.data(),
                                         tokens, vocab, 0, valid, -100);
  expect_close(d_stats, to_double(d), 1e-5, "gradient from statistics, ignored labels");
  // Nothing counted: loss and gradient 0.
  const std::vector<int32_t> none(tokens, -100);
  EXPECT_EQ(cpu::cross_entropy_forward(logits.data(), none.data(), tokens, vocab, valid, -100), 0.0f);
  cpu::cross_entropy_backward(d.data(), 1.0f, logits.data(), none.data(), tokens, vocab, valid, -100);
  EXPECT_EQ(d, Vec(d.size(), 0.0f));
  // -100 without ignore_index is a bad label.
  EXPECT_THROW(cpu::cross_entropy_forward(logits.data(), labels.data(), tokens, vocab, valid), megart::Error);
}

} // namespace
