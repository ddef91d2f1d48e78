// GEMM on cuBLASLt in fp32 (CUBLAS_COMPUTE_32F: no TF32, so results match the CPU's sgemm
// within float rounding). Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T, so
// every call hands cuBLASLt B as its "A" and A as its "B" with the sizes swapped.
//
// With set_gemm_precision(Bf16 / Fp16), A and B are first rounded into the shared workspace and
// cuBLASLt multiplies those (tensor cores) with fp32 accumulation into the fp32 C: every tensor
// in memory stays fp32, as under PyTorch autocast.
//
// gemm_bias / gemm_bias_gelu add the bias in cuBLASLt's BIAS epilogue (one pass over the
// output). The GELU itself is our own kernel, not the GELU epilogue: cublasLt.h does not say
// which GELU that computes (erf, tanh approximation, or a faster approximation of either), and
// its aux (pre-activation) buffer needs a leading dimension divisible by 8. Either is fine for
// the speed: the elementwise pass is small next to the product.
#include "cuda_detail.cuh"

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <array>
#include <atomic>
#include <climits>
#include <cstdint>
#include <map>
#include <string>

namespace megart::cuda {
namespace {

std::atomic<Precision> g_precision{Precision::Fp32};

void check_lt(cublasStatus_t status, const char *what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw Error(std::string("cuBLASLt error in ") + what + ": " + cublasLtGetStatusString(status) + " (status " +
                std::to_string(static_cast<int>(status)) + ")");
}

constexpr size_t kWorkspaceBytes = 32u << 20;

// The process's cuBLASLt handle and workspace, made on first use on the process's device. Never
// destroyed: the CUDA runtime may already be torn down when static destructors run.
struct Lt {
  cublasLtHandle_t handle = nullptr;
  void *workspace = nullptr;
  Lt() {
    compute_stream(); // selects the device first
    check_lt(cublasLtCreate(&handle), "cublasLtCreate");
    check(cudaMalloc(&workspace, kWorkspaceBytes), "cudaMalloc(cuBLASLt workspace)");
  }
};

Lt &lt() {
  static Lt instance;
  return instance;
}

int64_t checked_dim(int64_t v, const char *what) {
  if (v < 0 || v > INT_MAX)
    throw Error(std::string("gemm: ") + what + " (" + std::to_string(v) +
                ") is outside [0, 2^31) supported by cuBLASLt");
  return v;
}

// Largest power of two (at most 256) dividing the address: the heuristic must only pick
// algorithms that work with the operands' actual alignment.
uint32_t alignment(const void *p, int64_t stride_elems = 0, size_t elem_bytes = sizeof(float)) {
  uintptr_t bits = reinterpret_cast<uintptr_t>(p) | 256u;
  if (stride_elems != 0)
    bits |= static_cast<uintptr_t>(stride_elems) * elem_bytes;
  return static_cast<uint32_t>(bits & (~bits + 1));
}

// cuBLASLt's type for the A and B operands.
cudaDataType_t input_type(Precision p) {
  return p == Precision::Bf16 ? CUDA_R_16BF : p == Precision::Fp16 ? CUDA_R_16F : CUDA_R_32F;
}

// A column-major rows x cols layout of `type` with leading dimension ld, strided-batched when
// batch > 1.
cublasLtMatrixLayout_t make_layout(cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld, int64_t batch,
                                   int64_t stride) {
  cublasLtMatrixLayout_t layout = nullptr;
  check_lt(cublasLtMatrixLayoutCreate(&layout, type, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), ld),
           "cublasLtMatrixLayoutCreate");
  if (batch > 1) {
    const int32_t count = static_cast<int32_t>(batch);
    check_lt(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)),
             "cublasLtMatrixLayoutSetAttribute(BATCH_COUNT)");
    check_lt(
        cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)),
        "cublasLtMatrixLayoutSetAttribute(STRIDED_BATCH_OFFSET)");
  }
  return layout;
}

// Everything cublasLtMatmul needs for one shape, made once and kept for the process (a
// training step repeats the same few shapes). `found` is false when the heuristic offers no
// algorithm (the caller then falls back to a loop of plain GEMMs).
struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr; // cuBLASLt's A (our B), B (our A), C = D
  cublasLtMatmulAlgo_t algo{};
  bool found = false;
};

// m, n, k, transpose_a, transpose_b, batch, stride_a, stride_b, stride_c, alignments of a, b, c,
// the input precision (the operands' type), the epilogue (cublasLtEpilogue_t) and the alignment
// of the bias (0 without one).
using PlanKey = std::array<int64_t, 15>;

