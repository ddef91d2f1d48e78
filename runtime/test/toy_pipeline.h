// A toy model written against the pipeline contract by hand (no compiler): C chunks on P pp
// ranks (chunk c on rank c % P), with GPT-2's shape of tying.
//   chunk 0:      x = E[ids] * w0                  (E: "transformer.wte.weight" [V, H], w_c [H])
//   chunk c:      x = x * w_c                      (elementwise)
//   chunk C - 1:  y = x * w_{C-1}; logits = y E^T; loss = mean cross-entropy
// E is used by the first and the last chunk, so with P > 1 it is tied between stages 0 and
// (C - 1) % P. The same model as one chunk of a one-stage program (build<1, C>) is the
// single-rank reference.
#pragma once

#include "megart/kernels.h"
#include "megart/closing_actions.h"
#include "megart/program.h"

#include "train_test_util.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace toy {

constexpr int64_t kVocab = train_test::kVocab, kSeq = train_test::kSeq;
constexpr int64_t kHidden = 4, kMicro = 2, kTokens = kMicro * kSeq;
constexpr int64_t kActNumel = kTokens * kHidden;

// ---- the math of each kind of chunk, on explicit buffers -----------------------------------

// stash: E[ids] [T, H]
inline void embed_forward(const float *E, const float *w, const int32_t *ids, float *stash,
                          float *out) {
  for (int64_t t = 0; t < kTokens; ++t)
    for (int64_t h = 0; h < kHidden; ++h) {
      stash[t * kHidden + h] = E[ids[t] * kHidden + h];
      out[t * kHidden + h] = stash[t * kHidden + h] * w[h];
    }
}
inline void embed_backward(const float *w, float *dE, float *dw, const int32_t *ids,
                           const float *stash, const float *dout) {
  for (int64_t t = 0; t < kTokens; ++t)
    for (int64_t h = 0; h < kHidden; ++h) {
      dw[h] += dout[t * kHidden + h] * stash[t * kHidden + h];
      dE[ids[t] * kHidden + h] += dout[t * kHidden + h] * w[h];
    }
}

// stash: x [T, H]
inline void scale_forward(const float *w, const float *x, float *stash, float *out) {
  for (int64_t i = 0; i < kActNumel; ++i) {
    stash[i] = x[i];
    out[i] = x[i] * w[i % kHidden];
  }
}
inline void scale_backward(const float *w, float *dw, const float *stash, const float *dout,
                           float *dx) {
  for (int64_t i = 0; i < kActNumel; ++i) {
    dw[i % kHidden] += dout[i] * stash[i];
    dx[i] = dout[i] * w[i % kHidden];
  }
}

// stash: x [T, H], y [T, H], logits [T, V]
constexpr int64_t kHeadStashFloats = 2 * kActNumel + kTokens * kVocab;
inline float head_forward(const float *E, const float *w, const float *x, const int32_t *labels,
                          float *stash) {
  float *sx = stash, *y = stash + kActNumel, *logits = stash + 2 * kActNumel;
  for (int64_t i = 0; i < kActNumel; ++i) {
    sx[i] = x[i];
    y[i] = x[i] * w[i % kHidden];
  }
  for (int64_t t = 0; t < kTokens; ++t)
    for (int64_t v = 0; v < kVocab; ++v) {
      float sum = 0;
      for (int64_t h = 0; h < kHidden; ++h)
        sum += y[t * kHidden + h] * E[v * kHidden + h];
      logits[t * kVocab + v] = sum;
    }
  return megart::cpu::cross_entropy_forward(logits, labels, kTokens, kVocab, kVocab);
}
inline void head_backward(const float *E, const float *w, float *dE, float *dw,
                          const int32_t *labels, float dloss, const float *stash, float *dx) {
  const float *x = stash, *y = stash + kActNumel, *logits = stash + 2 * kActNumel;
  std::vector<float> dlogits(kTokens * kVocab);
  megart::cpu::cross_entropy_backward(dlogits.data(), dloss, logits, labels, kTokens, kVocab,
                                      kVocab);
  for (int64_t t = 0; t < kTokens; ++t)
    for (int64_t h = 0; h < kHidden; ++h) {
      float dy = 0;
      for (int64_t v = 0; v < kVocab; ++v) {
        dy += dlogits[t * kVocab + v] * E[v * kHidden + h];
        dE[v * kHidden + h] += dlogits[t * kVocab + v] * y[t * kHidden + h];
      }
      const int64_t i = t * kHidden + h;
      dw[h] += dy * x[i];
      dx[i] = dy * w[h];
    }
}

