// The 16-bit (bf16_t / fp16_t) overloads of the CPU kernels against their contract: the float
// kernel on the widened inputs, each stored value rounded once (bitwise). And the fp16
// conversions of megart/half.h.
#include "megart/half.h"
#include "megart/kernels.h"
#include "megart/layout_kernels.h"
#include "megart/parallel_kernels.h"

#include "kernels_test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <tuple>
#include <type_traits>
#include <vector>

namespace {

using megart::bf16_t;
using megart::fp16_t;
using megart::from_float;
using megart::to_float;
using megart::Precision;
using megart::test::random_vec;
using megart::test::Vec;
namespace cpu = megart::cpu;

template <typename T> constexpr Precision precision_of() {
  return std::is_same_v<T, bf16_t> ? Precision::Bf16 : Precision::Fp16;
}

// Stored as T (float: as given).
template <typename T> std::vector<T> narrow(const Vec& v) {
  std::vector<T> out(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    out[i] = from_float<T>(v[i]);
  return out;
}
template <typename T> Vec widen(const std::vector<T>& v) {
  Vec out(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    out[i] = to_float(v[i]);
  return out;
}
// Random values of storage type T in [lo, hi).
template <typename T> std::vector<T> random_of(int64_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  return narrow<T>(random_vec(n, seed, lo, hi));
}

template <typename T> uint32_t bits_of(T x) {
  if constexpr (std::is_same_v<T, float>) {
    uint32_t u;
    std::memcpy(&u, &x, sizeof u);
    return u;
  } else {
    return x.bits;
  }
}

// got == want rounded to T, bit for bit (any NaN matches any NaN).
template <typename T> void expect_rounded(const std::vector<T>& got, const Vec& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const T w = from_float<T>(want[i]);
    if (std::isnan(to_float(got[i])) && std::isnan(to_float(w)))
      continue;
    if (bits_of(got[i]) != bits_of(w) && reported++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: got " << to_float(got[i]) << ", want " << to_float(w)
                    << " (fp32 " << want[i] << ")";
  }
}
void expect_same(const Vec& got, const Vec& want, const std::string& what) { expect_rounded(got, want, what); }

// For the activations: the float kernel's loops run glibc's vector expf / tanhf / erff, the
// 16-bit ones may run the scalar functions, and the two can round an ulp apart (in 1 + erf near
// -1 that ulp is large relative to the result). So: mostly the same bits, and every value within
// a few 16-bit ulps (relative to the values' size, as the float kernel tests compare).
template <typename T> void expect_rounded_libm(const std::vector<T>& got, const Vec& want, const std::string& what) {
  const std::vector<T> rounded = narrow<T>(want);
  size_t same = 0;
  for (size_t i = 0; i < got.size(); ++i)
    same += bits_of(got[i]) == bits_of(rounded[i]);
  EXPECT_GE(same, got.size() * 95 / 100) << what << ": " << same << " of " << got.size() << " bitwise equal";
  const double ulp = std::is_same_v<T, bf16_t> ? 0x1p-8 : 0x1p-11;
  megart::test::expect_close(widen(got), megart::test::to_double(want), 4 * ulp, what);
}

// Sets the gemm precision for a scope (the tests after it expect Fp32).
struct GemmPrecision {
  explicit GemmPrecision(Precision p) { cpu::set_gemm_precision(p); }
  ~GemmPrecision() { cpu::set_gemm_precision(Precision::Fp32); }
};

template <typename T> class KernelsHalf : public ::testing::Test {};
using HalfTypes = ::testing::Types<bf16_t, fp16_t>;
TYPED_TEST_SUITE(KernelsHalf, HalfTypes);

// ---- GEMM ----------------------------------------------------------------------------------

// An operand of type X: a 16-bit one holds T values, a float one arbitrary floats (rounded by
// the gemm precision).
template <typename X> std::vector<X> operand(int64_t n, uint32_t seed) {
  if constexpr (std::is_same_v<X, float>)
    return random_vec(n, seed);
  else
    return random_of<X>(n, seed);
}

template <typename T, typename C, typename Ta, typename Tb> void check_gemm() {
  const std::string what = std::string("gemm C") + (std::is_same_v<C, float> ? "f" : "h") +
                           " A" + (std::is_same_v<Ta, float> ? "f" : "h") + " B" +
                           (std::is_same_v<Tb, float> ? "f" : "h");
  const int64_t m = 13, n = 21, k = 17, batch = 3;
  const GemmPrecision guard(precision_of<T>());
  for (int t = 0; t < 4; ++t) {
    const bool ta = t & 1, tb = t & 2;
    const auto a = operand<Ta>(m * k, 1), b = operand<Tb>(k * n, 2);
    const auto c0 = operand<C>(m * n, 3);
    auto c = c0;
    cpu::gemm(c.data(), a.data(), b.data(), m, n, k, ta, tb, 0.75f, 0.5f);
    Vec want = widen(c0);
    cpu::gemm(want.data(), widen(a).data(), widen(b).data(), m, n, k, ta, tb, 0.75f, 0.5f);
    expect_rounded(c, want, what + " t" + std::to_string(t));
  }
  // Batched: A per batch, B broadcast, C per batch; then every product accumulated into one C.
  const auto a = operand<Ta>(batch * m * k, 4), b = operand<Tb>(k * n, 5);
  const auto c0 = operand<C>(batch * m * n, 6);
  for (const int64_t stride_c : {m * n, int64_t{0}}) {
    auto c = c0;
    cpu::gemm_batched(c.data(), a.data(), b.data(), batch, m, n, k, false, true, m * k, 0, stride_c, 1.0f, 1.0f);
    Vec want = widen(c0);
    cpu::gemm_batched(want.data(), widen(a).data(), widen(b).data(), batch, m, n, k, false, true, m * k, 0,
                      stride_c, 1.0f, 1.0f);
    expect_rounded(c, want, what + " batched stride_c " + std::to_string(stride_c));
  }
}

template <typename T, typename O, typename Ta, typename Tw> void check_gemm_bias() {
  const int64_t m = 11, n = 19, k = 23;
  const GemmPrecision guard(precision_of<T>());
  const auto a = operand<Ta>(m * k, 7), w = operand<Tw>(n * k, 8);
  const Vec bias = random_vec(n, 9);
  for (const bool tanh : {true, false}) {
    // Fused == the unfused kernels, each rounding its store.
    std::vector<O> pre(m * n), out(m * n), want_pre(m * n), want_out(m * n);
    cpu::gemm_bias_gelu(pre.data(), out.data(), a.data(), w.data(), bias.data(), m, n, k, true, tanh);
    cpu::gemm(want_pre.data(), a.data(), w.data(), m, n, k, false, true);
    cpu::add(want_pre.data(), want_pre.data(), bias.data(), m, n);
    if (tanh)
      cpu::gelu_tanh_forward(want_out.data(), want_pre.data(), m * n);
    else
      cpu::gelu_erf_forward(want_out.data(), want_pre.data(), m * n);
    expect_rounded(pre, widen(want_pre), "gemm_bias_gelu pre");
    expect_rounded(out, widen(want_out), "gemm_bias_gelu out");
    std::vector<O> biased(m * n);
    cpu::gemm_bias(biased.data(), a.data(), w.data(), bias.data(), m, n, k, true);
    expect_rounded(biased, widen(want_pre), "gemm_bias");
  }
}

// Every mix of float and T, C / A / B.
template <typename T, typename F> void for_each_mix(F&& f) {
  using Fl = float;
  f(static_cast<std::tuple<T, Fl, Fl>*>(nullptr));
  f(static_cast<std::tuple<Fl, T, Fl>*>(nullptr));
  f(static_cast<std::tuple<Fl, Fl, T>*>(nullptr));
  f(static_cast<std::tuple<T, T, Fl>*>(nullptr));
  f(static_cast<std::tuple<T, Fl, T>*>(nullptr));
  f(static_cast<std::tuple<Fl, T, T>*>(nullptr));
  f(static_cast<std::tuple<T, T, T>*>(nullptr));
}

TYPED_TEST(KernelsHalf, GemmEveryOperandMix) {
  for_each_mix<TypeParam>([](auto* mix) {
    using M = std::remove_pointer_t<decltype(mix)>;
    check_gemm<TypeParam, std::tuple_element_t<0, M>, std::tuple_element_t<1, M>, std::tuple_element_t<2, M>>();
  });
}

TYPED_TEST(KernelsHalf, GemmBiasAndGeluEqualTheUnfusedKernels) {
  for_each_mix<TypeParam>([](auto* mix) {
    using M = std::remove_pointer_t<decltype(mix)>;
    check_gemm_bias<TypeParam, std::tuple_element_t<0, M>, std::tuple_element_t<1, M>,
                    std::tuple_element_t<2, M>>();
  });
  EXPECT_EQ(cpu::gemm_precision(), Precision::Fp32);
}

TYPED_TEST(KernelsHalf, GemmEmptyInnerDimension) {
  using T = TypeParam;
  std::vector<T> c = random_of<T>(6, 1);
  const std::vector<T> a, b;
  const Vec c0 = widen(c);
  cpu::gemm(c.data(), a.data(), b.data(), 2, 3, 0, false, false, 1.0f, 2.0f);
  Vec want = c0;
  for (float& x : want)
    x *= 2.0f;
  expect_rounded(c, want, "gemm k = 0");
}

// ---- Embedding -----------------------------------------------------------------------------

TYPED_TEST(KernelsHalf, Embedding) {
  using T = TypeParam;
  const int64_t tokens = 40, vocab = 9, dim = 24;
  std::vector<int32_t> ids(tokens);
  for (int64_t t = 0; t < tokens; ++t)
    ids[t] = static_cast<int32_t>((t * 5) % vocab);
  const Vec table = random_vec(vocab * dim, 1);
  std::vector<T> out(tokens * dim);
  Vec want(tokens * dim);
  cpu::embedding_forward(out.data(), table.data(), ids.data(), tokens, vocab, dim);
  cpu::embedding_forward(want.data(), table.data(), ids.data(), tokens, vocab, dim);
  expect_rounded(out, want, "embedding_forward");

  const auto dout = random_of<T>(tokens * dim, 2);
  Vec dtable(vocab * dim), want_dtable(vocab * dim);
  cpu::embedding_backward(dtable.data(), dout.data(), ids.data(), tokens, vocab, dim);
  cpu::embedding_backward(want_dtable.data(), widen(dout).data(), ids.data(), tokens, vocab, dim);
  expect_same(dtable, want_dtable, "embedding_backward");

  // The shards: rows [3, 7) of the vocabulary.
  cpu::embedding_forward_shard(out.data(), table.data(), ids.data(), tokens, 4, dim, 3);
  cpu::embedding_forward_shard(want.data(), table.data(), ids.data(), tokens, 4, dim, 3);
  expect_rounded(out, want, "embedding_forward_shard");
  cpu::embedding_backward_shard(dtable.data(), dout.data(), ids.data(), tokens, 4, dim, 3);
  cpu::embedding_backward_shard(want_dtable.data(), widen(dout).data(), ids.data(), tokens, 4, dim, 3);
  expect_same(Vec(dtable.begin(), dtable.begin() + 4 * dim), Vec(want_dtable.begin(), want_dtable.begin() + 4 * dim),
              "embedding_backward_shard");
}

// ---- Normalization -------------------------------------------------------------------------

TYPED_TEST(KernelsHalf, LayerNormAndRmsNorm) {
  using T = TypeParam;
  const int64_t rows = 70, dim = 48; // rows > one block of the dw / db sums
  const float eps = 1e-5f;
  const auto x = random_of<T>(rows * dim, 1, -2.0f, 3.0f), dy = random_of<T>(rows * dim, 2);
  const Vec w = random_vec(dim, 3), b = random_vec(dim, 4), xf = widen(x), dyf = widen(dy);
  std::vector<T> y(rows * dim), dx(rows * dim);
  Vec want(rows * dim), dw(dim), db(dim), want_dw(dim), want_db(dim);

  cpu::layer_norm_forward(y.data(), x.data(), w.data(), b.data(), rows, dim, eps);
  cpu::layer_norm_forward(want.data(), xf.data(), w.data(), b.data(), rows, dim, eps);
  expect_rounded(y, want, "layer_norm_forward");
  cpu::layer_norm_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), rows, dim, eps);
  cpu::layer_norm_backward(want.data(), want_dw.data(), want_db.data(), dyf.data(), xf.data(), w.data(), rows, dim,
                           eps);
  expect_rounded(dx, want, "layer_norm_backward dx");
  expect_same(dw, want_dw, "layer_norm_backward dw");
  expect_same(db, want_db, "layer_norm_backward db");

  cpu::rms_norm_forward(y.data(), x.data(), w.data(), rows, dim, eps);
  cpu::rms_norm_forward(want.data(), xf.data(), w.data(), rows, dim, eps);
  expect_rounded(y, want, "rms_norm_forward");
  cpu::rms_norm_backward(dx.data(), dw.data(), dy.data(), x.data(), w.data(), rows, dim, eps);
  cpu::rms_norm_backward(want.data(), want_dw.data(), dyf.data(), xf.data(), w.data(), rows, dim, eps);
  expect_rounded(dx, want, "rms_norm_backward dx");
  expect_same(dw, want_dw, "rms_norm_backward dw");
}

// ---- Activations ---------------------------------------------------------------------------

TYPED_TEST(KernelsHalf, Activations) {
  using T = TypeParam;
  for (const int64_t n : {int64_t{1000}, int64_t{40000}}) { // serial and threaded
    // Beyond -3 the float kernels' 1 + erf and 1 + tanh cancel: their libm ulp would dominate.
    const auto x = random_of<T>(n, 1, -3.0f, 3.0f), dy = random_of<T>(n, 2), up = random_of<T>(n, 3);
    const Vec xf = widen(x), dyf = widen(dy), upf = widen(up);
    std::vector<T> y(n), dx(n), dup(n);
    Vec want(n), want_dup(n);
    const std::string size = " n=" + std::to_string(n);

    cpu::gelu_tanh_forward(y.data(), x.data(), n);
    cpu::gelu_tanh_forward(want.data(), xf.data(), n);
    expect_rounded_libm(y, want, "gelu_tanh_forward" + size);
    cpu::gelu_tanh_backward(dx.data(), dy.data(), x.data(), n);
    cpu::gelu_tanh_backward(want.data(), dyf.data(), xf.data(), n);
    expect_rounded_libm(dx, want, "gelu_tanh_backward" + size);
    cpu::gelu_erf_forward(y.data(), x.data(), n);
    cpu::gelu_erf_forward(want.data(), xf.data(), n);
    expect_rounded_libm(y, want, "gelu_erf_forward" + size);
    cpu::gelu_erf_backward(dx.data(), dy.data(), x.data(), n);
    cpu::gelu_erf_backward(want.data(), dyf.data(), xf.data(), n);
    expect_rounded_libm(dx, want, "gelu_erf_backward" + size);
    cpu::swiglu_forward(y.data(), x.data(), up.data(), n);
    cpu::swiglu_forward(want.data(), xf.data(), upf.data(), n);
    expect_rounded_libm(y, want, "swiglu_forward" + size);
    cpu::swiglu_backward(dx.data(), dup.data(), dy.data(), x.data(), up.data(), n);
    cpu::swiglu_backward(want.data(), want_dup.data(), dyf.data(), xf.data(), upf.data(), n);
    expect_rounded_libm(dx, want, "swiglu_backward dgate" + size);
    expect_rounded_libm(dup, want_dup, "swiglu_backward dup" + size);

    // In place.
    std::vector<T> inplace = x;
    cpu::gelu_tanh_forward(inplace.data(), inplace.data(), n);
    cpu::gelu_tanh_forward(y.data(), x.data(), n);
    EXPECT_EQ(widen(inplace), widen(y)) << "gelu in place" << size;
  }
}

// ---- Rotary embedding ----------------------------------------------------------------------

TYPED_TEST(KernelsHalf, Rope) {
  using T = TypeParam;
  const int64_t batch = 2, seq = 9, heads = 3, head_dim = 16, n = batch * seq * heads * head_dim;
  const auto x = random_of<T>(n, 1);
  for (const bool inverse : {false, true}) {
    std::vector<T> y(n);
    Vec want(n);
    cpu::rope_forward(y.data(), x.data(), batch, seq, heads, head_dim, 10000.0f, 5, inverse);
    cpu::rope_forward(want.data(), widen(x).data(), batch, seq, heads, head_dim, 10000.0f, 5, inverse);
    expect_rounded(y, want, inverse ? "rope inverse" : "rope");
  }
}

// ---- Attention -----------------------------------------------------------------------------

TYPED_TEST(KernelsHalf, Attention) {
  using T = TypeParam;
  const int64_t batch = 2, seq = 11, q_heads = 4, kv_heads = 2, head_dim = 8;
  const int64_t nq = batch * seq * q_heads * head_dim, nk = batch * seq * kv_heads * head_dim;
  const auto q = random_of<T>(nq, 1), k = random_of<T>(nk, 2), v = random_of<T>(nk, 3), dout = random_of<T>(nq, 4);
  const Vec qf = widen(q), kf = widen(k), vf = widen(v), doutf = widen(dout);
  for (const auto [causal, window] : {std::pair{false, 0}, {true, 0}, {true, 3}}) {
    const std::string what = std::string(causal ? " causal" : "") + (window ? " window 3" : "");
    std::vector<T> out(nq), dq(nq), dk(nk), dv(nk);
    Vec want(nq), want_dq(nq), want_dk(nk), want_dv(nk);
    cpu::attention_forward(out.data(), q.data(), k.data(), v.data(), batch, seq, q_heads, kv_heads, head_dim, 0.35f,
                           causal, window);
    cpu::attention_forward(want.data(), qf.data(), kf.data(), vf.data(), batch, seq, q_heads, kv_heads, head_dim,
                           0.35f, causal, window);
    expect_rounded(out, want, "attention_forward" + what);
    cpu::attention_backward(dq.data(), dk.data(), dv.data(), dout.data(), q.data(), k.data(), v.data(), batch, seq,
                            q_heads, kv_heads, head_dim, 0.35f, causal, window);
    cpu::attention_backward(want_dq.data(), want_dk.data(), want_dv.data(), doutf.data(), qf.data(), kf.data(),
                            vf.data(), batch, seq, q_heads, kv_heads, head_dim, 0.35f, causal, window);
    expect_rounded(dq, want_dq, "attention_backward dq" + what);
    expect_rounded(dk, want_dk, "attention_backward dk" + what);
    expect_rounded(dv, want_dv, "attention_backward dv" + what);
  }
}

// ---- Loss ----------------------------------------------------------------------------------

TYPED_TEST(KernelsHalf, CrossEntropy) {
  using T = TypeParam;
  const int64_t tokens = 12, vocab = 40, valid = 37;
  const auto logits = random_of<T>(tokens * vocab, 1, -4.0f, 4.0f);
  const Vec lf = widen(logits);
  std::vector<int32_t> labels(tokens);
  for (int64_t t = 0; t < tokens; ++t)
    labels[t] = static_cast<int32_t>((t * 7) % valid);
  EXPECT_EQ(cpu::cross_entropy_forward(logits.data(), labels.data(), tokens, vocab, valid),
            cpu::cross_entropy_forward(lf.data(), labels.data(), tokens, vocab, valid));
  std::vector<T> dl(tokens * vocab);
  Vec want(tokens * vocab);
  cpu::cross_entropy_backward(dl.data(), 1.5f, logits.data(), labels.data(), tokens, vocab, valid);
  cpu::cross_entropy_backward(want.data(), 1.5f, lf.data(), labels.data(), tokens, vocab, valid);
  expect_rounded(dl, want, "cross_entropy_backward");
}

TYPED_TEST(KernelsHalf, VocabParallelCrossEntropy) {
  using T = TypeParam;
  // This rank's share: columns [10, 30) of the vocabulary, 17 of them real.
  const int64_t tokens = 12, local = 20, start = 10, valid = 17;
  const auto logits = random_of<T>(tokens * local, 1, -4.0f, 4.0f);
  const Vec lf = widen(logits);
  std::vector<int32_t> labels(tokens);
  for (int64_t t = 0; t < tokens; ++t)
    labels[t] = static_cast<int32_t>((t * 5) % 40);
  Vec mx(tokens), se(tokens), tg(tokens), want(tokens);
  cpu::logits_max(mx.data(), logits.data(), tokens, local, valid);
  cpu::logits_max(want.data(), lf.data(), tokens, local, valid);
  expect_same(mx, want, "logits_max");
  cpu::logits_sum_exp(se.data(), logits.data(), mx.data(), tokens, local, valid);
  cpu::logits_sum_exp(want.data(), lf.data(), mx.data(), tokens, local, valid);
  expect_same(se, want, "logits_sum_exp");
  cpu::target_logit(tg.data(), logits.data(), labels.data(), tokens, local, start);
  cpu::target_logit(want.data(), lf.data(), labels.data(), tokens, local, start);
  expect_same(tg, want, "target_logit");
  std::vector<T> dl(tokens * local);
  Vec want_dl(tokens * local);
  cpu::cross_entropy_backward_from_stats(dl.data(), 0.8f, logits.data(), labels.data(), mx.data(), se.data(), tokens,
                                         local, start, valid);
  cpu::cross_entropy_backward_from_stats(want_dl.data(), 0.8f, lf.data(), labels.data(), mx.data(), se.data(),
                                         tokens, local, start, valid);
  expect_rounded(dl, want_dl, "cross_entropy_backward_from_stats");
}

// ---- Elementwise ---------------------------------------------------------------------------

TYPED_TEST(KernelsHalf, Elementwise) {
  using T = TypeParam;
  for (const int64_t outer : {int64_t{1}, int64_t{300}}) {
    const int64_t inner = 77, n = outer * inner;
    const auto a = random_of<T>(n, 1), b = random_of<T>(inner, 2);
    const Vec af = widen(a), bf = widen(b), bias = random_vec(inner, 3);
    std::vector<T> out(n);
    Vec want(n);
    cpu::add(out.data(), a.data(), b.data(), outer, inner);
    cpu::add(want.data(), af.data(), bf.data(), outer, inner);
    expect_rounded(out, want, "add");
    cpu::add(out.data(), a.data(), bias.data(), outer, inner);
    cpu::add(want.data(), af.data(), bias.data(), outer, inner);
    expect_rounded(out, want, "add bias");
    std::vector<T> inplace = a;
    cpu::add(inplace.data(), inplace.data(), bias.data(), outer, inner);
    expect_rounded(inplace, want, "add bias in place");
    cpu::mul(out.data(), a.data(), b.data(), outer, inner);
    cpu::mul(want.data(), af.data(), bf.data(), outer, inner);
    expect_rounded(out, want, "mul");
    cpu::mul(out.data(), a.data(), bias.data(), outer, inner);
    cpu::mul(want.data(), af.data(), bias.data(), outer, inner);
    expect_rounded(out, want, "mul float");
    cpu::scale(out.data(), a.data(), 0.3f, n);
    cpu::scale(want.data(), af.data(), 0.3f, n);
    expect_rounded(out, want, "scale");
    Vec sum(inner), want_sum(inner);
    cpu::reduce_sum_leading(sum.data(), a.data(), outer, inner);
    cpu::reduce_sum_leading(want_sum.data(), af.data(), outer, inner);
    expect_same(sum, want_sum, "reduce_sum_leading");
  }
}

// ---- Layout and the axis collectives -------------------------------------------------------

TYPED_TEST(KernelsHalf, SliceAndPadMoveTheBits) {
  using T = TypeParam;
  const int64_t outer = 3, big = 10, small = 4, inner = 5, offset = 2;
  const auto whole = random_of<T>(outer * big * inner, 1);
  std::vector<T> part(outer * small * inner), padded(outer * big * inner);
  cpu::slice(part.data(), whole.data(), outer, big, small, inner, offset);
  Vec want(part.size()), want_padded(padded.size());
  cpu::slice(want.data(), widen(whole).data(), outer, big, small, inner, offset);
  expect_rounded(part, want, "slice");
  cpu::pad(padded.data(), part.data(), outer, small, big, inner, offset);
  cpu::pad(want_padded.data(), want.data(), outer, small, big, inner, offset);
  expect_rounded(padded, want_padded, "pad");
  std::vector<T> into = whole;
  cpu::pad_into(into.data(), part.data(), outer, small, big, inner, offset);
  expect_rounded(into, widen(whole), "pad_into of the slice it came from");

  megart::SelfCommunicator self;
  std::vector<T> out(whole.size());
  cpu::all_gather_axis(self, out.data(), whole.data(), outer, big, inner);
  expect_rounded(out, widen(whole), "all_gather_axis on one rank");
  cpu::reduce_scatter_axis(self, out.data(), whole.data(), outer, big, inner);
  expect_rounded(out, widen(whole), "reduce_scatter_axis on one rank");
  cpu::all_slice_axis(self, out.data(), whole.data(), outer, big, inner);
  expect_rounded(out, widen(whole), "all_slice_axis on one rank");
}

// ---- half.h conversions --------------------------------------------------------------------

float from_bits(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

TEST(HalfConversions, Fp16RoundTripsEveryBitPattern) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float x = megart::fp16_to_float(static_cast<uint16_t>(h));
    const uint16_t back = megart::float_to_fp16(x);
    if ((h & 0x7C00u) == 0x7C00u && (h & 0x3FFu)) { // NaN: stays a NaN with its sign
      ASSERT_TRUE(std::isnan(x)) << h;
      ASSERT_EQ(back & 0x7C00u, 0x7C00u) << h;
      ASSERT_NE(back & 0x3FFu, 0u) << h;
      ASSERT_EQ(back & 0x8000u, h & 0x8000u) << h;
    } else {
      ASSERT_EQ(back, h) << "fp16 bits " << h << " -> " << x;
    }
  }
  EXPECT_EQ(megart::fp16_to_float(0x3C00), 1.0f);
  EXPECT_EQ(megart::fp16_to_float(0x7BFF), 65504.0f);
  EXPECT_EQ(megart::fp16_to_float(0x0001), 0x1p-24f);
  EXPECT_TRUE(std::signbit(megart::fp16_to_float(0x8000)));
}