// `bias` (only with the BIAS epilogue) is a pointer with the key's bias alignment: the heuristic
// reads its value (never what it points to) to pick an algorithm that copes with the alignment.
Plan make_plan(const PlanKey &key, const float *bias) {
  const auto [m, n, k, ta, tb, batch, stride_a, stride_b, stride_c, align_a, align_b, align_c, precision, epilogue,
              align_bias] = key;
  (void)align_bias; // part of the key only: the algorithm chosen for `bias` suits every bias so aligned
  const cudaDataType_t in = input_type(static_cast<Precision>(precision));
  Plan plan;
  check_lt(cublasLtMatmulDescCreate(&plan.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
  if (epilogue != CUBLASLT_EPILOGUE_DEFAULT) {
    // D is column-major n x m (our row-major [m, n]): the bias runs along cuBLASLt's rows, one per
    // column of ours, length n, broadcast over the m columns. Its type defaults to D's, fp32 in
    // every input precision (A and B may be bf16 / fp16); set explicitly all the same.
    const cublasLtEpilogue_t ep = static_cast<cublasLtEpilogue_t>(epilogue);
    const int32_t bias_type = CUDA_R_32F;
    check_lt(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof(ep)),
             "cublasLtMatmulDescSetAttribute(EPILOGUE)");
    check_lt(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                            sizeof(bias_type)),
             "cublasLtMatmulDescSetAttribute(BIAS_DATA_TYPE)");
    check_lt(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)),
             "cublasLtMatmulDescSetAttribute(BIAS_POINTER)");
  }
  // cuBLASLt's A is our B: row-major [k, n] (or [n, k] transposed) is column-major n x k (k x n).
  const cublasOperation_t op_a = tb ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  check_lt(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)),
           "cublasLtMatmulDescSetAttribute(TRANSA)");
  check_lt(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)),
           "cublasLtMatmulDescSetAttribute(TRANSB)");
  plan.a = tb ? make_layout(in, k, n, k, batch, stride_b) : make_layout(in, n, k, n, batch, stride_b);
  plan.b = ta ? make_layout(in, m, k, m, batch, stride_a) : make_layout(in, k, m, k, batch, stride_a);
  plan.c = make_layout(CUDA_R_32F, n, m, n, batch, stride_c); // C and D stay fp32 in every precision

  cublasLtMatmulPreference_t pref = nullptr;
  check_lt(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
  const uint64_t workspace = kWorkspaceBytes;
  const uint32_t align[3] = {static_cast<uint32_t>(align_b), static_cast<uint32_t>(align_a),
                             static_cast<uint32_t>(align_c)};
  try {
    check_lt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                                  sizeof(workspace)),
             "cublasLtMatmulPreferenceSetAttribute(MAX_WORKSPACE_BYTES)");
    check_lt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align[0],
                                                  sizeof(uint32_t)),
             "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT_A_BYTES)");
    check_lt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align[1],
                                                  sizeof(uint32_t)),
             "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT_B_BYTES)");
    check_lt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align[2],
                                                  sizeof(uint32_t)),
             "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT_C_BYTES)");
    check_lt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align[2],
                                                  sizeof(uint32_t)),
             "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT_D_BYTES)");
    cublasLtMatmulHeuristicResult_t result{};
    int count = 0;
    const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(lt().handle, plan.desc, plan.a, plan.b, plan.c, plan.c,
                                                                 pref, 1, &result, &count);
    // NOT_SUPPORTED: no algorithm for this configuration (handled by the caller). With an
    // epilogue or narrow operands, any refusal is: the caller's unfused / fp32 fallback computes
    // the same thing (some shapes, e.g. one row, have drawn INVALID_VALUE here).
    if (status != CUBLAS_STATUS_NOT_SUPPORTED && epilogue == CUBLASLT_EPILOGUE_DEFAULT &&
        static_cast<Precision>(precision) == Precision::Fp32)
      check_lt(status, "cublasLtMatmulAlgoGetHeuristic");
    plan.found = status == CUBLAS_STATUS_SUCCESS && count > 0 && result.state == CUBLAS_STATUS_SUCCESS;
    plan.algo = result.algo;
  } catch (...) {
    cublasLtMatmulPreferenceDestroy(pref);
    throw;
  }
  cublasLtMatmulPreferenceDestroy(pref);
  return plan;
}

// Not thread-safe, like detail::workspace: one host thread drives the device.
const Plan &plan_for(const PlanKey &key, const float *bias) {
  static std::map<PlanKey, Plan> plans;
  auto it = plans.find(key);
  if (it == plans.end())
    it = plans.emplace(key, make_plan(key, bias)).first;
  return it->second;
}

