// Embedding lookup and gradient, whole-vocabulary and vocabulary-parallel shards, against the
// CPU kernels. Exact equality: the forward copies rows; the backward adds each id's dout rows
// in token order starting from zero, the same additions in the same order as the CPU, so the
// float results are bitwise identical (and the same on every run).
#include "cuda_test_util.h"

#include "megart/kernels.h"
#include "megart/parallel_kernels.h"

#include <string>

namespace megart::cuda::test {
namespace {

using CudaEmbedding = CudaTest;

struct Case {
  int64_t tokens, vocab, dim;
};

// Many repeats of few ids (long runs to sum); more ids than tokens (rows that get no
// gradient); dim beyond one block (256) and odd; a single token.
const Case kCases[] = {{1000, 37, 300}, {100, 2000, 17}, {1, 5, 3}, {257, 64, 64}};

std::string describe(const Case &c) {
  return std::to_string(c.tokens) + " tokens, vocab " + std::to_string(c.vocab) + ", dim " + std::to_string(c.dim);
}

TEST_F(CudaEmbedding, ForwardMatchesCpu) {
  for (const Case &c : kCases) {
    const auto table = random_floats(c.vocab * c.dim, 71);
    const auto ids = random_ids(c.tokens, 72, 0, static_cast<int32_t>(c.vocab));
    std::vector<float> want(c.tokens * c.dim);
    megart::cpu::embedding_forward(want.data(), table.data(), ids.data(), c.tokens, c.vocab, c.dim);
    const DeviceArray<float> dtable(table);
    const DeviceArray<int32_t> dids(ids);
    DeviceArray<float> out(want.size());
    embedding_forward(out.data(), dtable.data(), dids.data(), c.tokens, c.vocab, c.dim);
    expect_near_all(out.get(), want, 0.0f, 0.0f, describe(c));
  }
}

TEST_F(CudaEmbedding, BackwardMatchesCpuBitwise) {
  for (const Case &c : kCases) {
    const auto dout = random_floats(c.tokens * c.dim, 73);
    const auto ids = random_ids(c.tokens, 74, 0, static_cast<int32_t>(c.vocab));
    std::vector<float> want(c.vocab * c.dim);
    megart::cpu::embedding_backward(want.data(), dout.data(), ids.data(), c.tokens, c.vocab, c.dim);
    const DeviceArray<float> ddout(dout);
    const DeviceArray<int32_t> dids(ids);
    DeviceArray<float> dtable(random_floats(want.size(), 75)); // garbage: must be overwritten
    embedding_backward(dtable.data(), ddout.data(), dids.data(), c.tokens, c.vocab, c.dim);
    expect_near_all(dtable.get(), want, 0.0f, 0.0f, describe(c));
    // A second run gives the same bits (no atomics).
    embedding_backward(dtable.data(), ddout.data(), dids.data(), c.tokens, c.vocab, c.dim);
    expect_near_all(dtable.get(), want, 0.0f, 0.0f, describe(c) + " (second run)");
  }
}

// A vocabulary of 50 split over 3 ranks of 17 rows (the last has one padding row); ids from the
// whole vocabulary, so each shard sees ids below, inside and above its share.
TEST_F(CudaEmbedding, ShardsMatchCpu) {
  const int64_t vocab = 50, local = 17, tokens = 301, dim = 259;
  const auto ids = random_ids(tokens, 76, 0, static_cast<int32_t>(vocab));
  const auto dout = random_floats(tokens * dim, 77);
  const DeviceArray<int32_t> dids(ids);
  const DeviceArray<float> ddout(dout);
  for (int64_t start : {0, 17, 34}) {
    const std::string shard = "shard starting at " + std::to_string(start);
    const auto table = random_floats(local * dim, 78 + start);
    std::vector<float> want(tokens * dim);
    megart::cpu::embedding_forward_shard(want.data(), table.data(), ids.data(), tokens, local, dim, start);
    const DeviceArray<float> dtable(table);
    DeviceArray<float> out(random_floats(want.size(), 79)); // rows of other shards must become 0
    embedding_forward_shard(out.data(), dtable.data(), dids.data(), tokens, local, dim, start);
    expect_near_all(out.get(), want, 0.0f, 0.0f, "forward " + shard);

    std::vector<float> want_grad(local * dim);
    megart::cpu::embedding_backward_shard(want_grad.data(), dout.data(), ids.data(), tokens, local, dim, start);
    DeviceArray<float> grad(random_floats(want_grad.size(), 80));
    embedding_backward_shard(grad.data(), ddout.data(), dids.data(), tokens, local, dim, start);
    expect_near_all(grad.get(), want_grad, 0.0f, 0.0f, "backward " + shard);
  }
}

} // namespace
} // namespace megart::cuda::test
