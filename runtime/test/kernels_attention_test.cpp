#include "kernels_test_util.h"
#include "megart/kernels.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <string>

namespace {

using namespace megart::test;
namespace cpu = megart::cpu;

struct AttnShape {
  int64_t batch, seq, q_heads, kv_heads, head_dim;
  bool causal;
  int64_t window = 0; // causal only: each query sees itself and at most `window` keys before it
  int64_t q_numel() const { return batch * seq * q_heads * head_dim; }
  int64_t kv_numel() const { return batch * seq * kv_heads * head_dim; }
  float scale() const { return 1.0f / std::sqrt(static_cast<float>(head_dim)); }
  std::string name() const {
    return std::to_string(batch) + "x" + std::to_string(seq) + " q" + std::to_string(q_heads) +
           " kv" + std::to_string(kv_heads) + " d" + std::to_string(head_dim) +
           (causal ? " causal" : " full") + (window ? " window " + std::to_string(window) : "");
  }
};

// Naive double reference: full score matrix per (batch, head), explicit mask and softmax.
// With dropout, probability (b, h, i, j) is scaled by the documented mask (megart/dropout.h).
DVec ref_attention(const DVec& q, const DVec& k, const DVec& v, const AttnShape& s,
                   const megart::AttentionDropout& drop = {}) {
  DVec out(q.size(), 0.0);
  const int64_t D = s.head_dim, group = s.q_heads / s.kv_heads;
  auto qa = [&](int64_t b, int64_t t, int64_t h) { return ((b * s.seq + t) * s.q_heads + h) * D; };
  auto ka = [&](int64_t b, int64_t t, int64_t g) { return ((b * s.seq + t) * s.kv_heads + g) * D; };
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.q_heads; ++h)
      for (int64_t i = 0; i < s.seq; ++i) {
        const int64_t g = h / group;
        DVec sc(s.seq, -INFINITY);
        double mx = -INFINITY;
        for (int64_t j = 0; j < s.seq; ++j) {
          if (s.causal && (j > i || (s.window > 0 && i - j > s.window)))
            continue;
          double d = 0.0;
          for (int64_t e = 0; e < D; ++e)
            d += q[qa(b, i, h) + e] * k[ka(b, j, g) + e];
          sc[j] = d * static_cast<double>(s.scale());
          mx = std::max(mx, sc[j]);
        }
        double sum = 0.0;
        for (double& x : sc) {
          x = std::exp(x - mx); // masked: exp(-inf) = 0
          sum += x;
        }
        for (int64_t j = 0; j < s.seq; ++j) {
          double m = 1.0;
          if (drop.rate != 0.0f) {
            const uint64_t e = (((drop.first_sample + b) * drop.heads + drop.head_offset + h) * s.seq + i) * s.seq + j;
            m = megart::dropout_bits(drop.key, e) >= megart::dropout_keep_threshold(drop.rate)
                    ? megart::dropout_keep_scale(drop.rate) : 0.0;
          }
          for (int64_t e = 0; e < D; ++e)
            out[qa(b, i, h) + e] += sc[j] / sum * m * v[ka(b, j, g) + e];
        }
      }
  return out;
}

const AttnShape kShapes[] = {
    {1, 1, 1, 1, 4, true},    {2, 5, 4, 2, 8, true},  {2, 5, 4, 2, 8, false},
    {1, 7, 4, 4, 6, true},    {2, 6, 6, 3, 5, false}, {1, 9, 4, 1, 3, true},
    {3, 4, 2, 2, 16, false},  {1, 33, 4, 2, 4, true},
    // Sliding windows (Mistral's): narrower than the sequence, one key, and as wide as it.
    {2, 9, 4, 2, 8, true, 3}, {1, 33, 4, 2, 4, true, 5}, {1, 6, 2, 1, 4, true, 1}, {1, 5, 2, 2, 4, true, 4},
};