// fp32 -> bf16 / fp16, round to nearest even (inf and NaN stay so; fp16 overflows to inf).
__global__ void to_fp16_kernel(__half *out, const float *in, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = __float2half_rn(in[i]);
}

void round_into(void *out, const float *in, int64_t n, Precision p) {
  if (p == Precision::Bf16)
    return floats_to_bf16(static_cast<uint16_t *>(out), in, n);
  to_fp16_kernel<<<detail::elementwise_blocks(n), detail::kThreads, 0, compute_stream()>>>(static_cast<__half *>(out),
                                                                                           in, n);
  detail::check_launch("gemm operand rounding kernel");
}

// Elements from an operand's first matrix to the end of its last (gaps between matrices
// included, so the rounded copy keeps the strides).
int64_t span(int64_t size, int64_t batch, int64_t stride) { return batch > 1 ? (batch - 1) * stride + size : size; }

// One (strided-batched) cublasLtMatmul with inputs in `precision`, plus bias[n] on every row of C
// (the BIAS epilogue) when `bias` is not null (batch 1 only). Returns false, having written
// nothing to C, for a bias under 16-byte alignment, or when cuBLASLt has no algorithm for it or
// refuses it at launch.
bool matmul(float *c, const float *a, const float *b, int64_t m, int64_t n, int64_t k, bool ta, bool tb, int64_t batch,
            int64_t stride_a, int64_t stride_b, int64_t stride_c, float alpha, float beta, Precision precision,
            const float *bias = nullptr) {
  if (batch == 1)
    stride_a = stride_b = stride_c = 0; // unused; keeps one plan per shape
  // The alignment preferences do not cover the bias: a kernel picked for an aligned bias may
  // fault on a misaligned one (a sticky error that ends the context), so those go unfused.
  const int64_t align_bias = bias ? alignment(bias) : 0;
  if (bias && align_bias < 16)
    return false;
  const bool rounded = precision != Precision::Fp32;
  const size_t elem = rounded ? 2 : sizeof(float);
  // Rounded copies start on 256-byte boundaries of the workspace (alignment(nullptr) is 256).
  const int64_t align_a = alignment(rounded ? nullptr : a, stride_a, elem),
                align_b = alignment(rounded ? nullptr : b, stride_b, elem), align_c = alignment(c, stride_c);
  const int64_t epilogue = bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  const PlanKey key{m, n, k, ta, tb, batch, stride_a, stride_b, stride_c, align_a, align_b, align_c,
                    static_cast<int64_t>(precision), epilogue, align_bias};
  const Plan &plan = plan_for(key, bias);
  if (!plan.found)
    return false;
  const void *in_a = a, *in_b = b;
  if (rounded) {
    // Both copies in the shared workspace (no other kernel holds it across a GEMM); stream
    // order keeps the previous GEMM's reads of it ahead of these writes.
    const int64_t n_a = span(m * k, batch, stride_a), n_b = span(k * n, batch, stride_b);
    const size_t bytes_a = detail::aligned_bytes(size_t(n_a) * elem);
    char *copies = static_cast<char *>(detail::workspace(bytes_a + size_t(n_b) * elem));
    round_into(copies, a, n_a, precision);
    round_into(copies + bytes_a, b, n_b, precision);
    in_a = copies;
    in_b = copies + bytes_a;
  }
  // beta == 0: cuBLASLt does not read C (as BLAS), so garbage there cannot leak into D.
  // NOT_SUPPORTED / INVALID_VALUE come before any launch (cuBLASLt has refused operands of
  // unequal alignment after a successful heuristic): the caller's fallback takes over.
  // The bias pointer lives in the plan's descriptor, which cublasLtMatmul reads when called.
  if (bias)
    check_lt(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)),
             "cublasLtMatmulDescSetAttribute(BIAS_POINTER)");
  const cublasStatus_t status = cublasLtMatmul(lt().handle, plan.desc, &alpha, in_b, plan.a, in_a, plan.b, &beta, c,
                                               plan.c, c, plan.c, &plan.algo, lt().workspace, kWorkspaceBytes,
                                               compute_stream());
  if (status == CUBLAS_STATUS_NOT_SUPPORTED || status == CUBLAS_STATUS_INVALID_VALUE)
    return false;
  check_lt(status, "cublasLtMatmul");
  return true;
}

// C = beta C (C = 0 when beta == 0, never reading C): the k == 0 product.
__global__ void scale_kernel(float *c, int64_t n, float beta) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    c[i] = beta == 0.0f ? 0.0f : beta * c[i];
}

void scale_only(float *c, int64_t count, float beta) {
  if (beta == 1.0f)
    return;
  scale_kernel<<<detail::elementwise_blocks(count), detail::kThreads, 0, compute_stream()>>>(c, count, beta);
  detail::check_launch("gemm (k = 0) scale kernel launch");
}

} // namespace

