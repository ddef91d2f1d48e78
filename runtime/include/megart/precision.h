// The compute precision of a compiled program's matrix multiplies (--bf16 / --fp16), shared by
// the Device interface (device.h) and the GEMM kernels (kernels.h, cuda/kernels.h).
#pragma once

namespace megart {

// What the compiled program's matrix multiplies take as inputs (--bf16 / --fp16). Weights,
// activations, gradients and the optimizer stay fp32 in every mode: only the GEMM operands are
// rounded, and GEMMs accumulate and write in fp32 (the autocast model).
enum class Precision { Fp32, Bf16, Fp16 };

inline const char *precision_name(Precision p) {
  return p == Precision::Bf16 ? "bf16" : p == Precision::Fp16 ? "fp16" : "fp32";
}

} // namespace megart
