// CUDA compute kernels: the GPU twins of megart::cpu's (megart/kernels.h, layout_kernels.h,
// parallel_kernels.h). A generated CUDA program is the CPU program's text with
// `using namespace megart::cuda;`, so every name and argument list here matches its CPU twin
// and has its contract, with these differences:
//  - every pointer is device memory; kernels are enqueued on compute_stream() and return
//    before they finish (no host synchronisation except read_scalar);
//  - data-dependent checks (token ids, labels in range) are not made on the device: the
//    runtime validates the dataset against the vocabulary when it opens it. Argument checks
//    that need only host values (shapes, rates, head counts) still throw megart::Error;
//  - the two CPU kernels that return a float write it to a device scalar `out` instead;
//  - reductions are deterministic (fixed launch shapes and summation order), but need not
//    match the CPU's order bit for bit: results agree within float rounding.
#pragma once

#include "megart/comm.h"
#include "megart/device.h"
#include "megart/dropout.h"
#include "megart/parallel_kernels.h"

#include <cstddef>
#include <cstdint>
#include <cuda_runtime.h>

namespace megart::cuda {

// The stream every kernel, copy and NCCL collective of the training step runs on.
cudaStream_t compute_stream();

// ---- Buffers (what the CPU program does with memcpy / memset) -----------------------------
void copy_buffer(void *dst, const void *src, size_t bytes); // device to device, async
void zero_buffer(void *dst, size_t bytes);                  // async
// n floats to bf16 bits, round to nearest even (megart/bf16.h's float_to_bf16), and back.
void floats_to_bf16(uint16_t *out, const float *in, int64_t n);
void bf16_to_floats(float *out, const uint16_t *in, int64_t n);
float read_scalar(const float *value);                      // waits for the stream

// ---- GEMM: cuBLASLt, fp32 (TF32 off: results match the CPU within float rounding) ----------
// The input precision of every gemm / gemm_batched from now on (the CUDA Device's compute
// precision; Fp32 at start). Fp32: fp32 inputs and math. Bf16 / Fp16: A and B are rounded to
// nearest even into a workspace and multiplied on tensor cores with fp32 accumulation into fp32
// C: the autocast model, where every tensor in memory stays fp32.
void set_gemm_precision(Precision p);
Precision gemm_precision();
void gemm(float *c, const float *a, const float *b, int64_t m, int64_t n, int64_t k, bool transpose_a,
          bool transpose_b, float alpha = 1.0f, float beta = 0.0f);
void gemm_batched(float *c, const float *a, const float *b, int64_t batch, int64_t m, int64_t n, int64_t k,
                  bool transpose_a, bool transpose_b, int64_t stride_a, int64_t stride_b, int64_t stride_c,
                  float alpha = 1.0f, float beta = 0.0f);
// Fused linear layers (what the compiler makes of matmul + bias add [+ gelu]), in the GEMM
// precision above; the bias is added in fp32 in every precision.
// out[m, n] = A[m, k] op(B) + bias[n], op = transpose when transpose_b (B is [n, k] then, else [k, n]).
// The bias is cuBLASLt's BIAS epilogue; where cuBLASLt has no such algorithm (or k == 0) it is
// gemm then add, with the same result within float rounding.
void gemm_bias(float *out, const float *a, const float *b, const float *bias, int64_t m, int64_t n, int64_t k,
               bool transpose_b);
// pre = A op(B) + bias (as gemm_bias); out = gelu(pre), tanh approximation (gelu_new) when `tanh`, else erf.
// pre is kept for the backward. The GELU is gelu_tanh_forward / gelu_erf_forward on pre (not
// cuBLASLt's GELU epilogue), so out matches the unfused program's within its GEMM's rounding.
// pre and out must not overlap.
void gemm_bias_gelu(float *pre, float *out, const float *a, const float *b, const float *bias, int64_t m,
                    int64_t n, int64_t k, bool transpose_b, bool tanh);

// ---- Embedding --------------------------------------------------------------------------
void embedding_forward(float *out, const float *table, const int32_t *ids, int64_t tokens, int64_t vocab,
                       int64_t dim);
void embedding_backward(float *dtable, const float *dout, const int32_t *ids, int64_t tokens, int64_t vocab,
                        int64_t dim);

// ---- Normalization ----------------------------------------------------------------------
void layer_norm_forward(float *y, const float *x, const float *w, const float *b, int64_t rows, int64_t dim,
                        float eps);
void layer_norm_backward(float *dx, float *dw, float *db, const float *dy, const float *x, const float *w,
                         int64_t rows, int64_t dim, float eps);
// weight_offset as the CPU's (megart/kernels.h): the scale is w + offset (Gemma's 1 + w).
void rms_norm_forward(float *y, const float *x, const float *w, int64_t rows, int64_t dim, float eps,
                      float weight_offset = 0.0f);
void rms_norm_backward(float *dx, float *dw, const float *dy, const float *x, const float *w, int64_t rows,
                       int64_t dim, float eps, float weight_offset = 0.0f);

// ---- Activations ------------------------------------------------------------------------
void gelu_tanh_forward(float *y, const float *x, int64_t n);
void gelu_tanh_backward(float *dx, const float *dy, const float *x, int64_t n);
void gelu_erf_forward(float *y, const float *x, int64_t n);
void gelu_erf_backward(float *dx, const float *dy, const float *x, int64_t n);
void swiglu_forward(float *y, const float *gate, const float *up, int64_t n);
void swiglu_backward(float *dgate, float *dup, const float *dy, const float *gate, const float *up, int64_t n);

// ---- Rotary embedding -------------------------------------------------------------------
void rope_forward(float *y, const float *x, int64_t batch, int64_t seq, int64_t heads, int64_t head_dim,
                  float theta, int64_t position_offset, bool inverse, float position_divisor = 1.0f);

// ---- Attention: fused, flash-style (online softmax, no seq x seq matrix in memory) --------
// window as the CPU's (megart/kernels.h): causal only, 0 for none.
// With dropout, the CPU's masks (megart/dropout.h), recomputed in the backward.
void attention_forward(float *out, const float *q, const float *k, const float *v, int64_t batch, int64_t seq,
                       int64_t q_heads, int64_t kv_heads, int64_t head_dim, float scale, bool causal,
                       int64_t window = 0, const AttentionDropout &dropout = {});
void attention_backward(float *dq, float *dk, float *dv, const float *dout, const float *q, const float *k,
                        const float *v, int64_t batch, int64_t seq, int64_t q_heads, int64_t kv_heads,
                        int64_t head_dim, float scale, bool causal, int64_t window = 0,
                        const AttentionDropout &dropout = {});

// ---- Dropout: the CPU's masks (megart/dropout.h), bit for bit -------------------------------
void apply_dropout(float *y, const float *x, const DropoutBlock &block);

// ---- Loss: fused (probabilities are never written out) -------------------------------------
// ignore_index as the CPU's (megart/kernels.h): those tokens take no part, the mean is over the rest.
void cross_entropy_forward(float *out, const float *logits, const int32_t *labels, int64_t tokens,
                           int64_t vocab, int64_t valid_vocab, int32_t ignore_index = kNoIgnoredLabel);
void cross_entropy_backward(float *dlogits, float dloss, const float *logits, const int32_t *labels,
                            int64_t tokens, int64_t vocab, int64_t valid_vocab, int32_t ignore_index = kNoIgnoredLabel);

// ---- Elementwise ------------------------------------------------------------------------
void add(float *out, const float *a, const float *b, int64_t outer, int64_t inner);
void mul(float *out, const float *a, const float *b, int64_t outer, int64_t inner);
void reduce_sum_leading(float *out, const float *x, int64_t outer, int64_t inner);
void scale(float *out, const float *x, float s, int64_t n);

// ---- Layout -----------------------------------------------------------------------------
void slice(float *out, const float *in, int64_t outer, int64_t in_dim, int64_t out_dim, int64_t inner,
           int64_t offset);
void pad(float *out, const float *in, int64_t outer, int64_t in_dim, int64_t out_dim, int64_t inner,
         int64_t offset);
void pad_into(float *out, const float *in, int64_t outer, int64_t in_dim, int64_t out_dim, int64_t inner,
              int64_t offset);

// ---- Tensor-parallel kernels --------------------------------------------------------------
void embedding_forward_shard(float *out, const float *table, const int32_t *ids, int64_t tokens,
                             int64_t vocab_local, int64_t dim, int64_t vocab_start);
void embedding_backward_shard(float *dtable, const float *dout, const int32_t *ids, int64_t tokens,
                              int64_t vocab_local, int64_t dim, int64_t vocab_start);
void logits_max(float *out, const float *logits, int64_t tokens, int64_t vocab, int64_t valid);
void logits_sum_exp(float *out, const float *logits, const float *max, int64_t tokens, int64_t vocab,
                    int64_t valid);
void target_logit(float *out, const float *logits, const int32_t *labels, int64_t tokens, int64_t vocab,
                  int64_t vocab_start);
void cross_entropy_from_stats(float *out, const float *max, const float *sum_exp, const float *target,
                              int64_t tokens, const int32_t *labels = nullptr, int32_t ignore_index = kNoIgnoredLabel);
void cross_entropy_backward_from_stats(float *dlogits, float dloss, const float *logits, const int32_t *labels,
                                       const float *max, const float *sum_exp, int64_t tokens, int64_t vocab,
                                       int64_t vocab_start, int64_t valid, int32_t ignore_index = kNoIgnoredLabel);
using cpu::valid_columns; // host arithmetic, the CPU's

// Collectives along one dimension; `comm` must be the device's communicator (NCCL), whose
// collectives run on compute_stream().
void all_gather_axis(Communicator &comm, float *out, const float *in, int64_t outer, int64_t dim_local,
                     int64_t inner);
void reduce_scatter_axis(Communicator &comm, float *out, const float *in, int64_t outer, int64_t dim_local,
                         int64_t inner);
void all_slice_axis(Communicator &comm, float *out, const float *in, int64_t outer, int64_t dim_local,
                    int64_t inner);

// ---- Optimizer and gradient norm (Device's multi-tensor work) ------------------------------
// Sum of squares in double of every element of the n_tensors tensors; deterministic.
double sum_of_squares(const float *const *tensors, const int64_t *sizes, int64_t n_tensors);
void scale_tensors(float *const *tensors, const int64_t *sizes, int64_t n_tensors, float coeff);
// One AdamW update of every tensor in few launches (multi-tensor), elementwise identical to
// megart::adamw_update with the tensor's factors.
void adamw_tensors(const AdamWTensor *tensors, int64_t n_tensors, const AdamWScalars &with_decay,
                   const AdamWScalars &without_decay);

} // namespace megart::cuda
