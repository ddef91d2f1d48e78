// Model FLOPs of one training sample, for the throughput and MFU the training log reports.
#pragma once

#include "megac/Frontend/ModelSpec.h"

namespace megac {

/// Forward and backward (3x the forward) FLOPs of one sample of seqLength tokens, without
/// activation recomputation, counting each GEMM of the model as 2 x m x n x k: the attention
/// projections (grouped-query K and V included), the MLP (two GEMMs for gelu, three for swiglu),
/// the attention scores and their weighted sum over the full s x s square (as the Megatron-LM
/// papers count them), and the output layer over the unpadded vocabulary. For GPT-2 this is
/// 72 s l h^2 (1 + s/(6h) + V/(12 l h)): the papers' formula with the output layer's forward and
/// backward (6 s h V); shared/reference/facts.md's no-recompute line keeps the V/(16 l h) of the
/// recompute (96) form, where 96 V/(16 l h) is the same 6 s h V.
double modelFlopsPerSample(const ModelSpec &spec);

} // namespace megac
