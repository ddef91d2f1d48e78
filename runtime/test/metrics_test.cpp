#include "megart/error.h"
#include "megart/json.h"
#include "megart/metrics.h"
#include "megart/program.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;

namespace {

megart::IterationMetrics sample_metrics() {
  megart::IterationMetrics m;
  m.iteration = 3;
  m.consumed_samples = 24;
  m.global_batch_size = 8;
  m.ms_per_iter = 123.44;
  m.tokens_per_s = 1234.46;
  m.lr = 1e-3;
  m.lm_loss = 5.5123449;
  m.grad_norm = 1.2344;
  return m;
}

std::vector<std::string> read_lines(const std::string &path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  return lines;
}

} // namespace

TEST(MetricsLogLine, MegatronFormat) {
  EXPECT_EQ(megart::format_log_line(sample_metrics(), 10, "2026-11-21 10:00:00"),
            " [2026-11-21 10:00:00] iteration        3/      10 | consumed samples:           24 |"
            " elapsed time per iteration (ms): 123.4 | throughput (tokens/s): 1234.5 |"
            " learning rate: 1.000000E-03 | global batch size:     8 | lm loss: 5.512345E+00 |"
            " grad norm: 1.234 | number of skipped iterations:   0 | number of nan iterations:   0 |");
}

TEST(MetricsLogLine, OptionalFields) {
  megart::IterationMetrics m = sample_metrics();
  m.grad_norm = -1; // not computed
  m.loss_scale = 65536;
  m.tflops_per_gpu = 137.25;
  m.nan_iterations = 2;
  const std::string line = megart::format_log_line(m, 10, "t");
  EXPECT_THAT(line, Not(HasSubstr("grad norm")));
  EXPECT_THAT(line, HasSubstr("| loss scale: 65536.0 |"));
  EXPECT_THAT(line, HasSubstr("| throughput per GPU (TFLOP/s/GPU): 137 |"));
  EXPECT_THAT(line, HasSubstr("| number of nan iterations:   2 |"));
  EXPECT_THAT(line, Not(HasSubstr("ETA")));
  // Three significant digits, so a CPU's throughput does not read as 0.0.
  m.tflops_per_gpu = 0.0123456;
  EXPECT_THAT(megart::format_log_line(m, 10, "t"), HasSubstr("| throughput per GPU (TFLOP/s/GPU): 0.0123 |"));
  m.tflops_per_gpu = 4.5678;
  EXPECT_THAT(megart::format_log_line(m, 10, "t"), HasSubstr("| throughput per GPU (TFLOP/s/GPU): 4.57 |"));
  m.eta_seconds = 725.4;
  EXPECT_THAT(megart::format_log_line(m, 10, "t"), HasSubstr("| ETA: 12 min 05 s |"));
  m.eta_seconds = 3 * 3600 + 125;
  EXPECT_THAT(megart::format_log_line(m, 10, "t"), HasSubstr("| ETA: 3 h 02 min |"));
  m.lm_loss = NAN;
  EXPECT_THAT(megart::format_log_line(m, 10, "t"), HasSubstr("| lm loss: NAN |"));
}

TEST(MetricsLogLine, StampsCurrentTime) {
  const std::string line = megart::format_log_line(sample_metrics(), 10);
  EXPECT_THAT(line, MatchesRegex(" \\[[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}\\] "
                                 "iteration .*"));
}

