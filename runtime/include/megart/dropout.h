// Dropout masks that every parallel plan agrees on: whether an element is kept is a pure function
// of (--seed, iteration, layer, site, the element's coordinates in the iteration's global batch),
// never of the rank, the thread or the order of work. So the backward (and a recomputed forward)
// regenerates the mask instead of storing it, and tp, sp, dp and pp runs drop exactly the
// elements the single-rank run drops.
//
//   mix(z)          = splitmix64's output function (megart/splitmix.h)
//   iteration key   = mix(mix(seed ^ kDropoutSalt) + iteration * G)           G = 0x9E3779B97F4A7C15
//   site key        = mix(iteration key + mix(((layer + 1) << 8) | stream))    layer -1: outside layers
//   bits(key, e)    = upper 32 bits of mix(key + (e + 1) * G)                  (a SplitMix64 stream)
//   kept            = bits >= floor(rate * 2^32)     (rate in double); kept elements x float(1 / (1 - rate))
//
// e is the element's row-major index in the global tensor of its site: a hidden activation
// [global batch, seq, hidden] or attention probabilities [global batch, heads, seq, seq], the
// batch coordinate being the sample's place in the iteration's global batch.
#pragma once

#include "megart/splitmix.h"

#include <cstdint>
#include <string>

namespace megart {

inline constexpr uint64_t kDropoutSalt = 0x64726F706F7574ull; // "dropout"
inline constexpr int kDropoutMaxRank = 4;

MEGART_HOST_DEVICE inline uint64_t dropout_iteration_key(uint64_t seed, int64_t iteration) {
  return splitmix64_mix(splitmix64_mix(seed ^ kDropoutSalt) + static_cast<uint64_t>(iteration) * kSplitmixGamma);
}

MEGART_HOST_DEVICE inline uint64_t dropout_site_key(uint64_t iteration_key, int64_t layer, int64_t stream) {
  return splitmix64_mix(iteration_key + splitmix64_mix((static_cast<uint64_t>(layer + 1) << 8) |
                                                 static_cast<uint64_t>(stream)));
}

MEGART_HOST_DEVICE inline uint32_t dropout_bits(uint64_t key, uint64_t element) {
  return static_cast<uint32_t>(splitmix64_mix(key + (element + 1) * kSplitmixGamma) >> 32);
}

// The bits at or above which an element is kept: floor(rate * 2^32), rate in [0, 1).
MEGART_HOST_DEVICE inline uint64_t dropout_keep_threshold(float rate) {
  return static_cast<uint64_t>(static_cast<double>(rate) * 4294967296.0);
}

// What a kept element is multiplied by: 1 / (1 - rate) in double, rounded to float.
MEGART_HOST_DEVICE inline float dropout_keep_scale(float rate) { return static_cast<float>(1.0 / (1.0 - static_cast<double>(rate))); }

// What a step knows about the masks it draws (StepContext::dropout).
struct DropoutDraw {
  bool on = false;            // training; evaluation and generation leave dropout the identity
  uint64_t iteration_key = 0;     // dropout_iteration_key(--seed, iteration)
  int64_t rank_first_sample = 0; // the dp rank's first sample's place in the iteration's global batch
  int64_t micro_batch_size = 0;
  int64_t first_sample = 0; // the running microbatch's first sample (StepContext::for_microbatch)
};

// A rank's block of one dropout site's global tensor: dimension 0 counts samples.
struct DropoutBlock {
  float rate = 0.0f; // 0: the identity (a copy)
  uint64_t key = 0;  // the site key
  int32_t rank = 0;
  int64_t shape[kDropoutMaxRank] = {};  // the block
  int64_t offset[kDropoutMaxRank] = {}; // its first element's global coordinates
  int64_t extent[kDropoutMaxRank] = {}; // the global tensor's sizes (dimension 0 unused)
};

// Why a block cannot be dropped ("" when it can): the rate outside [0, 1), a rank outside
// [1, kDropoutMaxRank], a negative size or offset, or a block reaching past its extent.
inline std::string dropout_block_error(const DropoutBlock &b) {
  if (!(b.rate >= 0.0f && b.rate < 1.0f))
    return "rate (" + std::to_string(b.rate) + ") must be in [0, 1)";
  if (b.rank < 1 || b.rank > kDropoutMaxRank)
    return "rank " + std::to_string(b.rank) + " is outside [1, " + std::to_string(kDropoutMaxRank) + "]";
  for (int d = 0; d < b.rank; ++d) {
    if (b.shape[d] < 0 || b.offset[d] < 0)
      return "dimension " + std::to_string(d) + " has a negative size or offset";
    if (d > 0 && b.offset[d] + b.shape[d] > b.extent[d])
      return "dimension " + std::to_string(d) + ": the block [" + std::to_string(b.offset[d]) + ", " +
             std::to_string(b.offset[d] + b.shape[d]) + ") reaches past the extent " + std::to_string(b.extent[d]);
  }
  return "";
}

// Element `i` of the block's row-major order: its index in the site's global tensor.
MEGART_HOST_DEVICE inline uint64_t dropout_global_index(const DropoutBlock &b, int64_t i) {
  uint64_t coords[kDropoutMaxRank] = {};
  for (int d = b.rank - 1; d >= 0; --d) {
    coords[d] = static_cast<uint64_t>(i % b.shape[d] + b.offset[d]);
    i /= b.shape[d];
  }
  uint64_t global = coords[0];
  for (int d = 1; d < b.rank; ++d)
    global = global * static_cast<uint64_t>(b.extent[d]) + coords[d];
  return global;
}

// Attention dropout on the probabilities [samples, heads, seq, seq] inside the fused attention.
struct AttentionDropout {
  float rate = 0.0f; // 0: none
  uint64_t key = 0;
  int64_t first_sample = 0; // batch row 0's place in the global batch
  int64_t head_offset = 0;  // local head 0's global index (tensor parallelism)
  int64_t heads = 0;        // all heads of the layer
};

// Why an attention's dropout cannot run over `q_heads` local heads ("" when it can).
inline std::string attention_dropout_error(const AttentionDropout &d, int64_t q_heads) {
  if (d.rate == 0.0f)
    return "";
  if (!(d.rate > 0.0f && d.rate < 1.0f))
    return "dropout rate (" + std::to_string(d.rate) + ") must be in [0, 1)";
  if (d.first_sample < 0 || d.head_offset < 0 || d.head_offset + q_heads > d.heads)
    return "dropout heads [" + std::to_string(d.head_offset) + ", " + std::to_string(d.head_offset + q_heads) +
           ") outside the layer's " + std::to_string(d.heads) + " (or a negative first sample " +
           std::to_string(d.first_sample) + ")";
  return "";
}

// Probability (sample b of the batch, local head h, query row, key) of a [samples, heads, seq,
// seq] site: its mask / (1 - rate), or 1 without dropout.
MEGART_HOST_DEVICE inline float attention_dropout_factor(const AttentionDropout &d, int64_t b, int64_t h, int64_t row,
                                                         int64_t key, int64_t seq) {
  if (d.rate == 0.0f)
    return 1.0f;
  const uint64_t e = ((static_cast<uint64_t>(d.first_sample + b) * static_cast<uint64_t>(d.heads) +
                       static_cast<uint64_t>(d.head_offset + h)) * static_cast<uint64_t>(seq) +
                      static_cast<uint64_t>(row)) * static_cast<uint64_t>(seq) + static_cast<uint64_t>(key);
  return dropout_bits(d.key, e) >= dropout_keep_threshold(d.rate) ? dropout_keep_scale(d.rate) : 0.0f;
}

} // namespace megart
