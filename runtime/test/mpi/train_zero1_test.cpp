// The distributed optimizer (ZeRO-1, a program with a flat_layout; ZeRO-2 at the end) in whole training runs, against
// the same program without it (no_shard) on the same ranks: per-step losses and gradient norms,
// the checkpoints (the same files, and either one resumes the other), exact resume, fp16 loss
// scaling, tensor and pipeline parallelism beside it, and the memory it holds. Every program is
// hand-written (flat_programs.h), with the reduce-scatters and all-gathers megac compiles.
#include "megart/safetensors.h"

#include "flat_programs.h"
#include "mpi_test_util.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

using ::testing::HasSubstr;
using namespace train_test;

namespace {

using flat_test::FlatProgram;

// Largest relative difference between two series (0: bitwise equal, as far as JSON's
// shortest-round-trip numbers tell).
double max_relative(const std::vector<double> &a, const std::vector<double> &b) {
  double worst = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    if (a[i] != b[i])
      worst = std::max(worst, std::abs(a[i] - b[i]) / std::max(std::abs(a[i]), std::abs(b[i])));
  return worst;
}

// a and b within `rel` relative at every step; says how far apart they were.
void expect_relative(const std::vector<double> &a, const std::vector<double> &b, double rel,
                     const std::string &what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  ASSERT_FALSE(a.empty()) << what;
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_LE(std::abs(a[i] - b[i]), rel * std::max(std::abs(a[i]), std::abs(b[i])))
        << what << " at step " << i + 1 << ": " << a[i] << " vs " << b[i];
  std::printf("[ zero1    ] %s: %zu steps, max relative difference %.3g%s\n", what.c_str(),
              a.size(), max_relative(a, b), max_relative(a, b) == 0 ? " (bitwise equal)" : "");
}

// Every tensor of two safetensors files with the same names and shapes, within `rel` relative
// (0: bit for bit).
void expect_same_file_tensors(const std::string &a, const std::string &b, double rel) {
  const auto fa = megart::SafetensorsFile::open(a), fb = megart::SafetensorsFile::open(b);
  ASSERT_EQ(fa.names(), fb.names()) << a << " vs " << b;
  for (const std::string &name : fa.names()) {
    ASSERT_EQ(fa.get(name).shape, fb.get(name).shape) << name;
    const std::vector<float> va = fa.read_f32(name, fa.get(name).shape),
                             vb = fb.read_f32(name, fb.get(name).shape);
    for (size_t i = 0; i < va.size(); ++i) {
      if (rel == 0)
        ASSERT_EQ(va[i], vb[i]) << name << "[" << i << "] in " << a;
      else
        ASSERT_LE(std::abs(va[i] - vb[i]),
                  rel * std::max(std::abs(va[i]), std::abs(vb[i])) + 1e-30)
            << name << "[" << i << "] in " << a << ": " << va[i] << " vs " << vb[i];
    }
  }
}

std::vector<double> column(const std::vector<megart::JsonValue> &rows, const char *key) {
  std::vector<double> out;
  for (const auto &r : rows)
    out.push_back(r.get(key) ? r.get(key)->number : -1);
  return out;
}

int64_t memory_bytes(const megart::JsonValue &memory, const char *key) {
  const megart::JsonValue *v = memory.get(key);
  return v && v->is_integer() ? v->integer : -1;
}

class TrainZero1 : public ::testing::Test {
protected:
  // 555 samples of 9 tokens: 20 iterations of 16.
  void SetUp() override { write_dataset(dir_ / "data", bigram_documents(100, 50)); }

  // Accumulation (2 microbatches of 2 per dp rank), clipping (the norms are about 0.2: some steps
  // are clipped, some not), weight decay (on w, not on the bias) and a cosine schedule whose
  // length does not depend on where a run stops.
  std::vector<std::string> args(int64_t dp, const std::string &metrics,
                                std::vector<std::string> extra = {}) const {
    std::vector<std::string> a = {"--data-path", dir_ / "data", "--train-iters", "8",
                                  "--global-batch-size", std::to_string(4 * dp), "--lr", "0.1",
                                  "--lr-decay-style", "cosine", "--lr-decay-iters", "20",
                                  "--clip-grad", "0.2", "--weight-decay", "0.1",
                                  "--metrics-file", metrics, "--distributed-timeout-minutes", "1"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }

  // The run on every rank of `grid`; global rank 0's metrics rows (others get none).
  std::vector<megart::JsonValue> train(const megart::ProgramDesc &program, megart::ProcessGrid &grid,
                                       const std::vector<std::string> &a, RunResult *result = nullptr) {
    RunResult r = mpi_test::run_on(program, grid, a);
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.err, "");
    if (result)
      *result = r;
    const auto it = std::find(a.begin(), a.end(), "--metrics-file");
    if (grid.global_rank() != 0 || r.code != 0 || it == a.end())
      return {};
    return read_jsonl(*(it + 1));
  }