TEST(MetricsJson, OneObjectPerLineWithFullPrecision) {
  char tmpl[] = "/tmp/megart-metrics-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string path = std::string(tmpl) + "/metrics.jsonl";
  {
    megart::MetricsFile f = megart::MetricsFile::open(path);
    megart::IterationMetrics m = sample_metrics();
    m.lm_loss = 10.987654321f; // a float32 loss must come back exactly
    f.append(m);
    // Readable before the file is closed: every line is written through.
    EXPECT_EQ(read_lines(path).size(), 1u);
    m.iteration = 4;
    m.lm_loss = INFINITY;
    m.grad_norm = -1;
    f.append(m);
  }
  std::vector<std::string> lines = read_lines(path);
  ASSERT_EQ(lines.size(), 2u);
  megart::JsonValue first = megart::parse_json(lines[0], "line 1");
  EXPECT_EQ(first.get("iteration")->integer, 3);
  EXPECT_EQ(static_cast<float>(first.get("lm_loss")->number), 10.987654321f);
  EXPECT_NEAR(first.get("grad_norm")->number, 1.2344, 1e-12);
  EXPECT_EQ(first.get("lr")->number, 1e-3);
  EXPECT_NEAR(first.get("tokens_per_s")->number, 1234.46, 1e-9);
  EXPECT_NEAR(first.get("ms_per_iter")->number, 123.44, 1e-9);
  EXPECT_EQ(first.get("consumed_samples")->integer, 24);
  EXPECT_EQ(first.get("global_batch_size")->integer, 8);
  megart::JsonValue second = megart::parse_json(lines[1], "line 2");
  EXPECT_EQ(second.get("lm_loss")->kind, megart::JsonValue::Kind::Null); // JSON has no inf
  EXPECT_EQ(second.get("grad_norm")->kind, megart::JsonValue::Kind::Null);

  EXPECT_EQ(first.get("pipeline_stash_peak_measured"), nullptr); // only with a pipeline

  // Reopening truncates unless asked to append (a resumed run).
  megart::MetricsFile::open(path, /*append_existing=*/true).append(sample_metrics());
  EXPECT_EQ(read_lines(path).size(), 3u);
  megart::MetricsFile::open(path).append(sample_metrics());
  EXPECT_EQ(read_lines(path).size(), 1u);
  fs::remove_all(tmpl);
}

