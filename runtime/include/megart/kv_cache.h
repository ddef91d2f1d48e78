// Generation with a KV cache (decode_step, attention_decode): each layer's keys and values of
// the positions computed so far, [micro batch, capacity, kv heads, head dim] floats per layer.
// decode_step computes position `position` (its keys and values land there) attending to
// positions 0 .. position.
#pragma once

#include <cstdint>

namespace megart {

struct KvCache {
  float *const *keys = nullptr;   // [layers]
  float *const *values = nullptr; // [layers]
  int64_t layers = 0;
  int64_t capacity = 0; // seq_length
  int64_t position = 0;
};

} // namespace megart