  // The plain bigram program (no flat layout) over all `n` ranks as dp, saved to shared/plain:
  // what the sharded runs are compared with. Rank 0's metrics rows.
  std::vector<megart::JsonValue> plain_reference(megart::ProcessGrid &grid, const mpi_test::SharedTempDir &shared,
                                                 int n) {
    Program plain = bigram_program<2>();
    plain.desc.data_parallel_size = n;
    return train(plain.desc, grid, args(n, dir_ / "plain.jsonl", {"--save", shared / "plain"}));
  }

  TempDir dir_; // this rank's own
};

// Plain data parallelism over the whole world with the bigram program, flat or not.
megart::GridShape whole_world_dp() { return {1, mpi_test::world_size(), 1}; }

} // namespace

// Flat layout in one bucket and in two, each against the same program without the layout: the same losses and norms, and the same
// checkpoint files (the moments gathered whole).
TEST_F(TrainZero1, MatchesNoShard) {
  const int n = mpi_test::world_size();
  if (n != 2 && n != 4)
    GTEST_SKIP() << "needs 2 or 4 ranks";
  auto w = mpi_test::world();
  mpi_test::SharedTempDir shared(*w);
  auto grid = megart::ProcessGrid::on(*w, whole_world_dp());
  const auto ref = plain_reference(*grid, shared, n);
  // Bitwise on 2 ranks (a + b either way); 4 ranks may add in another order.
  const double tol = n == 2 ? 0 : 1e-5;
  struct Case {
    const char *name;
    void (*make)(FlatProgram &, int64_t, bool);
  };
  const Case cases[] = {{"one bucket", &flat_test::make_bigram<flat_test::kOneBucket>},
                        {"two buckets", &flat_test::make_bigram<flat_test::kTwoBuckets>}};
  for (const Case &c : cases) {
    SCOPED_TRACE(c.name);
    FlatProgram f;
    c.make(f, n, /*compiled=*/true);
    const std::string ck = shared / (std::string("flat-") + c.name);
    RunResult r;
    const auto rows = train(f.p.desc, *grid, args(n, dir_ / "flat.jsonl", {"--save", ck}), &r);
    w->barrier(); // the checkpoints are complete
    if (w->rank() != 0)
      continue;
    ASSERT_EQ(rows.size(), 8u);
    expect_relative(losses(rows), losses(ref), 1e-5, std::string(c.name) + " lm loss, dp " + std::to_string(n));
    expect_relative(mpi_test::grad_norms(rows), mpi_test::grad_norms(ref), 1e-5,
                    std::string(c.name) + " grad norm, dp " + std::to_string(n));
    // Clipping did something: some norms are above --clip-grad.
    const std::vector<double> norms = mpi_test::grad_norms(ref);
    EXPECT_GT(*std::max_element(norms.begin(), norms.end()), 0.2);
    EXPECT_LT(*std::min_element(norms.begin(), norms.end()), 0.2);
    expect_same_file_tensors(ck + "/iter_0000008/model.safetensors",
                             shared / "plain/iter_0000008/model.safetensors", tol == 0 ? 0 : 1e-4);
    expect_same_file_tensors(ck + "/iter_0000008/optimizer.safetensors",
                             shared / "plain/iter_0000008/optimizer.safetensors", tol == 0 ? 0 : 1e-4);
    // On 2 ranks the parameters are bit for bit the unsharded run's (the moments too, above), so
    // are the losses; the norm is summed in another order (pieces, then over dp), in double.
    if (n == 2)
      EXPECT_EQ(losses(rows), losses(ref));
    EXPECT_THAT(r.out, HasSubstr(std::string("  distributed optimizer: parameters and gradients in flat "
                                             "buffers of 384 elements (112 padding) in ") +
                                 (f.layout.num_buckets == 1 ? "1 bucket;" : "2 buckets;") +
                                 " AdamW moments sharded over dp " + std::to_string(n) + ": " +
                                 std::to_string(384 / n) + " elements each\n"));
  }
}

