// The memory accounting: the tracker's arithmetic, what DeviceBuffer and ParamStore count, the
// report's wording, and the report of a whole (single-rank) training run.
#include "megart/memory_accounting.h"
#include "megart/memory_report.h"
#include "megart/param_store.h"

#include "train_test_util.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

using megart::MemoryCategory;
using megart::MemoryTracker;
using megart::MemoryUsage;
using ::testing::HasSubstr;
using namespace train_test;

namespace {

// What the process's tracker counts now in each category, and in total.
struct Held {
  std::array<int64_t, megart::kNumMemoryCategories> bytes{};
  int64_t total = 0;
  static Held now() {
    const MemoryUsage u = megart::memory_tracker().usage();
    return {u.current, u.current_total};
  }
  int64_t operator[](MemoryCategory c) const { return bytes[static_cast<size_t>(c)]; }
};

// after - before, per category.
Held added(const Held &before, const Held &after) {
  Held d;
  for (size_t i = 0; i < d.bytes.size(); ++i)
    d.bytes[i] = after.bytes[i] - before.bytes[i];
  d.total = after.total - before.total;
  return d;
}

} // namespace

TEST(MemoryTracker, PeakTotalIsTheHighestSumNotTheSumOfPeaks) {
  MemoryTracker t;
  t.allocated(MemoryCategory::Parameters, 100);
  t.allocated(MemoryCategory::Workspace, 50);
  t.released(MemoryCategory::Parameters, 100);
  t.allocated(MemoryCategory::Gradients, 80);
  const MemoryUsage u = t.usage();
  EXPECT_EQ(u.current_of(MemoryCategory::Parameters), 0);
  EXPECT_EQ(u.peak_of(MemoryCategory::Parameters), 100);
  EXPECT_EQ(u.current_of(MemoryCategory::Gradients), 80);
  EXPECT_EQ(u.peak_of(MemoryCategory::Workspace), 50);
  EXPECT_EQ(u.current_total, 130);
  EXPECT_EQ(u.peak_total, 150); // parameters + workspace; the peaks add up to 230
}

TEST(MemoryTracker, ReleaseLowersCurrentAndKeepsPeaksUntilReset) {
  MemoryTracker t;
  t.allocated(MemoryCategory::Activations, 64);
  t.allocated(MemoryCategory::Activations, 32);
  t.released(MemoryCategory::Activations, 64);
  MemoryUsage u = t.usage();
  EXPECT_EQ(u.current_of(MemoryCategory::Activations), 32);
  EXPECT_EQ(u.peak_of(MemoryCategory::Activations), 96);
  EXPECT_EQ(u.peak_total, 96);
  t.reset_peaks(); // the peaks start again from what is held
  u = t.usage();
  EXPECT_EQ(u.peak_of(MemoryCategory::Activations), 32);
  EXPECT_EQ(u.peak_total, 32);
  t.allocated(MemoryCategory::Data, 8);
  EXPECT_EQ(t.usage().peak_total, 40);
}

TEST(MemoryTracker, DeviceBufferCountsItsRequestedBytesWhileItLives) {
  const Held before = Held::now();
  {
    // 3 bytes: the CPU allocator rounds to 64, the count does not.
    megart::DeviceBuffer a(megart::cpu_device(), 3, MemoryCategory::Communication);
    megart::DeviceBuffer b(megart::cpu_device(), 1000, MemoryCategory::Data);
    megart::DeviceBuffer moved = std::move(a); // counted once, under its category
    EXPECT_EQ(moved.category(), MemoryCategory::Communication);
    const Held d = added(before, Held::now());
    EXPECT_EQ(d[MemoryCategory::Communication], 3);
    EXPECT_EQ(d[MemoryCategory::Data], 1000);
    EXPECT_EQ(d.total, 1003);
    b = megart::DeviceBuffer(); // released when replaced
    EXPECT_EQ(added(before, Held::now()).total, 3);
  }
  EXPECT_EQ(added(before, Held::now()).total, 0);
}

TEST(MemoryTracker, ParamStoreHoldsThreeCopiesOfTheParametersAndTheFlatGradients) {
  // A fused [4, 6] weight as three [4, 2] column blocks, plus a [6] bias: 30 floats.
  std::vector<megart::ParamDesc> layout;
  for (int64_t k = 0; k < 3; ++k)
    layout.push_back({"attn.c_attn.weight", 2, {4, 2}, {0, 2 * k}, {4, 6},
                      megart::ParamInit::Normal, 1.0f, true});
  layout.push_back({"attn.c_attn.bias", 1, {6}, {0}, {6}, megart::ParamInit::Normal, 1.0f, false});
  const Held before = Held::now();
  {
    megart::ParamStore store(layout.data(), static_cast<int64_t>(layout.size()));
    const Held d = added(before, Held::now());
    EXPECT_EQ(d[MemoryCategory::Parameters], 30 * 4);
    EXPECT_EQ(d[MemoryCategory::OptimizerState], 2 * 30 * 4);
    // One allocation; each of the 4 gradients starts on a 64-byte boundary (16 floats).
    EXPECT_EQ(d[MemoryCategory::Gradients], 4 * 16 * 4);
    EXPECT_EQ(d[MemoryCategory::Gradients], store.flat_grads_numel() * 4);
    EXPECT_EQ(d.total, 30 * 4 * 3 + 4 * 16 * 4); // nothing in any other category
  }
  EXPECT_EQ(added(before, Held::now()).total, 0);
}

