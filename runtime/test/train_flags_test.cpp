#include "megart/error.h"
#include "megart/train_flags.h"

#include "expect_error.h"
#include "train_test_util.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

using megart::TrainFlags;
using ::testing::HasSubstr;

namespace {

struct Parsed {
  std::optional<int> exit;
  TrainFlags flags;
  std::string out, err;
};

Parsed parse(std::vector<std::string> args) {
  std::vector<const char *> argv{"train"};
  for (const std::string &a : args)
    argv.push_back(a.c_str());
  Parsed p;
  std::ostringstream out, err;
  p.exit = megart::parse_train_flags(static_cast<int>(argv.size()), argv.data(), p.flags, out, err);
  p.out = out.str();
  p.err = err.str();
  return p;
}

const std::vector<std::string> kMinimal = {"--data-path", "d", "--train-iters", "10", "--lr",
                                           "1e-4"};

std::string resolve_error(std::vector<std::string> extra, int64_t compiled_micro = 4) {
  std::vector<std::string> args = kMinimal;
  args.insert(args.end(), extra.begin(), extra.end());
  Parsed p = parse(args);
  EXPECT_FALSE(p.exit) << p.err;
  megart::ProgramDesc program{};
  program.micro_batch_size = compiled_micro;
  return error_of([&] { megart::resolve_train_flags(p.flags, program); });
}

} // namespace

TEST(TrainFlags, MegatronDefaults) {
  Parsed p = parse(kMinimal);
  ASSERT_FALSE(p.exit) << p.err;
  megart::ProgramDesc program{};
  program.micro_batch_size = 4;
  megart::resolve_train_flags(p.flags, program);
  const TrainFlags &f = p.flags;
  EXPECT_EQ(f.data_path, std::vector<std::string>{"d"});
  EXPECT_EQ(f.train_iters, 10);
  EXPECT_EQ(f.micro_batch_size, 4);
  EXPECT_EQ(f.global_batch_size, 4);
  EXPECT_EQ(f.lr, 1e-4);
  EXPECT_EQ(f.min_lr, 0.0);
  EXPECT_EQ(f.lr_decay_style, "linear");
  EXPECT_EQ(f.lr_warmup_iters, 0);
  EXPECT_EQ(f.lr_decay_iters, 10);
  EXPECT_EQ(f.weight_decay, 0.01);
  EXPECT_EQ(f.adam_beta1, 0.9);
  EXPECT_EQ(f.adam_beta2, 0.999);
  EXPECT_EQ(f.adam_eps, 1e-8);
  EXPECT_EQ(f.clip_grad, 1.0);
  EXPECT_EQ(f.seed, 1234);
  EXPECT_TRUE(f.shuffle);
  EXPECT_EQ(f.save_interval, 0);
  EXPECT_EQ(f.log_interval, 1);
}

TEST(TrainFlags, ParsesEveryFlag) {
  Parsed p = parse({"--data-path", "x/y", "--train-iters", "7", "--micro-batch-size", "2",
                    "--global-batch-size", "8", "--lr", "0.003", "--min-lr", "0.0001",
                    "--lr-decay-style", "cosine", "--lr-warmup-iters", "2", "--lr-decay-iters",
                    "6", "--weight-decay", "0.1", "--adam-beta1", "0.8", "--adam-beta2", "0.95",
                    "--adam-eps", "1e-6", "--clip-grad", "0", "--seed", "5", "--no-shuffle",
                    "--load", "a.safetensors", "--save", "ck", "--save-interval", "3",
                    "--log-interval", "2", "--metrics-file", "m.jsonl"});
  ASSERT_FALSE(p.exit) << p.err;
  megart::ProgramDesc program{};
  program.micro_batch_size = 2;
  megart::resolve_train_flags(p.flags, program);
  const TrainFlags &f = p.flags;
  EXPECT_EQ(f.global_batch_size, 8);
  EXPECT_EQ(f.lr_decay_style, "cosine");
  EXPECT_EQ(f.lr_decay_iters, 6);
  EXPECT_EQ(f.adam_beta2, 0.95);
  EXPECT_EQ(f.clip_grad, 0.0);
  EXPECT_FALSE(f.shuffle);
  EXPECT_EQ(f.load, "a.safetensors");
  EXPECT_EQ(f.save, "ck");
  EXPECT_EQ(f.save_interval, 3);
  EXPECT_EQ(f.log_interval, 2);
  EXPECT_EQ(f.metrics_file, "m.jsonl");
}

