#include "kernels_test_util.h"
#include "megart/kernels.h"

#include <string>

namespace {

using namespace megart::test;
namespace cpu = megart::cpu;

DVec ref_embedding(const DVec& table, const std::vector<int32_t>& ids, int64_t dim) {
  DVec out;
  for (int32_t id : ids)
    out.insert(out.end(), table.begin() + id * dim, table.begin() + (id + 1) * dim);
  return out;
}

TEST(KernelsEmbedding, ForwardCopiesRows) {
  const int64_t vocab = 11, dim = 7;
  const Vec table = random_vec(vocab * dim, 1);
  const std::vector<int32_t> ids = {3, 0, 10, 3, 7};
  Vec out(ids.size() * dim);
  cpu::embedding_forward(out.data(), table.data(), ids.data(), ids.size(), vocab, dim);
  expect_close(out, ref_embedding(to_double(table), ids, dim), 0.0, "embedding_forward");
}

TEST(KernelsEmbedding, BackwardMatchesFiniteDifferences) {
  // Repeated ids (3 three times) exercise the accumulation; 37 columns split unevenly.
  for (int64_t dim : {1, 5, 37}) {
    const int64_t vocab = 9;
    const std::vector<int32_t> ids = {3, 1, 3, 8, 0, 3};
    const Vec table = random_vec(vocab * dim, 2), dout = random_vec(ids.size() * dim, 3);
    Vec dtable(vocab * dim, 123.0f); // garbage: must be overwritten
    cpu::embedding_backward(dtable.data(), dout.data(), ids.data(), ids.size(), vocab, dim);
    const DVec want = fd_grad([&](const DVec& t) { return ref_embedding(t, ids, dim); },
                              to_double(table), to_double(dout));
    // The forward is linear, so differences are exact up to double rounding; the kernel adds
    // at most three floats per entry.
    expect_close(dtable, want, 1e-6, "embedding_backward dim " + std::to_string(dim));
  }
}

TEST(KernelsEmbedding, IdOutOfRangeThrowsNamingPosition) {
  const int64_t vocab = 4, dim = 2;
  const Vec table = random_vec(vocab * dim, 4);
  Vec out(3 * dim), dtable(vocab * dim);
  for (int32_t bad : {-1, 4}) {
    const std::vector<int32_t> ids = {0, 1, bad};
    try {
      cpu::embedding_forward(out.data(), table.data(), ids.data(), 3, vocab, dim);
      ADD_FAILURE() << "id " << bad << " accepted";
    } catch (const megart::Error& e) {
      EXPECT_NE(std::string(e.what()).find("position 2"), std::string::npos) << e.what();
    }
    EXPECT_THROW(cpu::embedding_backward(dtable.data(), out.data(), ids.data(), 3, vocab, dim),
                 megart::Error);
  }
}

} // namespace