// ---- the chunks as the pipeline contract wants them ------------------------------------------

// Stage r's parameter table: E first when the stage runs chunk 0 or the last chunk, then w_c
// of its chunks in ascending order.
template <int kP, int kC> struct Chunks {
  static constexpr bool holds_wte(int r) { return r == 0 || r == (kC - 1) % kP; }
  static constexpr int w_index(int c) { return (holds_wte(c % kP) ? 1 : 0) + c / kP; }

  template <int c>
  static float forward(const megart::StepContext &, float *const *params, char *,
                       const int32_t *ids, const int32_t *labels, const float *input,
                       float *output, char *stash) {
    float *s = reinterpret_cast<float *>(stash);
    const float *w = params[w_index(c)];
    if (c == 0) {
      embed_forward(params[0], w, ids, s, output);
      return 0;
    }
    if (c == kC - 1)
      return head_forward(params[0], w, input, labels, s);
    scale_forward(w, input, s, output);
    return 0;
  }

  template <int c>
  static void backward(const megart::StepContext &, float *const *params, float *const *grads,
                       char *, const int32_t *ids, const int32_t *labels, float dloss,
                       const char *stash, const float *output_grad, float *input_grad) {
    const float *s = reinterpret_cast<const float *>(stash);
    const int wi = w_index(c);
    if (c == 0)
      embed_backward(params[wi], grads[0], grads[wi], ids, s, output_grad);
    else if (c == kC - 1)
      head_backward(params[0], params[wi], grads[0], grads[wi], labels, dloss, s, input_grad);
    else
      scale_backward(params[wi], grads[wi], s, output_grad, input_grad);
  }

  static constexpr int64_t stash_bytes(int c) {
    return 4 * (c == kC - 1 ? kHeadStashFloats : kActNumel);
  }
};

// The single-rank reference: params [E, w_0 .. w_{C-1}]; every chunk in turn, then back, as one
// chunk of a one-stage program. Its stash: each chunk's stash (kHeadStashFloats floats apiece),
// then each chunk's output.
template <int kC> struct Reference {
  static constexpr int64_t kStashBytes = 4 * kC * (kHeadStashFloats + kActNumel);
  static float *stash_of(float *s, int c) { return s + c * kHeadStashFloats; }
  static float *output_of(float *s, int c) { return s + kC * kHeadStashFloats + c * kActNumel; }

  static float forward(const megart::StepContext &, float *const *params, char *, const int32_t *ids,
                       const int32_t *labels, const float *, float *, char *stash) {
    float *s = reinterpret_cast<float *>(stash);
    embed_forward(params[0], params[1], ids, stash_of(s, 0), output_of(s, 0));
    for (int c = 1; c + 1 < kC; ++c)
      scale_forward(params[1 + c], output_of(s, c - 1), stash_of(s, c), output_of(s, c));
    return head_forward(params[0], params[kC], output_of(s, kC - 2), labels, stash_of(s, kC - 1));
  }
  static void backward(const megart::StepContext &, float *const *params, float *const *grads, char *,
                       const int32_t *ids, const int32_t *labels, float dloss, const char *stash, const float *,
                       float *) {
    float *s = const_cast<float *>(reinterpret_cast<const float *>(stash));
    std::vector<float> d(kActNumel), dnext(kActNumel);
    head_backward(params[0], params[kC], grads[0], grads[kC], labels, dloss, stash_of(s, kC - 1), d.data());
    for (int c = kC - 2; c >= 1; --c) {
      scale_backward(params[1 + c], grads[1 + c], stash_of(s, c), d.data(), dnext.data());
      std::swap(d, dnext);
    }
    embed_backward(params[1], grads[0], grads[1], ids, stash_of(s, 0), d.data());
  }
  // Forward and backward of one microbatch (the loss), with a stash of its own.
  static float step(const megart::StepContext &ctx, float *const *params, float *const *grads, const int32_t *ids,
                    const int32_t *labels, float dloss) {
    std::vector<float> stash(kStashBytes / 4);
    char *bytes = reinterpret_cast<char *>(stash.data());
    const float loss = forward(ctx, params, nullptr, ids, labels, nullptr, nullptr, bytes);
    backward(ctx, params, grads, nullptr, ids, labels, dloss, bytes, nullptr, nullptr);
    return loss;
  }
};