TEST(TrainFlags, HelpListsFlags) {
  Parsed p = parse({"--help"});
  ASSERT_TRUE(p.exit);
  EXPECT_EQ(*p.exit, 0);
  for (const char *flag : {"--data-path", "--train-iters", "--micro-batch-size",
                           "--global-batch-size", "--lr", "--min-lr", "--lr-decay-style",
                           "--lr-warmup-iters", "--lr-decay-iters", "--weight-decay",
                           "--adam-beta1", "--adam-beta2", "--adam-eps", "--clip-grad", "--seed",
                           "--no-shuffle", "--load", "--save", "--save-interval", "--log-interval",
                           "--metrics-file"})
    EXPECT_THAT(p.out, HasSubstr(flag));
}

TEST(TrainFlags, ParseErrorsNameTheFlag) {
  Parsed unknown = parse({"--data-path", "d", "--train-iters", "1", "--lr", "1", "--tp", "2"});
  ASSERT_TRUE(unknown.exit);
  EXPECT_EQ(*unknown.exit, 1);
  EXPECT_THAT(unknown.err, HasSubstr("error: "));
  EXPECT_THAT(unknown.err, HasSubstr("--tp"));

  Parsed missing = parse({"--data-path", "d", "--train-iters", "1"});
  ASSERT_TRUE(missing.exit);
  EXPECT_THAT(missing.err, HasSubstr("--lr"));

  Parsed bad_number = parse({"--data-path", "d", "--train-iters", "ten", "--lr", "1"});
  ASSERT_TRUE(bad_number.exit);
  EXPECT_THAT(bad_number.err, HasSubstr("--train-iters"));

  Parsed zero_micro = parse({"--data-path", "d", "--train-iters", "1", "--lr", "1",
                             "--micro-batch-size", "0"});
  ASSERT_TRUE(zero_micro.exit);
  EXPECT_THAT(zero_micro.err, HasSubstr("--micro-batch-size"));

  Parsed bad_style = parse({"--data-path", "d", "--train-iters", "1", "--lr", "1",
                            "--lr-decay-style", "step"});
  ASSERT_TRUE(bad_style.exit);
  EXPECT_THAT(bad_style.err, HasSubstr("step"));
}

TEST(TrainFlags, ChecksAgainstProgram) {
  EXPECT_EQ(resolve_error({"--micro-batch-size", "8"}),
            "--micro-batch-size 8 does not match the compiled program (4): recompile with "
            "`megac compile SPEC --micro-batch-size 8`");
  EXPECT_EQ(resolve_error({"--global-batch-size", "6"}),
            "--global-batch-size (6) is not a multiple of the micro batch size (4); use a "
            "multiple of 4, e.g. 8");
  EXPECT_THAT(resolve_error({"--train-iters", "0"}), HasSubstr("--train-iters is 0"));
  EXPECT_THAT(resolve_error({"--lr", "0"}), HasSubstr("--lr is 0; it must be > 0"));
  EXPECT_THAT(resolve_error({"--min-lr", "0.1"}), HasSubstr("--min-lr is 0.1"));
  EXPECT_THAT(resolve_error({"--adam-beta2", "1"}), HasSubstr("--adam-beta2 is 1"));
  EXPECT_THAT(resolve_error({"--clip-grad", "-1"}), HasSubstr("--clip-grad is -1"));
  EXPECT_THAT(resolve_error({"--log-interval", "0"}), HasSubstr("--log-interval is 0"));
  EXPECT_THAT(resolve_error({"--save-interval", "5"}), HasSubstr("needs --save DIR"));
  EXPECT_THAT(resolve_error({"--lr-warmup-iters", "20"}),
              HasSubstr("--lr-warmup-iters (20) is greater than --lr-decay-iters (10)"));
  EXPECT_EQ(resolve_error({"--lr-warmup-iters", "20", "--lr-decay-style", "constant"}), "");
}

