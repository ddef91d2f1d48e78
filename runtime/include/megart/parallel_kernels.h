// Kernels of tensor-parallel programs: vocabulary-parallel embedding and cross-entropy (each
// rank holds rows [vocab_start, vocab_start + vocab_local) of the vocabulary), and collectives
// along one dimension of a tensor (the communicator works on flat buffers).
#pragma once

#include "megart/comm.h"
#include "megart/kernels.h" // kNoIgnoredLabel

#include <cstdint>

namespace megart::cpu {

// out[t] = table[ids[t] - vocab_start] for ids in this rank's share, zeros otherwise.
void embedding_forward_shard(float *out, const float *table, const int32_t *ids, int64_t tokens,
                             int64_t vocab_local, int64_t dim, int64_t vocab_start);
// dtable = 0, then rows of dout added for the ids in this rank's share.
void embedding_backward_shard(float *dtable, const float *dout, const int32_t *ids, int64_t tokens,
                              int64_t vocab_local, int64_t dim, int64_t vocab_start);

// Per token over the first `valid` columns of the local vocabulary (the rest is padding): max
// (-inf when valid is 0); sum of exp(logit - max[t]).
void logits_max(float *out, const float *logits, int64_t tokens, int64_t vocab, int64_t valid);
void logits_sum_exp(float *out, const float *logits, const float *max, int64_t tokens, int64_t vocab,
                    int64_t valid);
// logits[t, labels[t] - vocab_start] where the label is in this share, else 0.
void target_logit(float *out, const float *logits, const int32_t *labels, int64_t tokens, int64_t vocab,
                  int64_t vocab_start);
// mean over tokens of max + log(sum_exp) - target (summed in double); with labels, over the
// tokens not labelled ignore_index (0 when there are none), as cross_entropy_forward.
float cross_entropy_from_stats(const float *max, const float *sum_exp, const float *target, int64_t tokens,
                               const int32_t *labels = nullptr, int32_t ignore_index = kNoIgnoredLabel);
// dlogits = dloss * (exp(logit - max) / sum_exp - [label == column]) / counted tokens for the
// first `valid` columns, 0 for the padding columns and the rows labelled ignore_index.
void cross_entropy_backward_from_stats(float *dlogits, float dloss, const float *logits, const int32_t *labels,
                                       const float *max, const float *sum_exp, int64_t tokens, int64_t vocab,
                                       int64_t vocab_start, int64_t valid, int32_t ignore_index = kNoIgnoredLabel);
// 16-bit (A = bf16_t or fp16_t): out / dout / logits / dlogits are A*; the table, its gradient
// and the per-token statistics (max, sum_exp, target) stay float.
template <typename A>
void embedding_forward_shard(A *out, const float *table, const int32_t *ids, int64_t tokens, int64_t vocab_local,
                             int64_t dim, int64_t vocab_start);
template <typename A>
void embedding_backward_shard(float *dtable, const A *dout, const int32_t *ids, int64_t tokens,
                              int64_t vocab_local, int64_t dim, int64_t vocab_start);
template <typename A> void logits_max(float *out, const A *logits, int64_t tokens, int64_t vocab, int64_t valid);
template <typename A>
void logits_sum_exp(float *out, const A *logits, const float *max, int64_t tokens, int64_t vocab, int64_t valid);
template <typename A>
void target_logit(float *out, const A *logits, const int32_t *labels, int64_t tokens, int64_t vocab,
                  int64_t vocab_start);
template <typename A>
void cross_entropy_backward_from_stats(A *dlogits, float dloss, const A *logits, const int32_t *labels,
                                       const float *max, const float *sum_exp, int64_t tokens, int64_t vocab,
                                       int64_t vocab_start, int64_t valid, int32_t ignore_index = kNoIgnoredLabel);

// Columns of this rank's share of a padded vocabulary that are real: clamp(vocab_size - start, 0, local).
int64_t valid_columns(int64_t vocab_size, int64_t vocab_start, int64_t vocab_local);

// A tensor viewed as [outer, dim, inner], split along `dim` over the communicator's ranks.
// all_gather_axis: local [outer, dim_local, inner] -> whole [outer, dim_local * size, inner].
void all_gather_axis(Communicator &comm, float *out, const float *in, int64_t outer, int64_t dim_local,
                     int64_t inner);
// reduce_scatter_axis: whole partial sums [outer, dim_local * size, inner] -> this rank's summed
// share [outer, dim_local, inner].
void reduce_scatter_axis(Communicator &comm, float *out, const float *in, int64_t outer, int64_t dim_local,
                         int64_t inner);
// all_slice_axis: whole [outer, dim_local * size, inner] -> this rank's share (no communication).
void all_slice_axis(Communicator &comm, float *out, const float *in, int64_t outer, int64_t dim_local,
                    int64_t inner);
// The same for 16-bit tensors (T = bf16_t or fp16_t; the communicator's 16-bit collectives).
template <typename T>
void all_gather_axis(Communicator &comm, T *out, const T *in, int64_t outer, int64_t dim_local, int64_t inner);
template <typename T>
void reduce_scatter_axis(Communicator &comm, T *out, const T *in, int64_t outer, int64_t dim_local,
                         int64_t inner);
template <typename T>
void all_slice_axis(Communicator &comm, T *out, const T *in, int64_t outer, int64_t dim_local, int64_t inner);

} // namespace megart::cpu