inline megart::ParamDesc wte() {
  return {"transformer.wte.weight", 2, {kVocab, kHidden}, {0, 0}, {kVocab, kHidden},
          megart::ParamInit::Normal, 0.5f, true};
}
// Names outlive the descs: ParamDesc holds a const char *.
inline const char *w_name(int c) {
  static const char *names[] = {"h.0.w", "h.1.w", "h.2.w", "h.3.w", "h.4.w", "h.5.w", "h.6.w", "h.7.w"};
  return names[c];
}
inline megart::ParamDesc w_desc(int c) {
  return {w_name(c), 1, {kHidden}, {0}, {kHidden}, megart::ParamInit::Normal, 1.0f, false};
}

// A program of P stages (P = 1: the single-rank reference) and the tables it points at.
struct Program {
  std::vector<std::vector<megart::ParamDesc>> params;
  std::vector<std::vector<megart::ChunkDesc>> chunks;
  std::vector<std::vector<megart::PipeOp>> ops;
  std::vector<megart::PipelineStageDesc> stages;
  megart::ProgramDesc desc{};
  Program() = default;
  Program(const Program &) = delete; // desc points into the vectors
};

// A stage's compiled dp bucket: its whole table, which ends with a w_c (train_test::sync_whole_table).
inline megart::SyncFn whole_table_sync(size_t num_params) {
  static const megart::SyncFn syncs[] = {
      &train_test::sync_whole_table<0, kHidden>, &train_test::sync_whole_table<1, kHidden>,
      &train_test::sync_whole_table<2, kHidden>, &train_test::sync_whole_table<3, kHidden>,
      &train_test::sync_whole_table<4, kHidden>, &train_test::sync_whole_table<5, kHidden>};
  return syncs[num_params - 1];
}

// Schedule shorthands for P = 2, where every peer is the other rank.
inline megart::PipeOp F(int32_t c, int32_t mb) { return {megart::PipeOpKind::Forward, c, mb, -1}; }
inline megart::PipeOp B(int32_t c, int32_t mb) { return {megart::PipeOpKind::Backward, c, mb, -1}; }
inline megart::PipeOp SA(int32_t c, int32_t mb) { return {megart::PipeOpKind::SendActivation, c, mb, (c + 1) % 2}; }
inline megart::PipeOp RA(int32_t c, int32_t mb) { return {megart::PipeOpKind::RecvActivation, c, mb, (c + 1) % 2}; }
inline megart::PipeOp SG(int32_t c, int32_t mb) { return {megart::PipeOpKind::SendGrad, c, mb, (c + 1) % 2}; }
inline megart::PipeOp RG(int32_t c, int32_t mb) { return {megart::PipeOpKind::RecvGrad, c, mb, (c + 1) % 2}; }

// 1F1B for P = 2, V = 1, m = 4 (Megatron's order). Rank 0 runs one forward ahead, then one
// forward and one backward at a time: at most 2 stashes. Rank 1 (the last chunk) runs each
// microbatch's backward right after its forward: 1 stash.
inline std::vector<std::vector<megart::PipeOp>> one_f_one_b() {
  return {{F(0, 0), SA(0, 0),
           F(0, 1), SA(0, 1), RG(0, 0), B(0, 0),
           F(0, 2), SA(0, 2), RG(0, 1), B(0, 1),
           F(0, 3), SA(0, 3), RG(0, 2), B(0, 2),
           RG(0, 3), B(0, 3)},
          {RA(1, 0), F(1, 0), B(1, 0), SG(1, 0),
           RA(1, 1), F(1, 1), B(1, 1), SG(1, 1),
           RA(1, 2), F(1, 2), B(1, 2), SG(1, 2),
           RA(1, 3), F(1, 3), B(1, 3), SG(1, 3)}};
}