TEST(TrainFlags, DataParallelBatch) {
  auto resolved = [](std::vector<std::string> extra, int64_t dp) {
    std::vector<std::string> args = kMinimal;
    args.insert(args.end(), extra.begin(), extra.end());
    Parsed p = parse(args);
    megart::ProgramDesc program{};
    program.micro_batch_size = 2;
    program.data_parallel_size = dp;
    megart::resolve_train_flags(p.flags, program);
    return p.flags;
  };
  // Megatron's default global batch: one microbatch per dp rank.
  EXPECT_EQ(resolved({}, 4).global_batch_size, 8);
  EXPECT_EQ(resolved({"--global-batch-size", "12"}, 3).global_batch_size, 12);
  try {
    resolved({"--global-batch-size", "6"}, 2);
    FAIL() << "accepted 6 samples over 2 dp ranks of micro batch 2";
  } catch (const megart::Error &e) {
    EXPECT_STREQ(e.what(), "--global-batch-size (6) is not divisible by micro batch (2) x data "
                           "parallel size (2); use a multiple of 4, e.g. 8");
  }
}

TEST(TrainFlags, DdpBucketSize) {
  Parsed defaults = parse(kMinimal);
  ASSERT_FALSE(defaults.exit);
  EXPECT_EQ(defaults.flags.ddp_bucket_size, 40000000);
  Parsed given = parse({"--data-path", "d", "--train-iters", "1", "--lr", "1",
                        "--ddp-bucket-size", "1000"});
  ASSERT_FALSE(given.exit) << given.err;
  EXPECT_EQ(given.flags.ddp_bucket_size, 1000);
  Parsed zero = parse({"--data-path", "d", "--train-iters", "1", "--lr", "1",
                       "--ddp-bucket-size", "0"});
  ASSERT_TRUE(zero.exit);
  EXPECT_THAT(zero.err, HasSubstr("--ddp-bucket-size"));
}

TEST(TrainFlags, RankLayoutNeedsNoOtherFlag) {
  Parsed p = parse({"--rank-layout"});
  ASSERT_FALSE(p.exit) << p.err;
  EXPECT_TRUE(p.flags.rank_layout);
  Parsed missing = parse({"--train-iters", "1"});
  ASSERT_TRUE(missing.exit); // still required for training
  EXPECT_THAT(missing.err, HasSubstr("--data-path"));
}

TEST(TrainFlags, DistributedTimeoutMinutes) {
  Parsed defaults = parse(kMinimal);
  ASSERT_FALSE(defaults.exit);
  EXPECT_EQ(defaults.flags.distributed_timeout_minutes, 10.0); // Megatron's default
  Parsed decimal = parse({"--data-path", "d", "--train-iters", "1", "--lr", "1",
                          "--distributed-timeout-minutes", "0.05"});
  ASSERT_FALSE(decimal.exit) << decimal.err;
  EXPECT_EQ(decimal.flags.distributed_timeout_minutes, 0.05);
  EXPECT_EQ(resolve_error({"--distributed-timeout-minutes", "0.05"}), "");
  EXPECT_EQ(resolve_error({"--distributed-timeout-minutes", "0"}),
            "--distributed-timeout-minutes is 0; it must be > 0 (minutes a rank waits for the "
            "others, e.g. 10, or 0.5)");
  EXPECT_THAT(resolve_error({"--distributed-timeout-minutes", "-1"}),
              HasSubstr("--distributed-timeout-minutes is -1; it must be > 0"));
  Parsed word = parse({"--data-path", "d", "--train-iters", "1", "--lr", "1",
                       "--distributed-timeout-minutes", "soon"});
  ASSERT_TRUE(word.exit);
  EXPECT_THAT(word.err, HasSubstr("--distributed-timeout-minutes"));
}

TEST(TrainFlags, PipelineBatchIsCompiledIn) {
  auto resolve = [](std::vector<std::string> extra) {
    std::vector<std::string> args = kMinimal;
    args.insert(args.end(), extra.begin(), extra.end());
    Parsed p = parse(args);
    megart::ProgramDesc program{};
    program.micro_batch_size = 2;
    program.data_parallel_size = 3;
    program.pipeline_parallel_size = 2;
    program.num_microbatches = 4;
    megart::resolve_train_flags(p.flags, program);
    return p.flags;
  };
  EXPECT_EQ(resolve({}).global_batch_size, 24); // micro batch 2 x dp 3 x 4 microbatches
  EXPECT_EQ(resolve({"--global-batch-size", "24"}).global_batch_size, 24);
  try {
    resolve({"--global-batch-size", "48"});
    FAIL() << "accepted a batch the schedule was not compiled for";
  } catch (const megart::Error &e) {
    EXPECT_STREQ(e.what(), "--global-batch-size 48 does not match the compiled pipeline "
                           "schedule: micro batch 2 x dp 3 x 4 microbatches = 24; recompile "
                           "with `megac compile ... --global-batch-size 48` (or leave the flag "
                           "out)");
  }
}