// The memory the first iteration reports: the flat buffers whole, the moments sharded.
TEST_F(TrainZero1, MemoryIsTheFlatBuffersAndAShardOfTheMoments) {
  const int n = mpi_test::world_size();
  if (n != 2 && n != 4)
    GTEST_SKIP() << "needs 2 or 4 ranks";
  auto w = mpi_test::world();
  auto grid = megart::ProcessGrid::on(*w, whole_world_dp());
  FlatProgram f;
  flat_test::make_bigram<flat_test::kOneBucket>(f, n);
  RunResult r;
  const auto rows = train(f.p.desc, *grid, args(n, dir_ / "m.jsonl", {"--train-iters", "2"}), &r);
  if (w->rank() != 0)
    return;
  ASSERT_EQ(rows.size(), 2u);
  const megart::JsonValue *memory = rows[0].get("memory");
  ASSERT_TRUE(memory && memory->is_object());
  EXPECT_EQ(memory_bytes(*memory, "parameters"), 384 * 4);
  EXPECT_EQ(memory_bytes(*memory, "gradients"), 384 * 4);
  EXPECT_EQ(memory_bytes(*memory, "optimizer_state"), 2 * (384 / n) * 4);
  EXPECT_EQ(memory_bytes(*memory, "communication"), 0);
  EXPECT_EQ(memory_bytes(*memory, "master_weights"), 0);
}

