// The products of a model's sizes (weights, parameters, activations) against megac/Limits.h,
// computed with overflow-checked arithmetic: a spec or plan whose products do not fit is refused
// naming the keys and flags that make them, before the frontend builds any IR.
#pragma once

#include "megac/Frontend/ModelSpec.h"
#include "megac/Plan/ParallelPlan.h"

#include "llvm/Support/Error.h"

namespace megac {

/// The spec alone: each weight matrix and the whole model's parameters (vocabulary as given).
/// parseModelSpec calls it once each key is within its own limit.
llvm::Error checkSpecSize(const ModelSpec &spec);

/// With the plan and micro batch: the padded vocabulary (and so the embedding and parameter
/// count again), the largest activation of one microbatch, and the attention's work (micro
/// batch x seq_length^2 x hidden_size, which the attention kernels count in int64).
llvm::Error checkProgramSize(const ModelSpec &spec, const ParallelPlan &plan, int64_t microBatch);

/// One transformer layer's parameters (weights, biases, norms; with dense and mixture-of-experts
/// layers, the smaller kind's), for a spec parseModelSpec accepted.
int64_t layerParameters(const ModelSpec &spec);
/// The model's parameters (the vocabulary as given, unpadded), for a spec parseModelSpec accepted.
int64_t parameterCount(const ModelSpec &spec);

} // namespace megac