TEST(TrainFlags, MixedPrecisionDefaults) {
  Parsed p = parse(kMinimal);
  ASSERT_FALSE(p.exit) << p.err;
  const TrainFlags &f = p.flags;
  EXPECT_FALSE(f.bf16);
  EXPECT_FALSE(f.fp16);
  EXPECT_EQ(f.loss_scale, 0.0);
  EXPECT_EQ(f.initial_loss_scale, 4294967296.0); // Megatron's 2^32
  EXPECT_EQ(f.min_loss_scale, 1.0);
  EXPECT_EQ(f.loss_scale_window, 1000);
  EXPECT_EQ(f.hysteresis, 2);
  EXPECT_FALSE(f.grad_reduce_in_bf16);
  EXPECT_EQ(megart::compute_precision(f), megart::Precision::Fp32);
}

TEST(TrainFlags, ParsesMixedPrecisionFlags) {
  auto resolved = [](std::vector<std::string> extra) {
    std::vector<std::string> args = kMinimal;
    args.insert(args.end(), extra.begin(), extra.end());
    Parsed p = parse(args);
    EXPECT_FALSE(p.exit) << p.err;
    megart::ProgramDesc program{};
    program.micro_batch_size = 4;
    megart::resolve_train_flags(p.flags, program);
    return p.flags;
  };
  EXPECT_EQ(megart::compute_precision(resolved({"--bf16"})), megart::Precision::Bf16);
  const TrainFlags dynamic =
      resolved({"--fp16", "--initial-loss-scale", "65536", "--min-loss-scale", "2",
                "--loss-scale-window", "500", "--hysteresis", "4"});
  EXPECT_EQ(megart::compute_precision(dynamic), megart::Precision::Fp16);
  EXPECT_EQ(dynamic.initial_loss_scale, 65536.0);
  EXPECT_EQ(dynamic.min_loss_scale, 2.0);
  EXPECT_EQ(dynamic.loss_scale_window, 500);
  EXPECT_EQ(dynamic.hysteresis, 4);
  EXPECT_EQ(resolved({"--fp16", "--loss-scale", "1024"}).loss_scale, 1024.0);
  EXPECT_EQ(resolved({"--fp16", "--loss-scale", "0"}).loss_scale, 0.0); // 0: dynamic
  EXPECT_TRUE(resolved({"--bf16", "--grad-reduce-in-bf16"}).grad_reduce_in_bf16);
}

TEST(TrainFlags, CompiledPrecisionDecides) {
  auto resolve = [](const char *compiled, std::vector<std::string> extra) {
    std::vector<std::string> args = kMinimal;
    args.insert(args.end(), extra.begin(), extra.end());
    Parsed p = parse(args);
    megart::ProgramDesc program{};
    program.micro_batch_size = 4;
    program.compiled_precision = compiled;
    megart::resolve_train_flags(p.flags, program);
    return p.flags;
  };
  // No flag: the program's precision; the same flag: accepted.
  EXPECT_EQ(megart::compute_precision(resolve("bf16", {})), megart::Precision::Bf16);
  EXPECT_EQ(megart::compute_precision(resolve("fp16", {"--fp16"})), megart::Precision::Fp16);
  EXPECT_EQ(megart::compute_precision(resolve("fp32", {})), megart::Precision::Fp32);
  // A compiled fp16 program scales the loss as --fp16 does.
  EXPECT_EQ(resolve("fp16", {"--initial-loss-scale", "1024"}).initial_loss_scale, 1024.0);
  const std::pair<const char *, const char *> refused[] = {
      {"fp32", "--bf16"}, {"bf16", "--fp16"}, {"fp16", "--bf16"}};
  for (auto [compiled, flag] : refused) {
    try {
      resolve(compiled, {flag});
      ADD_FAILURE() << flag << " accepted by a program compiled for " << compiled;
    } catch (const megart::Error &e) {
      EXPECT_THAT(e.what(), HasSubstr(std::string(flag) + ": this program was compiled for " + compiled));
      EXPECT_THAT(e.what(), HasSubstr(std::string("recompile with `megac compile SPEC ") + flag));
    }
  }
}