// Interleaved 1F1B for P = 2, V = 2, m = 4: rank 0 runs chunks 0 and 2, rank 1 chunks 1 and 3.
// Megatron's order: forwards go through groups of P microbatches per chunk (chunk 0 mb 0, 1,
// chunk 2 mb 0, 1, chunk 0 mb 2, 3, ...), backwards the same from the last chunk down; warmup
// is (P - rank - 1) * 2 + (V - 1) * P forwards (4 on rank 0, 2 on rank 1), then one forward
// and one backward at a time. Peaks: 5 stashes on rank 0, 3 on rank 1.
inline std::vector<std::vector<megart::PipeOp>> interleaved() {
  return {{F(0, 0), SA(0, 0),
           F(0, 1), SA(0, 1),
           RA(2, 0), F(2, 0), SA(2, 0),
           RA(2, 1), F(2, 1), SA(2, 1),
           F(0, 2), SA(0, 2), RG(2, 0), B(2, 0), SG(2, 0),
           F(0, 3), SA(0, 3), RG(2, 1), B(2, 1), SG(2, 1),
           RA(2, 2), F(2, 2), SA(2, 2), RG(0, 0), B(0, 0),
           RA(2, 3), F(2, 3), SA(2, 3), RG(0, 1), B(0, 1),
           RG(2, 2), B(2, 2), SG(2, 2),
           RG(2, 3), B(2, 3), SG(2, 3),
           RG(0, 2), B(0, 2),
           RG(0, 3), B(0, 3)},
          {RA(1, 0), F(1, 0), SA(1, 0),
           RA(1, 1), F(1, 1), SA(1, 1),
           RA(3, 0), F(3, 0), B(3, 0), SG(3, 0),
           RA(3, 1), F(3, 1), B(3, 1), SG(3, 1),
           RA(1, 2), F(1, 2), SA(1, 2), RG(1, 0), B(1, 0), SG(1, 0),
           RA(1, 3), F(1, 3), SA(1, 3), RG(1, 1), B(1, 1), SG(1, 1),
           RA(3, 2), F(3, 2), B(3, 2), SG(3, 2),
           RA(3, 3), F(3, 3), B(3, 3), SG(3, 3),
           RG(1, 2), B(1, 2), SG(1, 2),
           RG(1, 3), B(1, 3), SG(1, 3)}};
}

constexpr int64_t kMicrobatches = 4;

// What closes the toy pipeline's iteration without the distributed optimizer.
inline const std::vector<megart::PipeOpKind> kClosing = {megart::PipeOpKind::GradSync, megart::PipeOpKind::TiedSum,
                                                         megart::PipeOpKind::OptimizerStep};

// Ends every stage's table with `closing` (what megac-pipeline-schedule puts after the schedule:
// GradSync, OptimizerStep, and TiedSum on the stages that hold the tied wte), in place of the
// closing ops it had.
inline void set_closing(Program &p, const std::vector<megart::PipeOpKind> &closing) {
  for (size_t r = 0; r < p.ops.size(); ++r) {
    std::vector<megart::PipeOp> &ops = p.ops[r];
    ops.resize(static_cast<size_t>(megart::schedule_steps(ops.data(), static_cast<int64_t>(ops.size()))));
    for (megart::PipeOpKind k : closing)
      if ((k != megart::PipeOpKind::TiedSum && k != megart::PipeOpKind::TiedSumShards) ||
          std::any_of(p.params[r].begin(), p.params[r].end(), [](const megart::ParamDesc &d) {
            return std::string(d.name) == wte().name;
          }))
        ops.push_back({k, -1, -1, -1});
    p.stages[r].ops = ops.data();
    p.stages[r].num_ops = static_cast<int64_t>(ops.size());
  }
}