// The scale is folded into the scores in float; the float kernel's dot products over head_dim
// and sums over <= 33 keys keep errors around 1e-7 of the output scale.
constexpr double kForwardRtol = 1e-5;
// Backward: dS = p (dP - sum p dP) cancels when dP is nearly constant over keys; with the rms
// floor, 3e-5 covers the few float roundings on each term and still flags any wrong term
// (those are off by O(1) relative).
constexpr double kBackwardRtol = 3e-5;

TEST(KernelsAttention, ForwardMatchesReference) {
  for (const AttnShape& s : kShapes) {
    const Vec q = random_vec(s.q_numel(), 1, -2.0f, 2.0f), k = random_vec(s.kv_numel(), 2, -2.0f, 2.0f),
              v = random_vec(s.kv_numel(), 3);
    Vec out(s.q_numel(), 99.0f);
    cpu::attention_forward(out.data(), q.data(), k.data(), v.data(), s.batch, s.seq, s.q_heads,
                           s.kv_heads, s.head_dim, s.scale(), s.causal, s.window);
    expect_close(out, ref_attention(to_double(q), to_double(k), to_double(v), s), kForwardRtol,
                 "attention " + s.name());
  }
}

TEST(KernelsAttention, BackwardMatchesFiniteDifferences) {
  for (const AttnShape& s : kShapes) {
    const Vec q = random_vec(s.q_numel(), 4, -2.0f, 2.0f), k = random_vec(s.kv_numel(), 5, -2.0f, 2.0f),
              v = random_vec(s.kv_numel(), 6), dout = random_vec(s.q_numel(), 7);
    Vec dq(q.size(), 99.0f), dk(k.size(), 99.0f), dv(v.size(), 99.0f);
    cpu::attention_backward(dq.data(), dk.data(), dv.data(), dout.data(), q.data(), k.data(),
                            v.data(), s.batch, s.seq, s.q_heads, s.kv_heads, s.head_dim,
                            s.scale(), s.causal, s.window);
    const DVec qd = to_double(q), kd = to_double(k), vd = to_double(v), dd = to_double(dout);
    expect_close(dq, fd_grad([&](const DVec& x) { return ref_attention(x, kd, vd, s); }, qd, dd),
                 kBackwardRtol, "attention dq " + s.name());
    expect_close(dk, fd_grad([&](const DVec& x) { return ref_attention(qd, x, vd, s); }, kd, dd),
                 kBackwardRtol, "attention dk " + s.name());
    expect_close(dv, fd_grad([&](const DVec& x) { return ref_attention(qd, kd, x, s); }, vd, dd),
                 kBackwardRtol, "attention dv " + s.name());
  }
}

megart::AttentionDropout attention_dropout(float rate, int64_t first_sample, int64_t head_offset, int64_t heads) {
  return {rate, /*key=*/0x5eedull, first_sample, head_offset, heads};
}

TEST(KernelsAttention, DropoutMatchesReference) {
  for (const AttnShape& s : kShapes) {
    const Vec q = random_vec(s.q_numel(), 1, -2.0f, 2.0f), k = random_vec(s.kv_numel(), 2, -2.0f, 2.0f),
              v = random_vec(s.kv_numel(), 3), dout = random_vec(s.q_numel(), 7);
    const megart::AttentionDropout drop = attention_dropout(0.3f, 3, 1, s.q_heads + 2);
    Vec out(s.q_numel(), 99.0f), plain(s.q_numel());
    cpu::attention_forward(out.data(), q.data(), k.data(), v.data(), s.batch, s.seq, s.q_heads, s.kv_heads,
                           s.head_dim, s.scale(), s.causal, s.window, drop);
    const DVec qd = to_double(q), kd = to_double(k), vd = to_double(v), dd = to_double(dout);
    expect_close(out, ref_attention(qd, kd, vd, s, drop), kForwardRtol, "attention dropout " + s.name());
    Vec dq(q.size(), 99.0f), dk(k.size(), 99.0f), dv(v.size(), 99.0f);
    cpu::attention_backward(dq.data(), dk.data(), dv.data(), dout.data(), q.data(), k.data(), v.data(), s.batch,
                            s.seq, s.q_heads, s.kv_heads, s.head_dim, s.scale(), s.causal, s.window, drop);
    expect_close(dq, fd_grad([&](const DVec& x) { return ref_attention(x, kd, vd, s, drop); }, qd, dd),
                 kBackwardRtol, "attention dropout dq " + s.name());
    expect_close(dk, fd_grad([&](const DVec& x) { return ref_attention(qd, x, vd, s, drop); }, kd, dd),
                 kBackwardRtol, "attention dropout dk " + s.name());
    expect_close(dv, fd_grad([&](const DVec& x) { return ref_attention(qd, kd, x, s, drop); }, vd, dd),
                 kBackwardRtol, "attention dropout dv " + s.name());
  }
}

