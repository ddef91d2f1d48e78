// Hand-written programs for the distributed optimizer (ZeRO-1, and ZeRO-2 / ZeRO-3 below): the bigram models of
// train_test_util.h and the toy pipeline with a flat_layout as megac's FlatBufferLayout lays one
// out (parameters in reverse table order, each at a multiple of 64 elements, each bucket padded
// to a multiple of lcm(d, 128) elements), and the sync_gradients / gather_params megac compiles
// for it: per bucket an in-place reduce-scatter (this rank's shard of the sum lands at the
// bucket's start) or all-gather over dp, on the parameter the bucket starts with.
#pragma once

#include "megart/program.h"

#include "toy_pipeline.h"
#include "train_test_util.h"

#include <algorithm>
#include <cstdint>
#include <iterator>

namespace flat_test {

// The layouts. Each bucket starts with a parameter: first[b] is its index in the table.
enum Layout {
  // bigram_program: b (index 1) at 0..16, w (index 0) at 64..320; one bucket of 384.
  kOneBucket,
  // bigram_program: b at 0..16 in a bucket of 128, w at 128..384 in a bucket of 256.
  kTwoBuckets,
  // bigram_tp_program(2): b at 0..16, w's [8, 16] block at 64..192; one bucket of 256.
  kTp2,
  // A toy pipeline stage [wte [16, 4], w_c [4]]: w_c at 0..4, wte at 64..128; one bucket of 128.
  kToyStage,
  // The same table in buckets of 64 elements: w_c at 0..4 in a bucket of 128, wte at 128..192 in
  // another (so with d = 2 wte's shard is on another dp rank than with kToyStage).
  kToyStageSmallBuckets,
};

template <int L> struct Tables;
template <> struct Tables<kOneBucket> {
  static constexpr int64_t offsets[] = {64, 0};
  static constexpr megart::FlatBucket buckets[] = {{0, 384}};
  static constexpr int first[] = {1};
  static constexpr int64_t numel = 384;
};
template <> struct Tables<kTwoBuckets> {
  static constexpr int64_t offsets[] = {128, 0};
  static constexpr megart::FlatBucket buckets[] = {{0, 128}, {128, 256}};
  static constexpr int first[] = {1, 0};
  static constexpr int64_t numel = 384;
};
template <> struct Tables<kTp2> {
  static constexpr int64_t offsets[] = {64, 0};
  static constexpr megart::FlatBucket buckets[] = {{0, 256}};
  static constexpr int first[] = {1};
  static constexpr int64_t numel = 256;
};
template <> struct Tables<kToyStage> {
  static constexpr int64_t offsets[] = {64, 0};
  static constexpr megart::FlatBucket buckets[] = {{0, 128}};
  static constexpr int first[] = {1};
  static constexpr int64_t numel = 128;
};
template <> struct Tables<kToyStageSmallBuckets> {
  static constexpr int64_t offsets[] = {128, 0};
  static constexpr megart::FlatBucket buckets[] = {{0, 128}, {128, 128}};
  static constexpr int first[] = {1, 0};
  static constexpr int64_t numel = 256;
};

// What megac emits as @sync_gradients / @gather_params for layout L.
template <int L> void sync_gradients(const megart::StepContext &ctx, float *const *grads) {
  using T = Tables<L>;
  for (size_t b = 0; b < std::size(T::buckets); ++b) {
    float *bucket = grads[T::first[b]];
    ctx.dp->reduce_scatter_sum(bucket, bucket, T::buckets[b].numel / ctx.dp->size());
  }
}
template <int L> void gather_params(const megart::StepContext &ctx, float *const *params) {
  using T = Tables<L>;
  for (size_t b = 0; b < std::size(T::buckets); ++b) {
    const int64_t m = T::buckets[b].numel / ctx.dp->size();
    float *bucket = params[T::first[b]];
    ctx.dp->all_gather(bucket, bucket + ctx.dp->rank() * m, m);
  }
}

template <int L> megart::FlatLayoutDesc layout_desc(int64_t shard_degree) {
  using T = Tables<L>;
  return {T::offsets, T::buckets, static_cast<int64_t>(std::size(T::buckets)), T::numel,
          shard_degree};
}

// A bigram program and its flat layout (the ProgramDesc points at it: not copyable).
struct FlatProgram {
  train_test::Program p;
  megart::FlatLayoutDesc layout{};
  FlatProgram() = default;
  FlatProgram(const FlatProgram &) = delete;
};

// bigram_program<2> (kOneBucket, kTwoBuckets) or bigram_tp_program<2>(2, dp) (kTp2) for a plan
// with data-parallel size dp, sharded over all of it. `compiled`: with the compiled sync and
// gather (false: neither, so the runtime does both itself).
template <int L> void make_bigram(FlatProgram &f, int64_t dp, bool compiled = true) {
  f.p = L == kTp2 ? train_test::bigram_tp_program<2>(2, dp) : train_test::bigram_program<2>();
  f.p.relink();
  f.p.desc.data_parallel_size = dp;
  f.layout = layout_desc<L>(dp);
  f.p.stage0().flat_layout = &f.layout;
  f.p.stage0().sync_gradients = compiled ? &sync_gradients<L> : nullptr;
  f.p.stage0().gather_params = compiled ? &gather_params<L> : nullptr;
  f.p.set_one_stage_ops(/*gathers=*/dp > 1);
}

// ZeRO-2 (optim_grads) as megac compiles it for layout L: backward adds the gradients into a
// zeroed flat staging buffer in the workspace (laid out like the layout), each bucket is
// reduce-scattered over dp and this rank's shard added into ctx.grad_shards at offset / d.
template <int L> void zero2_bigram_backward(const megart::StepContext &ctx, float *const *params, float *const *,
                                            char *arena, const int32_t *ids, const int32_t *labels, float dloss,
                                            const char *stash, const float *, float *) {
  using T = Tables<L>;
  float *staged = reinterpret_cast<float *>(arena) + train_test::kArenaFloats(2);
  float *shard = staged + T::numel;
  std::fill(staged, staged + T::numel, 0.0f);
  float *grads[] = {staged + T::offsets[0], staged + T::offsets[1]};
  train_test::bigram_backward<2, false>(ctx, params, grads, arena, ids, labels, dloss, stash, nullptr, nullptr);
  const int64_t d = ctx.dp->size();
  for (const megart::FlatBucket &k : T::buckets) {
    ctx.dp->reduce_scatter_sum(shard, staged + k.offset, k.numel / d);
    for (int64_t i = 0; i < k.numel / d; ++i)
      ctx.grad_shards[k.offset / d + i] += shard[i];
  }
}

// ZeRO-3 (optim_grads_params) as megac compiles it: in each chunk function, each bucket
// all-gathered over dp from ctx.param_shards into the workspace before use, the parameters read
// there; the backward's gradients as ZeRO-2's.
template <int L> float *gather_bigram_params(const megart::StepContext &ctx, char *arena) {
  using T = Tables<L>;
  float *gathered = reinterpret_cast<float *>(arena) + train_test::kArenaFloats(2) + 2 * T::numel;
  const int64_t d = ctx.dp->size();
  for (const megart::FlatBucket &k : T::buckets)
    ctx.dp->all_gather(gathered + k.offset, ctx.param_shards + k.offset / d, k.numel / d);
  return gathered;
}
template <int L> float zero3_bigram_forward(const megart::StepContext &ctx, float *const *, char *arena,
                                            const int32_t *ids, const int32_t *labels, const float *, float *,
                                            char *stash) {
  using T = Tables<L>;
  float *gathered = gather_bigram_params<L>(ctx, arena);
  float *params[] = {gathered + T::offsets[0], gathered + T::offsets[1]};
  return train_test::bigram_forward<2, false>(ctx, params, arena, ids, labels, nullptr, nullptr, stash);
}
template <int L> void zero3_bigram_backward(const megart::StepContext &ctx, float *const *, float *const *,
                                            char *arena, const int32_t *ids, const int32_t *labels, float dloss,
                                            const char *stash, const float *, float *) {
  using T = Tables<L>;
  float *gathered = gather_bigram_params<L>(ctx, arena);
  float *params[] = {gathered + T::offsets[0], gathered + T::offsets[1]};
  zero2_bigram_backward<L>(ctx, params, nullptr, arena, ids, labels, dloss, stash, nullptr, nullptr);
}

// bigram_program<2> with ZeRO-2 (or, `params_too`, ZeRO-3) over dp in layout L (kOneBucket or
// kTwoBuckets).
template <int L> void make_zero_bigram(FlatProgram &f, int64_t dp, bool params_too) {
  f.p = train_test::bigram_program<2>();
  f.p.desc.data_parallel_size = dp;
  f.p.set_chunk(params_too ? &zero3_bigram_forward<L> : &train_test::bigram_forward<2, false>,
                params_too ? &zero3_bigram_backward<L> : &zero2_bigram_backward<L>, train_test::kStashBytes(2),
                (train_test::kArenaFloats(2) + 3 * Tables<L>::numel) * 4);
  f.layout = layout_desc<L>(dp);
  f.layout.sharding = params_too ? megart::DataParallelSharding::OptimGradsParams
                                 : megart::DataParallelSharding::OptimGrads;
  f.p.stage0().flat_layout = &f.layout;
  f.p.stage0().gather_params = params_too ? nullptr : &gather_params<L>;
  f.p.set_one_stage_ops(/*gathers=*/!params_too && dp > 1);
}

// The toy pipeline's stages with the distributed optimizer over dp (toy::build<2, 2>: every
// stage's table is [wte, w_c]): stage 0 in kToyStage's layout, stage 1 in
// kToyStageSmallBuckets's, so the tied wte's shards lie on different dp ranks in the two stages,
// as GPT-2's first and last stages' layouts place it differently.
struct FlatToy {
  toy::Program p;
  megart::FlatLayoutDesc layouts[2]{};
};
inline void make_toy(FlatToy &f, int64_t dp) {
  toy::build<2, 2>(f.p, toy::one_f_one_b(), {2, 1}, dp);
  f.layouts[0] = layout_desc<kToyStage>(dp);
  f.layouts[1] = layout_desc<kToyStageSmallBuckets>(dp);
  f.p.stages[0].flat_layout = &f.layouts[0];
  f.p.stages[0].sync_gradients = &sync_gradients<kToyStage>;
  f.p.stages[0].gather_params = &gather_params<kToyStage>;
  f.p.stages[1].flat_layout = &f.layouts[1];
  f.p.stages[1].sync_gradients = &sync_gradients<kToyStageSmallBuckets>;
  f.p.stages[1].gather_params = &gather_params<kToyStageSmallBuckets>;
  // ZeRO-1: the tied wte summed whole before the reduce-scatter; the stepped shards gathered.
  toy::set_closing(f.p, {megart::PipeOpKind::TiedSum, megart::PipeOpKind::GradSync, megart::PipeOpKind::OptimizerStep,
                         megart::PipeOpKind::ParamGather});
}

} // namespace flat_test