TEST(MemoryTracker, ParamStoreCountsThisTensorParallelRanksBlocks) {
  const Program p = bigram_tp_program<2>(2); // w [16, 16] split in two row blocks, b [16]
  const Held before = Held::now();
  megart::ParamStore store(p.params.data(), static_cast<int64_t>(p.params.size()), 1, 2);
  const Held d = added(before, Held::now());
  const int64_t floats = 8 * 16 + 16;
  EXPECT_EQ(d[MemoryCategory::Parameters], floats * 4);
  EXPECT_EQ(d[MemoryCategory::Gradients], floats * 4); // both already multiples of 16
  EXPECT_EQ(d[MemoryCategory::OptimizerState], 2 * floats * 4);
  EXPECT_EQ(d.total, 4 * floats * 4);
}

TEST(MemoryReport, Wording) {
  EXPECT_EQ(megart::format_bytes(0), "0 B");
  EXPECT_EQ(megart::format_bytes(1023), "1023 B");
  EXPECT_EQ(megart::format_bytes(1536), "1.50 KiB");
  EXPECT_EQ(megart::format_bytes(1289748), "1.23 MiB");
  EXPECT_EQ(megart::format_bytes(int64_t{3} << 30), "3.00 GiB");
  MemoryUsage u;
  u.peak = {1024, 2048, 4096, 0, 512, 100, 0, 256};
  u.peak_total = 8036;
  EXPECT_EQ(megart::describe_memory(u, "pp stage 1"),
            "memory (pp stage 1): parameters 1.00 KiB, gradients 2.00 KiB, optimizer state 4.00 KiB, "
            "master weights 0 B, activations 512 B, workspace 100 B, communication 0 B, data 256 B, "
            "peak total 7.85 KiB");
}

TEST(MemoryReport, SelfCommunicatorGathersItsOwnUsage) {
  MemoryUsage u;
  u.current = {1, 2, 3, 4, 5, 6, 7, 8};
  u.peak = {9, 10, 11, 12, 13, 14, 15, (int64_t{1} << 40) + 1}; // past a float's 2^24
  u.current_total = 36;
  u.peak_total = (int64_t{1} << 41) + 3;
  megart::SelfCommunicator self;
  const std::vector<MemoryUsage> all = megart::gather_memory_usage(u, self);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].current, u.current);
  EXPECT_EQ(all[0].peak, u.peak);
  EXPECT_EQ(all[0].current_total, 36);
  EXPECT_EQ(all[0].peak_total, u.peak_total);
}

// A single-rank run allocates everything before or during its first iteration and frees
// nothing, so each category's peak is what it holds and together they are the peak total.
TEST(TrainMemory, FirstRecordReportsEveryCategoryExactly) {
  TempDir dir;
  write_dataset(dir / "data", bigram_documents(40, 50));
  const Program p = bigram_program<2>(); // micro batch 2, 2 microbatches per iteration
  RunResult r = run_training(p.desc, {"--data-path", dir / "data", "--train-iters", "3",
                                      "--global-batch-size", "4", "--lr", "0.05",
                                      "--metrics-file", dir / "m.jsonl"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto rows = read_jsonl(dir / "m.jsonl");
  ASSERT_EQ(rows.size(), 3u);
  const megart::JsonValue *memory = rows[0].get("memory");
  ASSERT_TRUE(memory && memory->is_object());
  auto bytes = [&](const char *key) {
    const megart::JsonValue *v = memory->get(key);
    return v && v->is_integer() ? v->integer : int64_t{-1};
  };
  const int64_t params = (16 * 16 + 16) * 4; // w and b; both gradients start 64-byte aligned
  EXPECT_EQ(bytes("parameters"), params);
  EXPECT_EQ(bytes("gradients"), params);
  EXPECT_EQ(bytes("optimizer_state"), 2 * params);
  EXPECT_EQ(bytes("master_weights"), 0);
  EXPECT_EQ(bytes("activations"), p.chunk[0].stash_bytes); // one microbatch's logits, stashed
  EXPECT_EQ(bytes("workspace"), p.stage[0].arena_bytes);
  EXPECT_EQ(bytes("communication"), 0);
  EXPECT_EQ(bytes("data"), 2 * (2 * 2 * kSeq) * 4); // ids and labels of both microbatches
  int64_t sum = 0;
  for (megart::MemoryCategory c : megart::memory_categories())
    sum += bytes(megart::memory_category_key(c));
  EXPECT_EQ(bytes("peak_total"), sum);
  EXPECT_EQ(sum, 4 * params + p.chunk[0].stash_bytes + p.stage[0].arena_bytes + 256);
  EXPECT_EQ(rows[0].get("memory_per_pp_stage"), nullptr); // no pipeline
  EXPECT_EQ(rows[1].get("memory"), nullptr);               // first iteration only
  EXPECT_THAT(r.out, HasSubstr("\nmemory (each rank): parameters 1.06 KiB, gradients 1.06 KiB, "
                               "optimizer state 2.12 KiB, master weights 0 B, activations 1.00 KiB, "
                               "workspace 2.00 KiB, communication 0 B, data 256 B, "
                               "peak total 7.50 KiB (exact bytes in the metrics file)\n"));
}