// --fp16: the loss scale's way through unscaling the shard pieces, the norm and the skip
// decision. 2^32 is exact (the fp32 run's numbers). 2^129 x dp overflows: dloss x scale =
// 2^129 x dp / (2 microbatches x dp) = 2^128 is inf, so the first two iterations are skipped on
// every rank (hysteresis 2: the scale halves at the second), as without the layout.
TEST_F(TrainZero1, Fp16LossScaling) {
  const int n = mpi_test::world_size();
  if (n != 2 && n != 4)
    GTEST_SKIP() << "needs 2 or 4 ranks";
  auto w = mpi_test::world();
  auto grid = megart::ProcessGrid::on(*w, whole_world_dp());
  Program plain = bigram_program<2>();
  plain.desc.data_parallel_size = n;
  FlatProgram f;
  flat_test::make_bigram<flat_test::kTwoBuckets>(f, n);
  const auto fp32 = train(f.p.desc, *grid, args(n, dir_ / "fp32.jsonl"));
  const auto fp16 = train(f.p.desc, *grid, args(n, dir_ / "fp16.jsonl", {"--fp16"}));
  const std::vector<std::string> overflow = {
      "--fp16", "--initial-loss-scale",
      n == 2 ? "1361129467683753853853498429727072845824"   // 2^130
             : "2722258935367507707706996859454145691648"}; // 2^131
  const auto flat_skips = train(f.p.desc, *grid, args(n, dir_ / "flat-skip.jsonl", overflow));
  const auto plain_skips = train(plain.desc, *grid, args(n, dir_ / "plain-skip.jsonl", overflow));
  if (w->rank() != 0)
    return;
  ASSERT_EQ(fp16.size(), 8u);
  EXPECT_EQ(losses(fp16), losses(fp32));
  EXPECT_EQ(mpi_test::grad_norms(fp16), mpi_test::grad_norms(fp32));
  EXPECT_EQ(column(fp16, "loss_scale"), std::vector<double>(8, 4294967296.0));
  ASSERT_EQ(flat_skips.size(), 8u);
  EXPECT_EQ(column(flat_skips, "skipped_iterations"), (std::vector<double>{1, 1, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(column(flat_skips, "skipped_iterations"), column(plain_skips, "skipped_iterations"));
  EXPECT_EQ(column(flat_skips, "loss_scale"), column(plain_skips, "loss_scale"));
  expect_relative(losses(flat_skips), losses(plain_skips), 1e-5, "fp16 overflow lm loss");
  expect_relative(mpi_test::grad_norms(flat_skips), mpi_test::grad_norms(plain_skips), 1e-5,
                  "fp16 overflow grad norm");
}

// 10 + save + 10 is the straight 20, bit for bit; and checkpoints move between the sharded and
// the unsharded program both ways (the layout is plan-independent).
TEST_F(TrainZero1, ResumeIsExactAndCheckpointsMoveBetweenShardedAndNot) {
  const int n = mpi_test::world_size();
  if (n != 2 && n != 4)
    GTEST_SKIP() << "needs 2 or 4 ranks";
  auto w = mpi_test::world();
  mpi_test::SharedTempDir shared(*w);
  auto grid = megart::ProcessGrid::on(*w, whole_world_dp());
  Program plain = bigram_program<2>();
  plain.desc.data_parallel_size = n;
  FlatProgram f;
  flat_test::make_bigram<flat_test::kOneBucket>(f, n);
  auto a = [&](const std::string &metrics, std::vector<std::string> extra) {
    extra.insert(extra.begin(), {"--train-iters", "20"});
    return args(n, dir_ / metrics, extra);
  };
  const auto straight = train(f.p.desc, *grid, a("straight.jsonl", {"--save", shared / "straight"}));
  const auto plain_straight = train(plain.desc, *grid, a("plain-straight.jsonl", {}));
  // The first halves stop at 10 and save there.
  train(f.p.desc, *grid, a("s1.jsonl", {"--exit-interval", "10", "--save", shared / "s"}));
  train(plain.desc, *grid, a("p1.jsonl", {"--exit-interval", "10", "--save", shared / "p"}));
  const auto s_s = train(f.p.desc, *grid, a("s-s.jsonl", {"--load", shared / "s", "--save", shared / "s-s"}));
  const auto s_p = train(plain.desc, *grid, a("s-p.jsonl", {"--load", shared / "s"}));
  const auto p_s = train(f.p.desc, *grid, a("p-s.jsonl", {"--load", shared / "p"}));
  w->barrier();
  if (w->rank() != 0)
    return;
  ASSERT_EQ(straight.size(), 20u);
  ASSERT_EQ(s_s.size(), 10u);
  const std::vector<megart::JsonValue> second_half(straight.begin() + 10, straight.end());
  EXPECT_EQ(losses(s_s), losses(second_half));
  EXPECT_EQ(mpi_test::grad_norms(s_s), mpi_test::grad_norms(second_half));
  expect_same_file_tensors(shared / "s-s/iter_0000020/model.safetensors",
                           shared / "straight/iter_0000020/model.safetensors", 0);
  expect_same_file_tensors(shared / "s-s/iter_0000020/optimizer.safetensors",
                           shared / "straight/iter_0000020/optimizer.safetensors", 0);
  // The sharded checkpoint is the unsharded one (bitwise on 2 ranks).
  const double tol = n == 2 ? 0 : 1e-4;
  for (const char *file : {"model.safetensors", "optimizer.safetensors"})
    expect_same_file_tensors(shared / "s/iter_0000010/" + file, shared / "p/iter_0000010/" + file, tol);
  // Sharded -> unsharded and back continue as the straight runs do.
  const std::vector<megart::JsonValue> plain_half(plain_straight.begin() + 10, plain_straight.end());
  expect_relative(losses(s_p), losses(plain_half), 1e-5, "saved sharded, resumed unsharded: lm loss");
  expect_relative(mpi_test::grad_norms(s_p), mpi_test::grad_norms(plain_half), 1e-5,
                  "saved sharded, resumed unsharded: grad norm");
  expect_relative(losses(p_s), losses(second_half), 1e-5, "saved unsharded, resumed sharded: lm loss");
  expect_relative(mpi_test::grad_norms(p_s), mpi_test::grad_norms(second_half), 1e-5,
                  "saved unsharded, resumed sharded: grad norm");
  if (n == 2) {
    EXPECT_EQ(losses(s_p), losses(plain_half));
    EXPECT_EQ(losses(p_s), losses(second_half));
  }
}

// tp 2 x dp 2: a tp-split w and a replicated bias (counted once in the norm, on tp rank 0).
TEST_F(TrainZero1, TensorParallelBeside) {
  if (mpi_test::world_size() != 4)
    GTEST_SKIP() << "needs 4 ranks";
  auto w = mpi_test::world();
  mpi_test::SharedTempDir shared(*w);
  auto grid = megart::ProcessGrid::on(*w, {1, 2, 2});
  const Program plain = bigram_tp_program<2>(2, 2);
  FlatProgram f;
  flat_test::make_bigram<flat_test::kTp2>(f, 2);
  const auto ref = train(plain.desc, *grid, args(2, dir_ / "plain.jsonl", {"--save", shared / "plain"}));
  const auto rows = train(f.p.desc, *grid, args(2, dir_ / "flat.jsonl", {"--save", shared / "flat"}));
  w->barrier();
  if (w->rank() != 0)
    return;
  expect_relative(losses(rows), losses(ref), 1e-5, "tp2 x dp2 lm loss");
  expect_relative(mpi_test::grad_norms(rows), mpi_test::grad_norms(ref), 1e-5, "tp2 x dp2 grad norm");
  for (const char *file : {"model.safetensors", "optimizer.safetensors"})
    expect_same_file_tensors(shared / "flat/iter_0000008/" + file, shared / "plain/iter_0000008/" + file, 1e-4);
  const megart::JsonValue &memory = *rows[0].get("memory");
  EXPECT_EQ(memory_bytes(memory, "parameters"), 256 * 4);
  EXPECT_EQ(memory_bytes(memory, "gradients"), 256 * 4);
  EXPECT_EQ(memory_bytes(memory, "optimizer_state"), 2 * 128 * 4);
}

// pp 2 x dp 2: each stage shards its own table, in its own layout; the tied wte's gradient is
// summed between the stages on the whole gradients, before the reduce-scatter (after it, the two
// stages' dp rank 0 would hold different parts of wte).
TEST_F(TrainZero1, PipelineStagesShardTheirState) {
  if (mpi_test::world_size() != 4)
    GTEST_SKIP() << "needs 4 ranks";
  auto w = mpi_test::world();
  mpi_test::SharedTempDir shared(*w);
  auto grid = megart::ProcessGrid::on(*w, {2, 2, 1});
  toy::Program plain;
  toy::build<2, 2>(plain, toy::one_f_one_b(), {2, 1}, 2);
  flat_test::FlatToy f;
  flat_test::make_toy(f, 2);
  // The compiled 4 microbatches x dp 2 x micro batch 2.
  auto a = [&](const std::string &metrics, std::vector<std::string> extra) {
    std::vector<std::string> v = args(2, dir_ / metrics, extra);
    v[5] = "16";
    return v;
  };
  const auto ref = train(plain.desc, *grid, a("plain.jsonl", {"--save", shared / "plain"}));
  const auto rows = train(f.p.desc, *grid, a("flat.jsonl", {"--save", shared / "flat"}));
  w->barrier();
  if (w->rank() != 0)
    return;
  ASSERT_EQ(rows.size(), 8u);
  expect_relative(losses(rows), losses(ref), 1e-5, "pp2 x dp2 lm loss");
  expect_relative(mpi_test::grad_norms(rows), mpi_test::grad_norms(ref), 1e-5, "pp2 x dp2 grad norm");
  for (const char *file : {"model.safetensors", "optimizer.safetensors"})
    expect_same_file_tensors(shared / "flat/iter_0000008/" + file, shared / "plain/iter_0000008/" + file, 1e-4);
  const megart::JsonValue *stages = rows[0].get("memory_per_pp_stage");
  ASSERT_TRUE(stages && stages->is_array() && stages->array.size() == 2);
  for (int s = 0; s < 2; ++s) {
    const megart::JsonValue &m = stages->array[s];
    const int64_t numel = s == 0 ? 128 : 256;
    EXPECT_EQ(memory_bytes(m, "parameters"), numel * 4) << "stage " << s;
    EXPECT_EQ(memory_bytes(m, "gradients"), numel * 4) << "stage " << s;
    EXPECT_EQ(memory_bytes(m, "optimizer_state"), 2 * numel / 2 * 4) << "stage " << s;
  }
}

// What the runtime cannot do with a flat layout yet, or a layout that does not fit the plan:
// refused before training, naming the field and the fix.
TEST_F(TrainZero1, RefusesWhatItCannotShard) {
  if (mpi_test::world_size() % 2 != 0)
    GTEST_SKIP() << "needs an even number of ranks";
  auto pair = mpi_test::group_of(2);
  auto grid = megart::ProcessGrid::on(*pair, {1, 2, 1});
  auto refused = [&](const megart::ProgramDesc &program, std::vector<std::string> extra,
                     const std::string &message) {
    RunResult r = mpi_test::run_on(program, *grid, args(2, dir_ / "x.jsonl", extra));
    EXPECT_EQ(r.code, 2);
    if (pair->rank() == 0)
      EXPECT_THAT(r.err, HasSubstr(message));
    EXPECT_EQ(r.out.find("iteration"), std::string::npos);
  };
  FlatProgram zero2;
  flat_test::make_zero_bigram<flat_test::kOneBucket>(zero2, 2, /*params_too=*/false);
  zero2.p.desc.overlap_grad_reduce = true;
  refused(zero2.p.desc, {}, "overlap_grad_reduce is set with ZeRO-2/3 (flat_layout sharding 2), whose backward "
                            "reduce-scatters (and overlaps) by itself");
  FlatProgram f;
  flat_test::make_bigram<flat_test::kOneBucket>(f, 2);
  f.layout.shard_degree = 4;
  refused(f.p.desc, {}, "flat_layout shards the optimizer state over 4 ranks, which does not divide "
                        "data_parallel_size 2");
  // Hybrid sharding (here over groups of 1 of the 2 dp ranks) needs the compiled sync to sum the
  // shards across the replicas.
  FlatProgram hybrid;
  flat_test::make_bigram<flat_test::kOneBucket>(hybrid, 2, /*compiled=*/false);
  hybrid.layout.shard_degree = 1;
  refused(hybrid.p.desc, {}, "(hybrid sharding) but has no sync_gradients to sum the shards across the replicas");
  f.layout.shard_degree = 2;
  refused(f.p.desc, {"--bf16", "--grad-reduce-in-bf16"},
          "--grad-reduce-in-bf16: the distributed optimizer (the program's flat_layout) "
          "reduce-scatters the gradients in fp32");
  Program plain = bigram_program<2>();
  plain.desc.data_parallel_size = 2;
  plain.stage0().gather_params = &flat_test::gather_params<flat_test::kOneBucket>;
  refused(plain.desc, {}, "gather_params is set but flat_layout is not");
}

// ZeRO-2 (optim_grads): each microbatch's gradients reduce-scattered by the step into this rank's
// shards (the compiled backward's way), against no_shard on the same ranks: the same losses and
// norms within 1e-5 (the sums run in another order: per microbatch, then over microbatches), the
// same checkpoints, and gradient memory of one shard. ZeRO-3 (optim_grads_params): the step
// gathers the parameters from this rank's shards too, and the parameter memory is one shard.
TEST_F(TrainZero1, Zero2And3MatchNoShardWithShardsOfTheState) {
  const int n = mpi_test::world_size();
  if (n != 2 && n != 4)
    GTEST_SKIP() << "needs 2 or 4 ranks";
  auto w = mpi_test::world();
  mpi_test::SharedTempDir shared(*w);
  auto grid = megart::ProcessGrid::on(*w, whole_world_dp());
  const auto ref = plain_reference(*grid, shared, n);
  for (int zero : {2, 3})
    for (bool two : {false, true}) {
      const std::string what = "ZeRO-" + std::to_string(zero) + (two ? ", two buckets" : ", one bucket");
      SCOPED_TRACE(what);
      FlatProgram f;
      (two ? flat_test::make_zero_bigram<flat_test::kTwoBuckets>
           : flat_test::make_zero_bigram<flat_test::kOneBucket>)(f, n, zero == 3);
      const std::string ck = shared / ("zero" + std::to_string(zero) + (two ? "-two" : "-one"));
      const auto rows = train(f.p.desc, *grid, args(n, dir_ / "z.jsonl", {"--save", ck}));
      w->barrier();
      if (w->rank() != 0)
        continue;
      ASSERT_EQ(rows.size(), 8u);
      expect_relative(losses(rows), losses(ref), 1e-5, what + " lm loss, dp " + std::to_string(n));
      expect_relative(mpi_test::grad_norms(rows), mpi_test::grad_norms(ref), 1e-5,
                      what + " grad norm, dp " + std::to_string(n));
      for (const char *file : {"model.safetensors", "optimizer.safetensors"})
        expect_same_file_tensors(ck + "/iter_0000008/" + file, shared / "plain/iter_0000008/" + file, 1e-4);
      const megart::JsonValue *memory = rows[0].get("memory");
      ASSERT_TRUE(memory && memory->is_object());
      EXPECT_EQ(memory_bytes(*memory, "parameters"), (zero == 3 ? 384 / n : 384) * 4);
      EXPECT_EQ(memory_bytes(*memory, "gradients"), 384 / n * 4);
      EXPECT_EQ(memory_bytes(*memory, "optimizer_state"), 2 * (384 / n) * 4);
    }
}

// ZeRO-2 sums a tied weight's gradient between pipeline stages shard by shard: a stage layout that
// puts it in a bucket with another parameter is refused before training.
TEST_F(TrainZero1, Zero2RefusesATiedWeightSharingABucket) {
  if (mpi_test::world_size() != 4)
    GTEST_SKIP() << "needs 4 ranks";
  auto w = mpi_test::world();
  auto grid = megart::ProcessGrid::on(*w, {2, 2, 1});
  flat_test::FlatToy f;
  flat_test::make_toy(f, 2);
  for (megart::FlatLayoutDesc &l : f.layouts) // stage 0 puts wte and h.0.w in one bucket, stage 1 not
    l.sharding = megart::DataParallelSharding::OptimGrads;
  toy::set_closing(f.p, {megart::PipeOpKind::GradSync, megart::PipeOpKind::TiedSumShards,
                         megart::PipeOpKind::OptimizerStep, megart::PipeOpKind::ParamGather});
  std::vector<std::string> a = args(2, dir_ / "x.jsonl");
  a[5] = "16";
  RunResult r = mpi_test::run_on(f.p.desc, *grid, a);
  EXPECT_EQ(r.code, 2);
  if (w->rank() == 0) // the one rank that prints
    EXPECT_THAT(r.err, HasSubstr("stage 0: the tied parameter 'transformer.wte.weight' shares gradient bucket 0 with 'h.0.w'"));
  EXPECT_EQ(r.out.find("iteration"), std::string::npos);
}

// ZeRO-Offload: the first K elements of each rank's shard stepped on the host (the same AdamW,
// on host master weights and moments) give bit for bit the run that steps all of them on the
// device, and the same checkpoints; the device then holds moments for the rest only and the host
// 16 bytes per offloaded element (master weights, two moments, the gradients' copy).
TEST_F(TrainZero1, OffloadedStepMatchesBitForBit) {
  const int n = mpi_test::world_size();
  if (n != 2)
    GTEST_SKIP() << "needs 2 ranks";
  auto w = mpi_test::world();
  mpi_test::SharedTempDir shared(*w);
  auto grid = megart::ProcessGrid::on(*w, whole_world_dp());
  const int64_t shard = 384 / n;
  std::vector<double> reference;
  for (const int64_t offloaded : {int64_t{0}, shard / 2 + 3, shard}) {
    SCOPED_TRACE(offloaded);
    FlatProgram f;
    flat_test::make_bigram<flat_test::kTwoBuckets>(f, n);
    f.layout.offloaded_numel = offloaded;
    const std::string ck = shared / ("offload-" + std::to_string(offloaded));
    const auto rows = train(f.p.desc, *grid, args(n, dir_ / "o.jsonl", {"--save", ck}));
    w->barrier();
    if (w->rank() != 0)
      continue;
    ASSERT_EQ(rows.size(), 8u);
    if (offloaded == 0) {
      reference = losses(rows);
    } else {
      EXPECT_EQ(losses(rows), reference);
      for (const char *file : {"model.safetensors", "optimizer.safetensors"})
        expect_same_file_tensors(ck + "/iter_0000008/" + file, shared / ("offload-0/iter_0000008/" + std::string(file)),
                                 0);
    }
    const megart::JsonValue *memory = rows[0].get("memory");
    ASSERT_TRUE(memory && memory->is_object());
    EXPECT_EQ(memory_bytes(*memory, "optimizer_state"), 2 * (shard - offloaded) * 4);
    EXPECT_EQ(memory_bytes(*memory, "offloaded_optimizer"), 16 * offloaded);
  }
  // A run stopped at 4 and resumed from its checkpoint (the host moments and master weights
  // restored) continues bit for bit as the straight run.
  FlatProgram f;
  flat_test::make_bigram<flat_test::kTwoBuckets>(f, n);
  f.layout.offloaded_numel = shard / 2 + 3;
  train(f.p.desc, *grid, args(n, dir_ / "first.jsonl", {"--exit-interval", "4", "--save", shared / "resumed"}));
  const auto rest = train(f.p.desc, *grid, args(n, dir_ / "rest.jsonl", {"--load", shared / "resumed"}));
  if (w->rank() != 0)
    return;
  ASSERT_EQ(rest.size(), 4u);
  EXPECT_EQ(losses(rest), std::vector<double>(reference.begin() + 4, reference.end()));
}