// Tensor parallelism: a rank with query heads [2, 4) of 4 (kv head 1 of 2) and head offset 2
// drops what the whole layer drops on those heads, so its output rows are the whole's.
TEST(KernelsAttention, DropoutOfAHeadSplitIsTheWholes) {
  const AttnShape whole{2, 6, 4, 2, 4, true}, half{2, 6, 2, 1, 4, true};
  const Vec q = random_vec(whole.q_numel(), 11, -2.0f, 2.0f), k = random_vec(whole.kv_numel(), 12, -2.0f, 2.0f),
            v = random_vec(whole.kv_numel(), 13);
  Vec out(q.size());
  cpu::attention_forward(out.data(), q.data(), k.data(), v.data(), whole.batch, whole.seq, whole.q_heads,
                         whole.kv_heads, whole.head_dim, whole.scale(), true, 0, attention_dropout(0.5f, 0, 0, 4));
  auto rows = [](const Vec& x, int64_t heads, int64_t first, int64_t count, int64_t rows_total) {
    Vec r; // heads [first, first + count) of every (batch, seq) row, head_dim 4
    for (int64_t t = 0; t < rows_total; ++t)
      r.insert(r.end(), x.begin() + (t * heads + first) * 4, x.begin() + (t * heads + first + count) * 4);
    return r;
  };
  const Vec qh = rows(q, 4, 2, 2, 12), kh = rows(k, 2, 1, 1, 12), vh = rows(v, 2, 1, 1, 12);
  Vec local(qh.size());
  cpu::attention_forward(local.data(), qh.data(), kh.data(), vh.data(), half.batch, half.seq, half.q_heads,
                         half.kv_heads, half.head_dim, half.scale(), true, 0, attention_dropout(0.5f, 0, 2, 4));
  EXPECT_EQ(local, rows(out, 4, 2, 2, 12));
  Vec other(q.size()); // another key drops other probabilities
  cpu::attention_forward(other.data(), q.data(), k.data(), v.data(), whole.batch, whole.seq, whole.q_heads,
                         whole.kv_heads, whole.head_dim, whole.scale(), true, 0, {0.5f, 0x5eedull + 1, 0, 0, 4});
  EXPECT_NE(other, out);
}

TEST(KernelsAttention, BadDropoutThrows) {
  const AttnShape s{1, 3, 2, 1, 4, true};
  Vec q(s.q_numel(), 0.1f), k(s.kv_numel(), 0.1f), v(s.kv_numel(), 0.1f), out(q.size());
  auto run = [&](megart::AttentionDropout d) {
    cpu::attention_forward(out.data(), q.data(), k.data(), v.data(), s.batch, s.seq, s.q_heads, s.kv_heads,
                           s.head_dim, s.scale(), true, 0, d);
  };
  EXPECT_THROW(run(attention_dropout(1.0f, 0, 0, 2)), megart::Error);
  EXPECT_THROW(run(attention_dropout(0.1f, 0, 1, 2)), megart::Error); // heads [1, 3) of 2
  EXPECT_NO_THROW(run(attention_dropout(0.1f, 0, 0, 2)));
}

