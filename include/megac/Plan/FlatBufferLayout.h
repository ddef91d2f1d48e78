// Megatron's parameter-and-gradient buffer for sharded data parallelism: one flat buffer per
// pipeline stage holding every parameter (and, beside it, every gradient) in reverse order, so
// that buckets fill in the order backward finishes them. Each parameter starts at a multiple of
// 64 elements; a bucket closes once it holds at least the bucket size and its end is padded to
// lcm(shard degree, 128) elements, so every bucket splits into equal, aligned shards. With expert
// parallelism an expert-parallel rank's experts are sharded over the dp ranks that hold the same
// experts (Megatron's expert-data-parallel group), a smaller degree: they get buckets of their own.
#pragma once

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>

namespace megac {

struct FlatBufferLayout {
  struct Bucket {
    int64_t firstParam, lastParam; // table indices; the bucket holds lastParam first
    int64_t offset;                // element offset in the buffer
    int64_t numel;                 // padded: a multiple of lcm(shardDegree, 128)
    int64_t shardDegree;           // the ranks its state is sharded over
    int64_t shardOffset;           // where a rank's shard of it starts among the rank's shards
    bool experts = false;          // an expert-parallel rank's experts (sharded over expert_dp)
    int64_t shardNumel() const { return numel / shardDegree; }
  };
  llvm::SmallVector<int64_t> paramOffsets; // element offset of each parameter, in table order
  llvm::SmallVector<Bucket> buckets;       // in buffer order (the last parameters first)
  int64_t numel = 0;                       // the whole buffer, padding included
  int64_t paramNumel = 0;                  // the parameters alone
  int64_t shardNumel = 0;                  // one rank's shards of every bucket, in buffer order

  int64_t padding() const { return numel - paramNumel; }
};

constexpr int64_t kParamStartAlignment = 64; // elements
constexpr int64_t kBucketEndAlignment = 128; // elements, with the shard degree (lcm)

/// The layout of parameters with `numels` elements (table order) in buckets of at least
/// `bucketSize` elements; `boundaries` are table indices that must start a bucket (a chunk's
/// first parameter, so a chunk's backward starts whole buckets). The parameters marked in
/// `experts` (empty: none) are sharded over `expertShardDegree` ranks, the rest over `shardDegree`;
/// no bucket holds both. Sizes are bounded by the caller (megac/Limits.h): no overflow.
FlatBufferLayout layoutFlatBuffer(llvm::ArrayRef<int64_t> numels, int64_t bucketSize, int64_t shardDegree,
                                  llvm::ArrayRef<int64_t> boundaries = {}, llvm::ArrayRef<bool> experts = {},
                                  int64_t expertShardDegree = 1);

} // namespace megac
