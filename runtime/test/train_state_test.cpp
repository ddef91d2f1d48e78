#include "megart/error.h"
#include "megart/train_state.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

using ::testing::HasSubstr;

namespace {

megart::TrainState sample_state() {
  megart::TrainState s;
  s.iteration = 20;
  s.consumed_samples = 160;
  s.optimizer_steps = 17;
  s.skipped_iterations = 3;
  s.seed = 1234;
  s.shuffle = false;
  s.data_num_samples = 7414;
  s.loss_scaler = megart::LossScalerState{0.1 * 3, 2, -1}; // not a power of 2: read back exactly
  s.program_summary = "gpt2 2 layers \"quoted\"";
  s.spec_yaml = "family: gpt2\nnum_layers: 2\n";
  megart::TrainFlags flags;
  flags.lr = 3e-3;
  flags.lr_decay_style = "cosine";
  flags.lr_decay_iters = 40;
  flags.train_iters = 40; // as resolve_train_flags leaves them
  flags.micro_batch_size = flags.global_batch_size = 8;
  flags.fp16 = true; // the loss scaler's run
  s.args_json = megart::format_train_args(flags);
  return s;
}

std::string replace(std::string text, const std::string &from, const std::string &to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return at == std::string::npos ? text : text.replace(at, from.size(), to);
}

void expect_refused(const std::string &text, const std::string &message) {
  try {
    megart::parse_train_state(text, "ck/train_state.json");
    ADD_FAILURE() << "accepted; expected: " << message;
  } catch (const megart::Error &e) {
    EXPECT_THAT(e.what(), HasSubstr("ck/train_state.json: " + message));
  }
}

} // namespace

TEST(TrainState, ReadsBackWhatWasWritten) {
  const megart::TrainState s = sample_state();
  const megart::TrainState back = megart::parse_train_state(megart::format_train_state(s), "x");
  EXPECT_EQ(back.iteration, 20);
  EXPECT_EQ(back.consumed_samples, 160);
  EXPECT_EQ(back.optimizer_steps, 17);
  EXPECT_EQ(back.skipped_iterations, 3);
  EXPECT_EQ(back.seed, 1234u);
  EXPECT_FALSE(back.shuffle);
  EXPECT_EQ(back.data_num_samples, 7414);
  ASSERT_TRUE(back.loss_scaler.has_value());
  EXPECT_EQ(back.loss_scaler->scale, 0.1 * 3); // bit for bit
  EXPECT_EQ(back.loss_scaler->growth_tracker, 2);
  EXPECT_EQ(back.loss_scaler->hysteresis_tracker, -1);
  EXPECT_EQ(back.program_summary, s.program_summary);
  EXPECT_EQ(back.schedule.lr, 3e-3);
  EXPECT_EQ(back.schedule.lr_decay_style, "cosine");
  EXPECT_EQ(back.schedule.lr_decay_iters, 40);
  EXPECT_EQ(back.schedule.weight_decay, 0.01);

  megart::TrainState no_scaler = s;
  no_scaler.loss_scaler.reset();
  megart::TrainFlags bf16;
  bf16.lr = 3e-3;
  bf16.lr_decay_iters = 40;
  bf16.train_iters = 40;
  bf16.micro_batch_size = bf16.global_batch_size = 8;
  bf16.bf16 = true;
  no_scaler.args_json = megart::format_train_args(bf16);
  EXPECT_FALSE(megart::parse_train_state(megart::format_train_state(no_scaler), "x").loss_scaler);
}

TEST(TrainState, DamagedFieldsAreNamed) {
  const std::string good = megart::format_train_state(sample_state());
  // The loss scaler's state goes with an fp16 run, and only with one.
  expect_refused(replace(good, "\"fp16\": true", "\"fp16\": false"),
                 "holds a loss scaler's state, but its run was not fp16");
  megart::TrainState unscaled = sample_state();
  unscaled.loss_scaler.reset();
  expect_refused(megart::format_train_state(unscaled), "holds no loss scaler's state, but its run was fp16");
  expect_refused(replace(good, "\"iteration\": 20", "\"iteration\": -1"), "iteration is -1; it must be >= 0");
  expect_refused(replace(good, "\"consumed_samples\": 160", "\"consumed_samples\": \"160\""),
                 "consumed_samples is \"160\", not an integer");
  expect_refused(replace(good, "\"shuffle\": false", "\"shuffle\": 0"), "data.shuffle is 0, not true or false");
  expect_refused(replace(good, "\"optimizer_steps\": 17", "\"optimizer_steps\": 18"),
                 "optimizer_steps (18) + skipped_iterations (3) is more than iteration (20)");
  expect_refused(replace(good, "\"version\": 1", "\"version\": 2"), "version 2 is newer than this program reads");
  expect_refused(replace(good, "\"format\": \"megac-train-state\"", "\"format\": \"x\""), "format is \"x\"");
  expect_refused(replace(good, "\"growth_tracker\": 2,", ""), "loss_scaler.growth_tracker is missing");
  expect_refused(replace(good, "\"lr_decay_style\": \"cosine\"", "\"lr_decay_style\": 3"),
                 "args.lr_decay_style is 3, not a string");
  // The recorded flags are what format_train_args writes, or the file is damaged.
  expect_refused(replace(good, "\"global_batch_size\": 8", "\"global_batch_size\": \"x\""),
                 "args.global_batch_size is \"x\", not an integer");
  expect_refused(replace(good, "\"train_iters\": 40", "\"train_iters\": -1"), "args.train_iters is -1; it must be >= 1");
  expect_refused(replace(good, "\"adam_eps\": 1e-08", "\"adam_eps\": 0"), "args.adam_eps is 0; it must be a finite "
                 "number above 0");
  expect_refused(replace(good, "\"bf16\": false", "\"bf16\": {}"), "args.bf16 is {}, not true or false");
}