// set_closing(p, kClosing) where no stage's table has closing ops yet.
inline void close_unless_closed(Program &p) {
  for (const std::vector<megart::PipeOp> &ops : p.ops)
    if (megart::schedule_steps(ops.data(), static_cast<int64_t>(ops.size())) < static_cast<int64_t>(ops.size()))
      return;
  set_closing(p, kClosing);
}

// The toy program: kP = 1 gives the single-rank reference, one chunk with kC chunks' layers;
// kP = 2 a pipeline over 2 ranks with kC / 2 chunks each and the given schedule.
template <int kP, int kC>
void build(Program &p, const std::vector<std::vector<megart::PipeOp>> &schedule = {},
           const std::vector<int64_t> &predicted_peaks = {}, int64_t dp = 1, int64_t tp = 1) {
  megart::ProgramDesc &d = p.desc;
  d.summary = "toy pipeline model";
  d.micro_batch_size = kMicro;
  d.seq_length = kSeq;
  d.vocab_size = kVocab;
  d.tensor_parallel_size = tp;
  d.data_parallel_size = dp;
  using Ch = Chunks<kP, kC>;
  constexpr int V = kP == 1 ? 1 : kC / kP; // one stage: the reference as one chunk
  p.params.resize(kP);
  p.chunks.resize(kP);
  p.ops = schedule;
  if (kP == 1) {
    p.params = {{wte()}};
    for (int c = 0; c < kC; ++c)
      p.params[0].push_back(w_desc(c));
    p.chunks[0] = {{0, &Reference<kC>::forward, &Reference<kC>::backward, Reference<kC>::kStashBytes, 0, 0}};
    p.ops = {{F(0, 0), B(0, 0)}};
  }
  // Instantiate forward / backward for every chunk index below kC (at most 4 here).
  auto fwd = [](int c) -> megart::ChunkForwardFn {
    megart::ChunkForwardFn f[] = {&Ch::template forward<0>, &Ch::template forward<1 % kC>,
                                  &Ch::template forward<2 % kC>, &Ch::template forward<3 % kC>};
    return f[c];
  };
  auto bwd = [](int c) -> megart::ChunkBackwardFn {
    megart::ChunkBackwardFn f[] = {&Ch::template backward<0>, &Ch::template backward<1 % kC>,
                                   &Ch::template backward<2 % kC>, &Ch::template backward<3 % kC>};
    return f[c];
  };
  for (int r = 0; kP > 1 && r < kP; ++r) {
    if (Ch::holds_wte(r))
      p.params[r].push_back(wte());
    for (int v = 0; v < V; ++v) {
      const int c = r + v * kP;
      p.params[r].push_back(w_desc(c));
      p.chunks[r].push_back({c, fwd(c), bwd(c), Ch::stash_bytes(c), c == 0 ? 0 : kActNumel,
                             c == kC - 1 ? 0 : kActNumel});
    }
  }
  for (int r = 0; r < kP; ++r) {
    megart::PipelineStageDesc s{};
    s.params = p.params[r].data();
    s.num_params = static_cast<int64_t>(p.params[r].size());
    s.arena_bytes = 0;
    s.chunks = p.chunks[r].data();
    s.num_chunks = V;
    s.ops = p.ops[r].data();
    s.num_ops = static_cast<int64_t>(p.ops[r].size());
    s.predicted_peak_stash = predicted_peaks.empty() ? 0 : predicted_peaks[r];
    s.sync_gradients = whole_table_sync(p.params[r].size()); // summed where dp > 1
    p.stages.push_back(s);
  }
  d.pipeline_parallel_size = kP;
  d.stages = p.stages.data();
  d.num_microbatches = kP == 1 ? 1 : kMicrobatches; // one stage: run once per microbatch
  d.virtual_pipeline_size = V;
  d.pipeline_schedule = V > 1 ? "interleaved" : "1f1b";
  set_closing(p, kP == 1 ? std::vector<megart::PipeOpKind>{megart::PipeOpKind::GradSync,
                                                           megart::PipeOpKind::OptimizerStep}
                         : kClosing);
}

} // namespace toy