TEST(HalfConversions, Fp16RoundsToNearestEven) {
  using megart::float_to_fp16;
  EXPECT_EQ(float_to_fp16(1.0f + 0x1p-11f), 0x3C00);           // tie, even below
  EXPECT_EQ(float_to_fp16(1.0f + 3 * 0x1p-11f), 0x3C02);       // tie, even above
  EXPECT_EQ(float_to_fp16(1.0f + 0x1p-11f + 0x1p-20f), 0x3C01); // past the tie
  EXPECT_EQ(float_to_fp16(-(1.0f + 0x1p-11f)), 0xBC00);
  EXPECT_EQ(float_to_fp16(2047.0f + 0.5f), 0x6800); // 2048 (fraction carries into the exponent)
}

TEST(HalfConversions, Fp16OverflowsPast65504) {
  using megart::float_to_fp16;
  EXPECT_EQ(float_to_fp16(65504.0f), 0x7BFF);
  EXPECT_EQ(float_to_fp16(65519.996f), 0x7BFF); // below the tie with 65536
  EXPECT_EQ(float_to_fp16(65520.0f), 0x7C00);   // the tie rounds to even: inf
  EXPECT_EQ(float_to_fp16(-65520.0f), 0xFC00);
  EXPECT_EQ(float_to_fp16(1e10f), 0x7C00);
  EXPECT_EQ(float_to_fp16(INFINITY), 0x7C00);
  EXPECT_EQ(float_to_fp16(-INFINITY), 0xFC00);
  EXPECT_TRUE(std::isnan(megart::fp16_to_float(float_to_fp16(NAN))));
}

