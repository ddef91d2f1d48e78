#include "megac/Plan/FlatBufferLayout.h"

#include "llvm/ADT/STLExtras.h"

#include <numeric>

using namespace megac;

static int64_t roundUp(int64_t n, int64_t multiple) { return (n + multiple - 1) / multiple * multiple; }

FlatBufferLayout megac::layoutFlatBuffer(llvm::ArrayRef<int64_t> numels, int64_t bucketSize, int64_t shardDegree,
                                         llvm::ArrayRef<int64_t> boundaries, llvm::ArrayRef<bool> experts,
                                         int64_t expertShardDegree) {
  FlatBufferLayout layout;
  const int64_t n = static_cast<int64_t>(numels.size());
  auto isExpert = [&](int64_t i) { return !experts.empty() && experts[i]; };
  layout.paramOffsets.assign(n, 0);
  int64_t bucketStart = 0, next = 0, bucketLast = n - 1;
  auto closeBucket = [&](int64_t firstParam, int64_t end) {
    const bool expertBucket = isExpert(firstParam);
    const int64_t degree = expertBucket ? expertShardDegree : shardDegree;
    const int64_t padded = roundUp(end, std::lcm(degree, kBucketEndAlignment));
    FlatBufferLayout::Bucket k{firstParam, bucketLast, bucketStart, padded - bucketStart, degree, layout.shardNumel,
                               expertBucket};
    layout.buckets.push_back(k);
    layout.shardNumel += k.shardNumel();
    bucketStart = next = padded;
    bucketLast = firstParam - 1;
  };
  for (int64_t i = n - 1; i >= 0; --i) {
    const int64_t start = roundUp(next, kParamStartAlignment);
    layout.paramOffsets[i] = start;
    next = start + numels[i];
    layout.paramNumel += numels[i];
    // Megatron closes a bucket after the parameter that fills it; a boundary closes it after
    // the parameter that starts a chunk (the next one belongs to the chunk before), and so does
    // a change between experts and the rest (sharded over other ranks).
    if (i > 0 && (next - bucketStart >= bucketSize || llvm::is_contained(boundaries, i) ||
                  isExpert(i) != isExpert(i - 1)))
      closeBucket(i, next);
  }
  if (n > 0)
    closeBucket(0, next);
  layout.numel = bucketStart;
  return layout;
}