// Decoding position by position with a KV cache gives attention_forward's causal rows bit for
// bit (the same arithmetic over the cached keys), grouped-query heads included.
// With a sliding window, the cached positions inside it.
void expect_decode_is_the_causal_forward(const AttnShape& s) {
  const Vec q = random_vec(s.q_numel(), 21, -2.0f, 2.0f), k = random_vec(s.kv_numel(), 22, -2.0f, 2.0f),
            v = random_vec(s.kv_numel(), 23);
  Vec whole(q.size());
  cpu::attention_forward(whole.data(), q.data(), k.data(), v.data(), s.batch, s.seq, s.q_heads, s.kv_heads,
                         s.head_dim, s.scale(), true, s.window);
  const int64_t layers = 3, layer = 1, qrow = s.q_heads * s.head_dim, kvrow = s.kv_heads * s.head_dim;
  std::vector<Vec> keys(layers, Vec(s.batch * s.seq * kvrow, 7.0f)), values = keys;
  std::vector<float*> kp, vp;
  for (int64_t l = 0; l < layers; ++l) {
    kp.push_back(keys[l].data());
    vp.push_back(values[l].data());
  }
  megart::KvCache cache{kp.data(), vp.data(), layers, s.seq, 0};
  for (int64_t t = 0; t < s.seq; ++t) {
    Vec qt, kt, vt, out(s.batch * qrow, 99.0f); // position t of each sample
    for (int64_t b = 0; b < s.batch; ++b) {
      qt.insert(qt.end(), q.begin() + (b * s.seq + t) * qrow, q.begin() + (b * s.seq + t + 1) * qrow);
      kt.insert(kt.end(), k.begin() + (b * s.seq + t) * kvrow, k.begin() + (b * s.seq + t + 1) * kvrow);
      vt.insert(vt.end(), v.begin() + (b * s.seq + t) * kvrow, v.begin() + (b * s.seq + t + 1) * kvrow);
    }
    cache.position = t;
    cpu::attention_decode(out.data(), qt.data(), kt.data(), vt.data(), cache, layer, s.batch, s.q_heads, s.kv_heads,
                          s.head_dim, s.scale(), s.window);
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t i = 0; i < qrow; ++i)
        ASSERT_EQ(out[b * qrow + i], whole[(b * s.seq + t) * qrow + i])
            << "position " << t << " sample " << b << " " << s.name();
  }
  EXPECT_EQ(keys[0], Vec(keys[0].size(), 7.0f)); // other layers' caches untouched
  EXPECT_EQ(Vec(keys[1].begin(), keys[1].begin() + s.seq * kvrow), Vec(k.begin(), k.begin() + s.seq * kvrow));
  Vec out(s.batch * qrow);
  cache.position = s.seq; // past the cache
  EXPECT_THROW(cpu::attention_decode(out.data(), q.data(), k.data(), v.data(), cache, layer, s.batch, s.q_heads,
                                     s.kv_heads, s.head_dim, s.scale()),
               megart::Error);
  cache.position = 0;
  EXPECT_THROW(cpu::attention_decode(out.data(), q.data(), k.data(), v.data(), cache, layers, s.batch, s.q_heads,
                                     s.kv_heads, s.head_dim, s.scale()),
               megart::Error);
}

TEST(KernelsAttention, DecodeWithACacheIsTheCausalForward) {
  expect_decode_is_the_causal_forward({2, 7, 4, 2, 8, true});
  expect_decode_is_the_causal_forward({2, 7, 4, 2, 8, true, 3}); // Mistral's window, narrower than the cache
}