TEST(HalfConversions, Fp16Subnormals) {
  using megart::float_to_fp16;
  EXPECT_EQ(float_to_fp16(0x1p-24f), 0x0001);
  EXPECT_EQ(float_to_fp16(0x1p-25f), 0x0000);             // tie with 0: even
  EXPECT_EQ(float_to_fp16(0x1p-25f * 1.0001f), 0x0001);   // past the tie
  EXPECT_EQ(float_to_fp16(3 * 0x1p-25f), 0x0002);         // 1.5 ulp: tie, even above
  EXPECT_EQ(float_to_fp16(1023 * 0x1p-24f), 0x03FF);      // largest subnormal
  EXPECT_EQ(float_to_fp16(0x1p-14f - 0x1p-25f), 0x0400);  // tie with the smallest normal
  EXPECT_EQ(float_to_fp16(0x1p-14f), 0x0400);
  EXPECT_EQ(float_to_fp16(-0x1p-24f), 0x8001);
  EXPECT_EQ(float_to_fp16(-0x1p-30f), 0x8000); // to -0
  EXPECT_EQ(float_to_fp16(1e-30f), 0x0000);
}

// float_to_fp16 / from_float<bf16_t> agree with round_to_precision (the GEMM emulation's
// rounding) on floats from 2^-40 to 2^40, both signs, and on the non-finite ones.
TEST(HalfConversions, AgreeWithRoundToPrecision) {
  std::mt19937 gen(7);
  std::uniform_int_distribution<uint32_t> fraction(0, 0x7FFFFF), exponent(127 - 40, 127 + 40), sign(0, 1);
  Vec x;
  for (int i = 0; i < 200000; ++i)
    x.push_back(from_bits((sign(gen) << 31) | (exponent(gen) << 23) | fraction(gen)));
  for (const float special : {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 65504.0f, 65520.0f, 0x1p-25f})
    x.push_back(special);
  Vec fp16(x.size()), bf16(x.size());
  cpu::round_to_precision(fp16.data(), x.data(), static_cast<int64_t>(x.size()), Precision::Fp16);
  cpu::round_to_precision(bf16.data(), x.data(), static_cast<int64_t>(x.size()), Precision::Bf16);
  int mismatches = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const float h = megart::fp16_to_float(megart::float_to_fp16(x[i]));
    const float b = to_float(from_float<bf16_t>(x[i]));
    const bool fp16_ok = std::isnan(h) ? std::isnan(fp16[i]) : bits_of(h) == bits_of(fp16[i]);
    const bool bf16_ok = std::isnan(b) ? std::isnan(bf16[i]) : bits_of(b) == bits_of(bf16[i]);
    if ((!fp16_ok || !bf16_ok) && mismatches++ < 5)
      ADD_FAILURE() << "x = " << x[i] << ": fp16 " << h << " vs " << fp16[i] << ", bf16 " << b << " vs "
                    << bf16[i];
  }
}

} // namespace
