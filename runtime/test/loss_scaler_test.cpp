// The loss scalers against Megatron-LM's DynamicGradScaler / ConstantGradScaler semantics.
#include "megart/error.h"
#include "megart/loss_scaler.h"

#include <gtest/gtest.h>

using megart::DynamicLossScaleConfig;
using megart::DynamicLossScaler;

namespace {

DynamicLossScaler scaler(double initial, double min, int64_t window, int64_t hysteresis) {
  DynamicLossScaleConfig c;
  c.initial_scale = initial;
  c.min_scale = min;
  c.window = window;
  c.hysteresis = hysteresis;
  return DynamicLossScaler(c);
}

} // namespace

TEST(DynamicLossScaler, MegatronDefaults) {
  DynamicLossScaler s{DynamicLossScaleConfig{}};
  EXPECT_EQ(s.scale(), 4294967296.0); // 2^32
  EXPECT_EQ(s.hysteresis_tracker(), 2);
  EXPECT_EQ(s.growth_tracker(), 0);
}

TEST(DynamicLossScaler, GrowsAfterWindowFiniteIterations) {
  DynamicLossScaler s = scaler(1024, 1, 3, 2);
  s.update(true);
  s.update(true);
  EXPECT_EQ(s.scale(), 1024);
  s.update(true);
  EXPECT_EQ(s.scale(), 2048);
  EXPECT_EQ(s.growth_tracker(), 0);
  for (int i = 0; i < 3; ++i)
    s.update(true);
  EXPECT_EQ(s.scale(), 4096);
}

TEST(DynamicLossScaler, OverflowRestartsTheWindow) {
  DynamicLossScaler s = scaler(1024, 1, 3, 2);
  s.update(true);
  s.update(true);
  s.update(false); // hysteresis 2: no back-off yet, but the finite run starts over
  EXPECT_EQ(s.scale(), 1024);
  s.update(true);
  s.update(true);
  EXPECT_EQ(s.scale(), 1024);
  s.update(true);
  EXPECT_EQ(s.scale(), 2048);
}

TEST(DynamicLossScaler, BacksOffOnTheSecondOverflowWithHysteresis2) {
  DynamicLossScaler s = scaler(1024, 1, 1000, 2);
  s.update(false);
  EXPECT_EQ(s.scale(), 1024);
  EXPECT_EQ(s.hysteresis_tracker(), 1);
  s.update(false);
  EXPECT_EQ(s.scale(), 512);
  // The budget is refilled only by a growth: every further overflow halves again.
  s.update(false);
  EXPECT_EQ(s.scale(), 256);
  EXPECT_EQ(s.hysteresis_tracker(), -1);
}

TEST(DynamicLossScaler, FiniteIterationsBetweenOverflowsDoNotRefillHysteresis) {
  DynamicLossScaler s = scaler(1024, 1, 1000, 2);
  s.update(false);
  for (int i = 0; i < 10; ++i)
    s.update(true);
  s.update(false);
  EXPECT_EQ(s.scale(), 512);
}

TEST(DynamicLossScaler, GrowthRefillsHysteresis) {
  DynamicLossScaler s = scaler(1024, 1, 2, 2);
  s.update(false);
  s.update(false);
  EXPECT_EQ(s.scale(), 512);
  s.update(true);
  s.update(true);
  EXPECT_EQ(s.scale(), 1024);
  EXPECT_EQ(s.hysteresis_tracker(), 2);
  s.update(false); // one overflow is tolerated again
  EXPECT_EQ(s.scale(), 1024);
  s.update(false);
  EXPECT_EQ(s.scale(), 512);
}

TEST(DynamicLossScaler, NeverBacksOffBelowMin) {
  DynamicLossScaler s = scaler(8, 3, 1000, 1);
  s.update(false);
  EXPECT_EQ(s.scale(), 4);
  s.update(false);
  EXPECT_EQ(s.scale(), 3); // max(2, 3)
  s.update(false);
  EXPECT_EQ(s.scale(), 3);
}

TEST(DynamicLossScaler, RejectsConfigsMegatronAssertsOn) {
  EXPECT_THROW(scaler(1, 2, 1000, 2), megart::Error); // min above initial
  EXPECT_THROW(scaler(1024, 0, 1000, 2), megart::Error);
  EXPECT_THROW(scaler(1024, 1, 0, 2), megart::Error);
  EXPECT_THROW(scaler(1024, 1, 1000, 0), megart::Error);
}

TEST(StaticLossScaler, NeverChanges) {
  megart::StaticLossScaler s(65536);
  for (bool finite : {false, false, false, true, true})
    s.update(finite);
  EXPECT_EQ(s.scale(), 65536);
  EXPECT_THROW(megart::StaticLossScaler(0), megart::Error);
}

TEST(LossScaler, MadeFromFlags) {
  megart::TrainFlags f;
  EXPECT_EQ(megart::make_loss_scaler(f), nullptr); // fp32
  f.bf16 = true;
  EXPECT_EQ(megart::make_loss_scaler(f), nullptr); // bf16: no scaling
  f.bf16 = false;
  f.fp16 = true;
  auto dynamic = megart::make_loss_scaler(f);
  ASSERT_NE(dynamic, nullptr);
  EXPECT_EQ(dynamic->scale(), 4294967296.0);
  dynamic->update(false);
  dynamic->update(false);
  EXPECT_EQ(dynamic->scale(), 2147483648.0);
  f.loss_scale = 128;
  auto fixed = megart::make_loss_scaler(f);
  fixed->update(false);
  fixed->update(false);
  EXPECT_EQ(fixed->scale(), 128);
}
