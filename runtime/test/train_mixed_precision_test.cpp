// The training loop's loss scaling (--fp16), run on the CPU through a device that accepts every
// precision but computes in fp32: the scaling is then the only difference from an fp32 run. And
// the CPU device itself, which emulates bf16 / fp16 GEMMs (kernels_gemm_precision_test.cpp has
// the rounding; test/e2e/mixed_precision.py the loss curves of the example model).
#include "train_test_util.h"

#include "megart/loss_scaler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

using ::testing::HasSubstr;
using namespace train_test;

namespace {

class AcceptsAnyPrecision final : public megart::Device {
public:
  std::string describe() const override { return "cpu (fp32 math for every precision)"; }
  void *allocate(std::size_t bytes) override { return cpu().allocate(bytes); }
  void release(void *p) noexcept override { cpu().release(p); }
  void zero(void *p, std::size_t bytes) override { cpu().zero(p, bytes); }
  void copy_from_host(void *d, const void *s, std::size_t n) override { cpu().copy_from_host(d, s, n); }
  void copy_to_host(void *d, const void *s, std::size_t n) override { cpu().copy_to_host(d, s, n); }
  void synchronize() override {}
  double sum_of_squares(const megart::TensorList &t) override { return cpu().sum_of_squares(t); }
  void scale(const megart::MutableTensorList &t, float c) override { cpu().scale(t, c); }
  void to_bf16(uint16_t *o, const float *i, int64_t n) override { cpu().to_bf16(o, i, n); }
  void from_bf16(float *o, const uint16_t *i, int64_t n) override { cpu().from_bf16(o, i, n); }
  void adamw(const std::vector<megart::AdamWTensor> &t, const megart::AdamWScalars &with,
             const megart::AdamWScalars &without) override {
    cpu().adamw(t, with, without);
  }
  // GEMMs stay fp32 whatever an earlier run on the CPU device left set.
  void set_compute_precision(megart::Precision) override {
    megart::cpu::set_gemm_precision(megart::Precision::Fp32);
  }

private:
  static megart::Device &cpu() { return megart::cpu_device(); }
};

megart::Device &any_precision() {
  static AcceptsAnyPrecision device;
  return device;
}

// The bigram model (no GEMM), noting the CPU's GEMM precision its step runs under.
megart::Precision g_step_precision = megart::Precision::Fp32;
float noting_forward(const megart::StepContext &ctx, float *const *params, char *arena, const int32_t *ids,
                     const int32_t *labels, const float *input, float *output, char *stash) {
  g_step_precision = megart::cpu::gemm_precision();
  return bigram_forward<2, false>(ctx, params, arena, ids, labels, input, output, stash);
}

class TrainMixedPrecision : public ::testing::Test {
protected:
  void SetUp() override {
    write_dataset(dir_ / "data", bigram_documents(4, 50)); // 24 samples: 12 iterations of 2
    program_.desc.device = &any_precision;
  }

  RunResult run(const std::string &metrics, std::vector<std::string> extra) {
    std::vector<std::string> a = {"--data-path", dir_ / "data", "--train-iters", "12",
                                  "--lr", "0.05", "--metrics-file", dir_ / metrics};
    a.insert(a.end(), extra.begin(), extra.end());
    return run_training(program_.desc, a);
  }

  TempDir dir_;
  Program program_ = bigram_program<2>();
};

} // namespace

// Scaling by 2^32 and back is exact, so every loss and norm is the fp32 run's, bit for bit.
TEST_F(TrainMixedPrecision, PowerOfTwoScaleGivesTheFp32RunExactly) {
  ASSERT_EQ(run("fp32.jsonl", {}).code, 0);
  const RunResult dynamic = run("dynamic.jsonl", {"--fp16"});
  ASSERT_EQ(dynamic.code, 0) << dynamic.err;
  ASSERT_EQ(run("static.jsonl", {"--fp16", "--loss-scale", "1024"}).code, 0);
  const auto fp32 = read_jsonl(dir_ / "fp32.jsonl");
  ASSERT_EQ(fp32.size(), 12u);
  for (const auto &[file, scale] : {std::pair{"dynamic.jsonl", 4294967296.0}, {"static.jsonl", 1024.0}}) {
    const auto rows = read_jsonl(dir_ / file);
    ASSERT_EQ(rows.size(), fp32.size()) << file;
    for (size_t i = 0; i < rows.size(); ++i) {
      EXPECT_EQ(rows[i].get("lm_loss")->number, fp32[i].get("lm_loss")->number) << file << " " << i;
      EXPECT_EQ(rows[i].get("grad_norm")->number, fp32[i].get("grad_norm")->number) << file << " " << i;
      ASSERT_NE(rows[i].get("loss_scale"), nullptr) << file;
      EXPECT_EQ(rows[i].get("loss_scale")->number, scale) << file << " " << i;
      EXPECT_EQ(fp32[i].get("loss_scale"), nullptr);
    }
  }
  EXPECT_THAT(dynamic.out, HasSubstr("| loss scale: 4294967296.0 |"));
  EXPECT_THAT(dynamic.out, HasSubstr("  precision: fp16 GEMM inputs, fp32 accumulation; weights, gradients and "
                                     "optimizer in fp32; loss scale 4294967296 (dynamic: min 1, window 1000, "
                                     "hysteresis 2)\n"));
}

