// The largest models and plans megac compiles. Far above what anyone trains (Megatron's largest
// runs: ~128 layers, hidden ~25k, a few thousand GPUs), but low enough that every size product
// the compiler and the generated program form (elements of a tensor, bytes of a rank's arena,
// schedule tables) fits in int64 and compiling stays a matter of seconds. Every user-given size
// is checked against these before it is multiplied or allocated.
#pragma once

#include <cstdint>

namespace megac::limits {

// Plan (megac compile's flags, @grid's shape and megac.plan in the IR).
constexpr int64_t kWorldSize = int64_t(1) << 20;      // ranks: pp x dp x tp
constexpr int64_t kVirtualStages = 1024;              // chunks per pipeline rank
constexpr int64_t kMicrobatches = int64_t(1) << 16;   // per iteration and data-parallel rank
constexpr int64_t kMicroBatch = int64_t(1) << 20;     // samples per microbatch
constexpr int64_t kBucketSize = int64_t(1) << 40;     // elements per gradient bucket
constexpr int64_t kVocabDivisor = int64_t(1) << 16;   // --make-vocab-size-divisible-by

// Spec (model sizes).
constexpr int64_t kLayers = 8192;                     // ~6 s to compile at 2-core speed
constexpr int64_t kHiddenSize = int64_t(1) << 20;
constexpr int64_t kAttentionHeads = int64_t(1) << 14;
constexpr int64_t kFfnHiddenSize = int64_t(1) << 22;
constexpr int64_t kSeqLength = int64_t(1) << 22;      // also max_position_embeddings
constexpr int64_t kVocabSize = int64_t(1) << 24;      // also the padded vocabulary
constexpr int64_t kExperts = int64_t(1) << 14;        // experts per layer, and the router's top k

// Products.
constexpr int64_t kTensorElements = int64_t(1) << 40; // any one weight or activation (4 TiB in fp32)
constexpr int64_t kParameters = int64_t(1) << 44;     // the whole model (17.6 trillion)
constexpr int64_t kAttentionWork = int64_t(1) << 60;  // micro batch x seq^2 x hidden: kernels count it in int64

} // namespace megac::limits