TEST(MetricsJson, ResumedRunKeepsTheRecordsUpToItsCheckpoint) {
  char tmpl[] = "/tmp/megart-metrics-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string path = std::string(tmpl) + "/m.jsonl";
  {
    megart::MetricsFile f = megart::MetricsFile::open(path);
    for (int64_t k = 1; k <= 7; ++k) {
      megart::IterationMetrics m = sample_metrics();
      m.iteration = k;
      f.append(m);
    }
  }
  // A run killed while writing iteration 8's line, resumed from the checkpoint at iteration 5.
  std::ofstream(path, std::ios::app) << "{\"iteration\":8,\"lm_lo";
  megart::IterationMetrics m = sample_metrics();
  m.iteration = 6;
  megart::MetricsFile::open_resumed(path, 5).append(m);
  const std::vector<std::string> lines = read_lines(path);
  std::vector<int64_t> iterations;
  for (const std::string &line : lines)
    iterations.push_back(megart::parse_json(line, "line").get("iteration")->integer);
  EXPECT_EQ(iterations, (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
  fs::remove_all(tmpl);
}

TEST(MetricsJson, UnwritablePathIsNamed) {
  try {
    megart::MetricsFile::open("/nonexistent-folder/metrics.jsonl");
    FAIL() << "expected megart::Error";
  } catch (const megart::Error &e) {
    EXPECT_THAT(e.what(), HasSubstr("/nonexistent-folder/metrics.jsonl: cannot open"));
  }
}

TEST(MetricsJson, PipelineStashPeaksAreIntegerArrays) {
  megart::IterationMetrics m = sample_metrics();
  m.pipeline_stash_peak_measured = {4, 3};
  m.pipeline_stash_peak_predicted = {4, 2};
  const std::string json = megart::format_metrics_json(m);
  EXPECT_NE(json.find(",\"pipeline_stash_peak_measured\":[4,3],"
                      "\"pipeline_stash_peak_predicted\":[4,2]}"),
            std::string::npos)
      << json;
  const megart::JsonValue v = megart::parse_json(json, "record");
  EXPECT_EQ(v.get("pipeline_stash_peak_measured")->array[1].integer, 3);
}

TEST(MetricsJson, ExpertLoadIsOneIntegerArrayPerLayer) {
  megart::IterationMetrics m = sample_metrics();
  EXPECT_EQ(megart::format_metrics_json(m).find("tokens_per_expert"), std::string::npos); // only with experts
  m.tokens_per_expert = {{17, 104, 19, 116}, {16, 23, 105, 112}};
  const std::string json = megart::format_metrics_json(m);
  EXPECT_NE(json.find(",\"tokens_per_expert\":[[17,104,19,116],[16,23,105,112]]"), std::string::npos) << json;
  const megart::JsonValue v = megart::parse_json(json, "record");
  EXPECT_EQ(v.get("tokens_per_expert")->array[1].array[2].integer, 105);
}

// A compiled layer's counts land in its row; a recomputed layer's rerun, and a context that keeps
// no histogram (evaluation), record nothing.
TEST(ExpertLoad, EachLayerFillsItsRowAndRerunsRecordNothing) {
  std::vector<int64_t> load(3 * 4, 0);
  megart::StepContext ctx;
  ctx.expert_load = load.data();
  const int32_t counts[4] = {1, 2, 3, 4};
  megart::record_expert_load(ctx.for_layer(1), counts, 4);
  megart::record_expert_load(ctx.for_layer(1), counts, 4);
  megart::record_expert_load(ctx.for_recomputed_layer(2), counts, 4);
  megart::StepContext evaluation = ctx;
  evaluation.expert_load = nullptr;
  megart::record_expert_load(evaluation.for_layer(0), counts, 4);
  EXPECT_EQ(load, (std::vector<int64_t>{0, 0, 0, 0, 2, 4, 6, 8, 0, 0, 0, 0}));
}

TEST(MetricsJson, MemoryIsAnObjectOfExactBytes) {
  megart::IterationMetrics m = sample_metrics();
  EXPECT_EQ(megart::format_metrics_json(m).find("memory"), std::string::npos);
  megart::MemoryUsage stage0, stage1;
  stage0.peak = {1, 2, 3, 0, 5, 6, 7, 8, 9, 10};
  stage0.peak_total = 51;
  stage0.current_total = 31; // not reported
  stage1.peak = {4294967297, 0, 0, 0, 0, 0, 0, 0, 0, 0}; // 2^32 + 1: exact, not %g
  stage1.peak_total = 4294967297;
  const std::string one =
      "{\"parameters\":1,\"gradients\":2,\"optimizer_state\":3,\"master_weights\":0,"
      "\"activations\":5,\"workspace\":6,\"communication\":7,\"data\":8,\"offloaded_optimizer\":9,"
      "\"frozen_parameters\":10,\"peak_total\":51}";
  m.memory = {stage0};
  std::string json = megart::format_metrics_json(m);
  EXPECT_NE(json.find(",\"memory\":" + one + "}"), std::string::npos) << json;
  EXPECT_EQ(json.find("memory_per_pp_stage"), std::string::npos) << json;

  // With a pipeline: this rank's (stage 0's) and every stage's.
  m.memory = {stage0, stage1};
  json = megart::format_metrics_json(m);
  const megart::JsonValue v = megart::parse_json(json, "record");
  EXPECT_EQ(v.get("memory")->get("peak_total")->integer, 51);
  const megart::JsonValue *stages = v.get("memory_per_pp_stage");
  ASSERT_TRUE(stages && stages->is_array());
  ASSERT_EQ(stages->array.size(), 2u);
  EXPECT_EQ(stages->array[0].get("optimizer_state")->integer, 3);
  EXPECT_EQ(stages->array[1].get("parameters")->integer, 4294967297);
  EXPECT_EQ(stages->array[1].get("peak_total")->integer, 4294967297);
}