TEST(TrainFlags, HelpListsMixedPrecisionFlags) {
  Parsed p = parse({"--help"});
  ASSERT_TRUE(p.exit);
  for (const char *flag : {"--bf16", "--fp16", "--loss-scale", "--initial-loss-scale",
                           "--min-loss-scale", "--loss-scale-window", "--hysteresis",
                           "--grad-reduce-in-bf16"})
    EXPECT_THAT(p.out, HasSubstr(flag));
}

TEST(TrainFlags, MixedPrecisionCombinationsNameTheFix) {
  EXPECT_EQ(resolve_error({"--bf16", "--fp16"}),
            "--bf16 and --fp16 are both given; choose one: --bf16 (trains without loss scaling) "
            "or --fp16 (with loss scaling)");
  EXPECT_EQ(resolve_error({"--loss-scale", "1024"}),
            "--loss-scale 1024 needs --fp16: fp32 trains without loss scaling; add --fp16 or "
            "drop --loss-scale");
  EXPECT_EQ(resolve_error({"--bf16", "--loss-scale", "1024"}),
            "--loss-scale 1024 needs --fp16: bf16 has fp32's exponent range and trains without "
            "loss scaling; add --fp16 or drop --loss-scale");
  EXPECT_EQ(resolve_error({"--initial-loss-scale", "65536"}),
            "--initial-loss-scale 65536 only applies to dynamic loss scaling, which needs --fp16; "
            "add --fp16 or drop --initial-loss-scale");
  EXPECT_EQ(resolve_error({"--bf16", "--hysteresis", "3"}),
            "--hysteresis 3 only applies to dynamic loss scaling, which needs --fp16; add --fp16 "
            "or drop --hysteresis");
  EXPECT_EQ(resolve_error({"--fp16", "--loss-scale", "1024", "--loss-scale-window", "100"}),
            "--loss-scale-window 100 only applies to dynamic loss scaling, but --loss-scale 1024 "
            "sets a static one; drop --loss-scale-window or --loss-scale");
  EXPECT_EQ(resolve_error({"--grad-reduce-in-bf16"}),
            "--grad-reduce-in-bf16 needs --bf16: fp32 training reduces its gradients in fp32; add "
            "--bf16 or drop the flag");
  EXPECT_EQ(resolve_error({"--fp16", "--grad-reduce-in-bf16"}),
            "--grad-reduce-in-bf16 needs --bf16: fp16 training reduces its gradients in fp32; add "
            "--bf16 or drop the flag");
}

TEST(TrainFlags, LossScaleValues) {
  EXPECT_EQ(resolve_error({"--fp16", "--loss-scale", "-1"}),
            "--loss-scale is -1; it must be > 0 (a static scale, e.g. 65536), or 0 for dynamic "
            "loss scaling");
  EXPECT_EQ(resolve_error({"--fp16", "--initial-loss-scale", "0"}),
            "--initial-loss-scale is 0; it must be > 0 (default 2^32)");
  EXPECT_EQ(resolve_error({"--fp16", "--min-loss-scale", "0"}),
            "--min-loss-scale is 0; it must be > 0 (default 1)");
  EXPECT_EQ(resolve_error({"--fp16", "--min-loss-scale", "1024", "--initial-loss-scale", "512"}),
            "--min-loss-scale (1024) is greater than --initial-loss-scale (512); lower it or "
            "raise --initial-loss-scale");
  EXPECT_EQ(resolve_error({"--fp16", "--loss-scale-window", "0"}),
            "--loss-scale-window is 0; it must be at least 1 (default 1000)");
  EXPECT_EQ(resolve_error({"--fp16", "--hysteresis", "0"}),
            "--hysteresis is 0; it must be at least 1 (default 2)");
  EXPECT_EQ(resolve_error({"--fp16", "--min-loss-scale", "1024", "--initial-loss-scale", "1024"}),
            "");
}

TEST(TrainFlags, OverlapGradReduceIsCompiledIn) {
  // Megatron users pass it to training; here the program decides, and says how to get it.
  EXPECT_THAT(resolve_error({"--overlap-grad-reduce"}),
              HasSubstr("the overlap is compiled in: recompile with `megac compile ... --overlap-grad-reduce`"));
  Parsed p = parse({"--data-path", "d", "--train-iters", "1", "--lr", "1", "--overlap-grad-reduce"});
  ASSERT_FALSE(p.exit) << p.err;
  megart::ProgramDesc program{};
  program.micro_batch_size = 1;
  program.overlap_grad_reduce = true;
  EXPECT_NO_THROW(megart::resolve_train_flags(p.flags, program));
}