// dloss x 2^130 (and 2^129, 2^128) is inf in float: those iterations are skipped, and with
// hysteresis 2 the scale halves from the second one on. At 2^127 every gradient of this model
// is finite (at most 16 tokens x 2^127 / 16), and training goes on.
TEST_F(TrainMixedPrecision, OverflowSkipsTheStepAndBacksOff) {
  const RunResult r = run("m.jsonl", {"--fp16", "--initial-loss-scale", "1361129467683753853853498429727072845824"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto rows = read_jsonl(dir_ / "m.jsonl");
  ASSERT_EQ(rows.size(), 12u);
  const double p130 = std::ldexp(1.0, 130);
  const std::vector<double> scale = {p130, p130 / 2, p130 / 4, p130 / 8};
  for (size_t i = 0; i < rows.size(); ++i) {
    const bool skipped = i < 4;
    EXPECT_EQ(rows[i].get("skipped_iterations")->number, skipped ? 1 : 0) << i;
    EXPECT_EQ(rows[i].get("loss_scale")->number, skipped ? scale[i] : std::ldexp(1.0, 127)) << i;
    EXPECT_TRUE(std::isfinite(rows[i].get("lm_loss")->number)) << i; // the forward is unscaled
  }
  EXPECT_THAT(r.out, HasSubstr("4 skipped (non-finite gradient norm)"));
}

TEST_F(TrainMixedPrecision, Bf16HasNoLossScale) {
  const RunResult r = run("m.jsonl", {"--bf16"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("  precision: bf16 GEMM inputs, fp32 accumulation; weights, gradients and "
                               "optimizer in fp32\n"));
  EXPECT_EQ(r.out.find("loss scale"), std::string::npos);
  for (const auto &row : read_jsonl(dir_ / "m.jsonl"))
    EXPECT_EQ(row.get("loss_scale"), nullptr);
}

// The CPU device takes --bf16 / --fp16 and emulates them: the program's GEMMs run in that
// precision (cpu::gemm_precision() inside the step), the header says it is an emulation, and a
// later fp32 run is fp32 again.
TEST_F(TrainMixedPrecision, CpuDeviceEmulatesBf16AndFp16) {
  Program p = bigram_program<2>();
  p.chunk[0].forward = &noting_forward;
  auto train = [&](const std::string &metrics, std::vector<std::string> extra) {
    std::vector<std::string> a = {"--data-path", dir_ / "data", "--train-iters", "3", "--lr", "0.05",
                                  "--metrics-file", dir_ / metrics};
    a.insert(a.end(), extra.begin(), extra.end());
    g_step_precision = megart::Precision::Fp32;
    return run_training(p.desc, a);
  };
  const RunResult bf16 = train("bf16.jsonl", {"--bf16"});
  ASSERT_EQ(bf16.code, 0) << bf16.err;
  EXPECT_EQ(g_step_precision, megart::Precision::Bf16);
  EXPECT_THAT(bf16.out, HasSubstr("  device: cpu, "));
  EXPECT_THAT(bf16.out, HasSubstr("  precision: bf16 emulated on the CPU (GEMM inputs rounded to bf16, fp32 "
                                  "accumulate; for checking numerics, slower than fp32); weights, gradients "
                                  "and optimizer in fp32\n"));
  EXPECT_EQ(read_jsonl(dir_ / "bf16.jsonl").size(), 3u);

  const RunResult fp16 = train("fp16.jsonl", {"--fp16", "--initial-loss-scale", "65536"});
  ASSERT_EQ(fp16.code, 0) << fp16.err;
  EXPECT_EQ(g_step_precision, megart::Precision::Fp16);
  EXPECT_THAT(fp16.out, HasSubstr("  precision: fp16 emulated on the CPU (GEMM inputs rounded to fp16, fp32 "
                                  "accumulate; for checking numerics, slower than fp32); weights, gradients "
                                  "and optimizer in fp32; loss scale 65536 (dynamic: min 1, window 1000, "
                                  "hysteresis 2)\n"));
  for (const auto &row : read_jsonl(dir_ / "fp16.jsonl"))
    EXPECT_EQ(row.get("loss_scale")->number, 65536.0);

  const RunResult fp32 = train("fp32.jsonl", {});
  ASSERT_EQ(fp32.code, 0) << fp32.err;
  EXPECT_EQ(g_step_precision, megart::Precision::Fp32);
  EXPECT_EQ(megart::cpu::gemm_precision(), megart::Precision::Fp32);
  EXPECT_EQ(fp32.out.find("precision:"), std::string::npos);
}