void set_gemm_precision(Precision p) { g_precision = p; }
Precision gemm_precision() { return g_precision; }

void gemm(float *c, const float *a, const float *b, int64_t m, int64_t n, int64_t k, bool transpose_a, bool transpose_b,
          float alpha, float beta) {
  checked_dim(m, "m");
  checked_dim(n, "n");
  checked_dim(k, "k");
  if (m == 0 || n == 0)
    return;
  if (k == 0)
    return scale_only(c, m * n, beta);
  const Precision precision = g_precision;
  if (matmul(c, a, b, m, n, k, transpose_a, transpose_b, 1, 0, 0, 0, alpha, beta, precision))
    return;
  // No bf16 / fp16 algorithm for this shape (odd sizes, misaligned leading dimensions): this one
  // product is computed in fp32, which is only more accurate.
  if (precision != Precision::Fp32 &&
      matmul(c, a, b, m, n, k, transpose_a, transpose_b, 1, 0, 0, 0, alpha, beta, Precision::Fp32))
    return;
  throw Error("gemm: cuBLASLt has no fp32 algorithm for m=" + std::to_string(m) + " n=" + std::to_string(n) +
              " k=" + std::to_string(k));
}

void gemm_batched(float *c, const float *a, const float *b, int64_t batch, int64_t m, int64_t n, int64_t k,
                  bool transpose_a, bool transpose_b, int64_t stride_a, int64_t stride_b, int64_t stride_c, float alpha,
                  float beta) {
  checked_dim(batch, "batch");
  checked_dim(m, "m");
  checked_dim(n, "n");
  checked_dim(k, "k");
  if (batch == 0 || m == 0 || n == 0)
    return;
  const auto one_by_one = [&] {
    for (int64_t i = 0; i < batch; ++i)
      gemm(c + i * stride_c, a + i * stride_a, b + i * stride_b, m, n, k, transpose_a, transpose_b, alpha, beta);
  };
  if (batch == 1 || k == 0)
    return one_by_one();
  if (stride_c == 0) {
    // Every product lands in the same C, in batch order.
    if (beta == 0.0f) // each overwrites the last: only the last one stays
      return gemm(c, a + (batch - 1) * stride_a, b + (batch - 1) * stride_b, m, n, k, transpose_a, transpose_b, alpha,
                  beta);
    // sum_i A_i^T B_i with A_i [k, m] and B_i [k, n] stacked back to back is one GEMM over
    // k' = batch k (the weight-gradient shape). Valid only for beta == 1: otherwise earlier
    // products are scaled by beta again at every step.
    if (beta == 1.0f && transpose_a && !transpose_b && stride_a == k * m && stride_b == k * n && batch * k <= INT_MAX)
      return gemm(c, a, b, m, n, batch * k, true, false, alpha, beta);
    return one_by_one();
  }
  // Outputs that overlap (or run backwards) depend on the batch order: keep it.
  if (stride_c < m * n || stride_a < 0 || stride_b < 0)
    return one_by_one();
  if (!matmul(c, a, b, m, n, k, transpose_a, transpose_b, batch, stride_a, stride_b, stride_c, alpha, beta,
              g_precision))
    one_by_one(); // no strided-batched algorithm (e.g. for a broadcast operand): same result, more launches
}

void gemm_bias(float *out, const float *a, const float *b, const float *bias, int64_t m, int64_t n, int64_t k,
               bool transpose_b) {
  checked_dim(m, "m");
  checked_dim(n, "n");
  checked_dim(k, "k");
  if (m == 0 || n == 0)
    return;
  if (k > 0 && matmul(out, a, b, m, n, k, false, transpose_b, 1, 0, 0, 0, 1.0f, 0.0f, g_precision, bias))
    return;
  // No algorithm with the BIAS epilogue in this precision (odd sizes, misaligned pointers), or
  // k == 0: the unfused pair, which makes gemm's own precision choice (fp32 when its precision
  // has no algorithm) and adds the bias in fp32 as the epilogue does.
  gemm(out, a, b, m, n, k, false, transpose_b);
  add(out, out, bias, m, n);
}

void gemm_bias_gelu(float *pre, float *out, const float *a, const float *b, const float *bias, int64_t m, int64_t n,
                    int64_t k, bool transpose_b, bool tanh) {
  gemm_bias(pre, a, b, bias, m, n, k, transpose_b);
  if (tanh)
    gelu_tanh_forward(out, pre, m * n);
  else
    gelu_erf_forward(out, pre, m * n);
}

} // namespace megart::cuda