// A window that sees every earlier key is plain causal attention; a narrower one is not.
TEST(KernelsAttention, AWindowAsWideAsTheSequenceIsCausal) {
  const AttnShape s{1, 8, 2, 1, 4, true};
  const Vec q = random_vec(s.q_numel(), 31, -2.0f, 2.0f), k = random_vec(s.kv_numel(), 32, -2.0f, 2.0f),
            v = random_vec(s.kv_numel(), 33);
  auto run = [&](int64_t window) {
    Vec out(q.size());
    cpu::attention_forward(out.data(), q.data(), k.data(), v.data(), s.batch, s.seq, s.q_heads, s.kv_heads,
                           s.head_dim, s.scale(), true, window);
    return out;
  };
  EXPECT_EQ(run(7), run(0));
  EXPECT_NE(run(6), run(0));
}

TEST(KernelsAttention, BadWindowThrows) {
  Vec buf(64, 0.5f);
  EXPECT_THROW(cpu::attention_forward(buf.data(), buf.data(), buf.data(), buf.data(), 1, 2, 2, 2, 2, 1.0f,
                                      /*causal=*/false, 1),
               megart::Error);
  EXPECT_THROW(cpu::attention_backward(buf.data(), buf.data(), buf.data(), buf.data(), buf.data(), buf.data(),
                                       buf.data(), 1, 2, 2, 2, 2, 1.0f, true, -1),
               megart::Error);
}

TEST(KernelsAttention, BackwardIsDeterministicAcrossThreadCounts) {
  // Large enough to pass the kernel's parallel threshold, with several (batch, kv head) tasks.
  const AttnShape s{3, 48, 4, 2, 16, true};
  const Vec q = random_vec(s.q_numel(), 8, -2.0f, 2.0f), k = random_vec(s.kv_numel(), 9, -2.0f, 2.0f),
            v = random_vec(s.kv_numel(), 10), dout = random_vec(s.q_numel(), 11);
  auto run = [&](int threads, Vec& dq, Vec& dk, Vec& dv) {
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    dq.assign(q.size(), 0.0f);
    dk.assign(k.size(), 0.0f);
    dv.assign(v.size(), 0.0f);
    cpu::attention_backward(dq.data(), dk.data(), dv.data(), dout.data(), q.data(), k.data(),
                            v.data(), s.batch, s.seq, s.q_heads, s.kv_heads, s.head_dim,
                            s.scale(), s.causal, s.window);
    omp_set_num_threads(saved);
  };
  Vec dq1, dk1, dv1, dq2, dk2, dv2, dq3, dk3, dv3;
  run(1, dq1, dk1, dv1);
  run(2, dq2, dk2, dv2);
  run(5, dq3, dk3, dv3);
  EXPECT_EQ(dq1, dq2);
  EXPECT_EQ(dk1, dk2);
  EXPECT_EQ(dv1, dv2);
  EXPECT_EQ(dq1, dq3);
  EXPECT_EQ(dk1, dk3);
  EXPECT_EQ(dv1, dv3);
}

TEST(KernelsAttention, LargeScoresStayStable) {
  // Scores around +-400 would overflow a naive exp; the max shift keeps the softmax finite.
  const AttnShape s{1, 6, 2, 1, 4, false};
  const Vec q = random_vec(s.q_numel(), 12, -20.0f, 20.0f),
            k = random_vec(s.kv_numel(), 13, -20.0f, 20.0f), v = random_vec(s.kv_numel(), 14);
  Vec out(s.q_numel());
  cpu::attention_forward(out.data(), q.data(), k.data(), v.data(), s.batch, s.seq, s.q_heads,
                         s.kv_heads, s.head_dim, 2.0f, s.causal);
  for (float x : out)
    EXPECT_TRUE(std::isfinite(x));
}

TEST(KernelsAttention, HeadsNotDivisibleThrows) {
  Vec buf(64, 0.5f);
  EXPECT_THROW(cpu::attention_forward(buf.data(), buf.data(), buf.data(), buf.data(), 1, 2, 3, 2,
                                      2, 1.0f, true),
               megart::Error);
}

} // namespace
