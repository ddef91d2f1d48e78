#include "megart/train_flags.h"

#include "megart/error.h"
#include "megart/optimizer.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace megart {

namespace {

// Shortest text that reads back as the same double (1e-4 stays "0.0001", not "0.000100").
std::string num(double x) {
  std::ostringstream s;
  s.precision(17);
  s << x;
  double back = 0;
  for (int p = 1; p <= 17; ++p) {
    std::ostringstream t;
    t.precision(p);
    t << x;
    std::istringstream(t.str()) >> back;
    if (back == x)
      return t.str();
  }
  return s.str();
}

// CLI11 clamps a whole number past int64's range and reads "nan" and "inf" as numbers; these
// check the text first, so a value that is not what it says never gets in.
const CLI::Validator kWholeNumber(
    [](std::string &text) -> std::string {
      int64_t value = 0;
      const char *end = text.data() + text.size();
      const auto [stop, ec] = std::from_chars(text.data(), end, value);
      if (ec == std::errc::result_out_of_range)
        return "value " + text + " is out of range (at most 9223372036854775807)";
      if (ec != std::errc() || stop != end)
        return "value " + text + " is not a whole number";
      return "";
    },
    "INT");
const CLI::Validator kFiniteNumber(
    [](std::string &text) -> std::string {
      char *stop = nullptr;
      errno = 0;
      const double value = std::strtod(text.c_str(), &stop);
      if (text.empty() || stop != text.c_str() + text.size())
        return "value " + text + " is not a number";
      if (!std::isfinite(value) || (errno == ERANGE && std::abs(value) > 1))
        return "value " + text + " is not a finite number";
      return "";
    },
    "NUMBER");

void require(bool ok, const std::string &message) {
  if (!ok)
    throw Error(message);
}

// --bf16 / --fp16 and loss scaling: every flag that would do nothing is refused, saying why.
void resolve_precision_flags(const TrainFlags &f) {
  require(!(f.bf16 && f.fp16), "--bf16 and --fp16 are both given; choose one: --bf16 (trains "
                               "without loss scaling) or --fp16 (with loss scaling)");
  require(!f.grad_reduce_in_bf16 || f.bf16,
          std::string("--grad-reduce-in-bf16 needs --bf16: ") +
              (f.fp16 ? "fp16" : "fp32") +
              " training reduces its gradients in fp32; add --bf16 or drop the flag");
  require(std::isfinite(f.loss_scale) && f.loss_scale >= 0,
          "--loss-scale is " + num(f.loss_scale) +
              "; it must be > 0 (a static scale, e.g. 65536), or 0 for dynamic loss scaling");
  if (f.loss_scale > 0 && !f.fp16)
    throw Error("--loss-scale " + num(f.loss_scale) + " needs --fp16: " +
                (f.bf16 ? "bf16 has fp32's exponent range and trains without loss scaling"
                        : "fp32 trains without loss scaling") +
                "; add --fp16 or drop --loss-scale");
  auto value = [&](const std::string &flag) {
    if (flag == "--initial-loss-scale") return num(f.initial_loss_scale);
    if (flag == "--min-loss-scale") return num(f.min_loss_scale);
    if (flag == "--loss-scale-window") return std::to_string(f.loss_scale_window);
    return std::to_string(f.hysteresis);
  };
  for (const std::string &flag : f.dynamic_scale_flags_given) {
    if (!f.fp16)
      throw Error(flag + " " + value(flag) + " only applies to dynamic loss scaling, which " +
                  "needs --fp16; add --fp16 or drop " + flag);
    if (f.loss_scale > 0)
      throw Error(flag + " " + value(flag) +
                  " only applies to dynamic loss scaling, but --loss-scale " + num(f.loss_scale) +
                  " sets a static one; drop " + flag + " or --loss-scale");
  }
  require(std::isfinite(f.initial_loss_scale) && f.initial_loss_scale > 0,
          "--initial-loss-scale is " + num(f.initial_loss_scale) +
              "; it must be > 0 (default 2^32)");
  require(std::isfinite(f.min_loss_scale) && f.min_loss_scale > 0,
          "--min-loss-scale is " + num(f.min_loss_scale) + "; it must be > 0 (default 1)");
  require(f.min_loss_scale <= f.initial_loss_scale,
          "--min-loss-scale (" + num(f.min_loss_scale) + ") is greater than " +
              "--initial-loss-scale (" + num(f.initial_loss_scale) +
              "); lower it or raise --initial-loss-scale");
  require(f.loss_scale_window >= 1, "--loss-scale-window is " +
                                        std::to_string(f.loss_scale_window) +
                                        "; it must be at least 1 (default 1000)");
  require(f.hysteresis >= 1,
          "--hysteresis is " + std::to_string(f.hysteresis) +
              "; it must be at least 1 (default 2)");
}

} // namespace

std::optional<int> parse_train_flags(int argc, const char *const *argv, TrainFlags &f,
                                     std::ostream &out, std::ostream &err) {
  CLI::App app{"Trains the compiled model (megart runtime). Flags follow Megatron-LM."};
  // As with Megatron's argparse, a repeated flag takes its last value (scripts append overrides).
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.set_help_flag("-h,--help", "Print this help and exit");
  // --rank-layout only prints the grid and --skip-train only evaluates: they run without the
  // training flags.
  const bool layout_only = std::any_of(argv + std::min(argc, 1), argv + argc, [](const char *a) {
    return std::strcmp(a, "--rank-layout") == 0;
  });
  const bool eval_only = std::any_of(argv + std::min(argc, 1), argv + argc, [](const char *a) {
    return std::strcmp(a, "--skip-train") == 0;
  });
  // A blend's values follow the flag (--data-path 0.3 A 0.7 B); a repeated flag adds to it.
  const auto blend_option = [&](const char *name, std::vector<std::string> &into, const char *help) {
    return app.add_option(name, into, help)->expected(1, 1 << 20)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  };
  CLI::Option *data_path = blend_option("--data-path", f.data_path,
                                        "Dataset prefix (PREFIX.bin + PREFIX.idx), or a blend: W1 PREFIX1 W2 PREFIX2 ...");
  CLI::Option *train_data_path =
      blend_option("--train-data-path", f.train_data_path, "The training blend, instead of --data-path's split");
  blend_option("--valid-data-path", f.valid_data_path, "The validation blend, instead of --data-path's split")
      ->needs(train_data_path);
  blend_option("--test-data-path", f.test_data_path, "The test blend, instead of --data-path's split")
      ->needs(train_data_path);
  data_path->excludes(train_data_path);
  const bool split_paths = std::any_of(argv + std::min(argc, 1), argv + argc, [](const char *a) {
    return std::strncmp(a, "--train-data-path", 17) == 0;
  });
  data_path->required(!layout_only && !split_paths);
  app.add_option("--split", f.split, "Train, valid and test fractions of each dataset's documents, e.g. 949,50,1")
      ->needs(data_path);
  app.add_option("--train-iters", f.train_iters, "Number of training iterations")
      ->required(!layout_only && !eval_only);
  app.add_option("--micro-batch-size", f.micro_batch_size,
                 "Samples per microbatch; must equal the compiled one (default: compiled)")
      ->check(CLI::PositiveNumber);
  app.add_option("--global-batch-size", f.global_batch_size,
                 "Samples per iteration, a multiple of micro batch x data parallel size "
                 "(default: that product)")
      ->check(CLI::PositiveNumber);
  app.add_option("--lr", f.lr, "Peak learning rate")->required(!layout_only && !eval_only);
  app.add_option("--min-lr", f.min_lr, "Learning rate at the end of decay")->capture_default_str();
  app.add_option("--lr-decay-style", f.lr_decay_style, "How the lr falls from --lr to --min-lr after warmup")
      ->check(CLI::IsMember({"constant", "linear", "cosine", "inverse-square-root", "WSD"}))
      ->capture_default_str();
  app.add_option("--lr-warmup-iters", f.lr_warmup_iters, "Linear warmup iterations")
      ->capture_default_str();
  app.add_option("--lr-warmup-fraction", f.lr_warmup_fraction,
                 "Linear warmup as a fraction of --lr-decay-iters (instead of --lr-warmup-iters)");
  app.add_option("--lr-warmup-init", f.lr_warmup_init, "The lr warmup starts from")->capture_default_str();
  app.add_option("--lr-wsd-decay-style", f.lr_wsd_decay_style, "WSD: how the lr anneals at the end")
      ->check(CLI::IsMember({"linear", "cosine", "exponential"}))
      ->capture_default_str();
  app.add_option("--lr-wsd-decay-iters", f.lr_wsd_decay_iters,
                 "WSD: the iterations of the anneal, the last of --lr-decay-iters")
      ->check(CLI::PositiveNumber);
  app.add_option("--lr-decay-iters", f.lr_decay_iters, "Decay iterations (default: --train-iters)")
      ->check(CLI::PositiveNumber);
  app.add_option("--weight-decay", f.weight_decay, "AdamW weight decay (not on biases/norms)")
      ->capture_default_str();
  app.add_option("--adam-beta1", f.adam_beta1, "AdamW beta1")->capture_default_str();
  app.add_option("--adam-beta2", f.adam_beta2, "AdamW beta2")->capture_default_str();
  app.add_option("--adam-eps", f.adam_eps, "AdamW epsilon")->capture_default_str();
  app.add_option("--clip-grad", f.clip_grad, "Global gradient-norm clip; 0 disables")
      ->capture_default_str();
  CLI::Option *seed = app.add_option("--seed", f.seed, "Seed for initialisation and data shuffling")
                          ->capture_default_str();
  bool no_shuffle = false;
  app.add_flag("--no-shuffle", no_shuffle, "Use samples in dataset order");
  app.add_option("--load", f.load,
                 "Resume from a checkpoint folder (--save of an earlier run: its latest "
                 "iteration), or start from weights: a .safetensors file, a sharded "
                 "*.index.json, or a Hugging Face model folder");
  app.add_option("--ckpt-step", f.ckpt_step,
                 "Resume from this iteration of the --load folder instead of its latest")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--pretrained-checkpoint", f.pretrained_checkpoint,
                 "A LoRA program's frozen base model: a Hugging Face folder, .safetensors file or "
                 "*.index.json (default: --load's weights, or the base a LoRA checkpoint names)");
  app.add_option("--merge-lora", f.merge_lora,
                 "LoRA: after the last iteration, merge the adapters into the base model and write it "
                 "to this new folder as a Hugging Face model (needs --save); for an existing checkpoint "
                 "use OUT/train merge-lora --load CKPT --save DIR");
  app.add_flag("--finetune", f.finetune,
               "Take only the weights of the --load checkpoint: iteration, optimizer, lr "
               "schedule and data start over");
  app.add_flag("--no-load-optim", f.no_load_optim,
               "Resume without the optimizer state: AdamW moments, lr schedule and loss scale "
               "start over");
  app.add_flag("--override-opt_param-scheduler", f.override_opt_param_scheduler,
               "Resume with this run's --lr / --min-lr / --lr-decay-style / --lr-warmup-iters / "
               "--lr-decay-iters / --weight-decay where they differ from the checkpoint's");
  app.add_flag("--no-load-rng", f.no_load_rng,
               "Resume with this run's --seed / --no-shuffle data order instead of the checkpoint's");
  app.add_option("--save", f.save,
                 "Checkpoint folder: DIR/iter_NNNNNNN/ (weights, optimizer, training state)");
  app.add_option("--save-interval", f.save_interval,
                 "Save every K iterations; 0 = only at the end")
      ->capture_default_str();
  app.add_option("--keep-latest-k", f.keep_latest_k,
                 "Keep only the newest K checkpoints in --save; 0 keeps all")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--exit-interval", f.exit_interval,
                 "Save (with --save) and exit after the iteration that is a multiple of this")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--exit-duration-in-mins", f.exit_duration_in_mins,
                 "Save (with --save) and exit after training this many minutes");
  app.add_flag("--exit-signal-handler", f.exit_signal_handler,
               "On SIGTERM, finish the iteration, save (with --save) and exit 0");
  app.add_flag("--overwrite-checkpoints", f.overwrite_checkpoints,
               "Allow --save to hold checkpoints newer than this run's start (they are replaced "
               "as the run reaches them)");
  app.add_option("--log-interval", f.log_interval, "Print the log line every K iterations")
      ->capture_default_str();
  app.add_option("--eval-interval", f.eval_interval,
                 "Iterations between evaluations on the validation data (and one at the end)")
      ->capture_default_str();
  app.add_option("--eval-iters", f.eval_iters,
                 "Global batches of validation (and test) data per evaluation; 0: none")
      ->capture_default_str();
  app.add_flag("--skip-train", f.skip_train,
               "Evaluate the loaded weights on the validation and test data (without --split: all of "
               "--data-path), and train nothing; --train-iters and --lr are then not needed");
  app.add_option("--metrics-file", f.metrics_file, "JSONL file: one object per iteration");
  app.add_option("--tensorboard-dir", f.tensorboard_dir,
                 "Write TensorBoard event files here (lm loss, learning-rate, grad-norm, throughput, ...)");
  app.add_option("--tensorboard-log-interval", f.tensorboard_log_interval,
                 "Iterations between TensorBoard records")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  CLI::Option *bucket = app.add_option("--ddp-bucket-size", f.ddp_bucket_size,
                                       "Elements per data-parallel gradient all-reduce (programs from "
                                       "megac compile have it compiled in)")
                            ->check(CLI::PositiveNumber)
                            ->capture_default_str();
  app.add_option("--distributed-timeout-minutes", f.distributed_timeout_minutes,
                 "Minutes a rank waits for the others in one communication before it stops the "
                 "job with an error naming the operation (decimals allowed)")
      ->capture_default_str();
  app.add_option("--peak-tflops", f.peak_tflops,
                 "Peak TFLOP/s of one device for the MFU figure (default: computed from the "
                 "device's SM count and clock; the CPU has none)")
      ->capture_default_str();
  app.add_flag("--bf16", f.bf16,
               "bf16 training: the program must be compiled so (megac compile --bf16), which it then "
               "runs in without the flag; weights, their gradients and the optimizer stay fp32");
  app.add_flag("--fp16", f.fp16,
               "fp16 training with loss scaling: the program must be compiled so (megac compile "
               "--fp16)");
  app.add_option("--loss-scale", f.loss_scale,
                 "Static loss scale with --fp16 (a power of 2 is exact); 0 or absent: dynamic")
      ->capture_default_str();
  // Only the dynamic scaler reads these; resolve_train_flags rejects them where it does not run.
  const std::vector<std::pair<const char *, CLI::Option *>> dynamic = {
      {"--initial-loss-scale",
       app.add_option("--initial-loss-scale", f.initial_loss_scale,
                      "Dynamic loss scaling (--fp16): the starting scale")
           ->capture_default_str()},
      {"--min-loss-scale",
       app.add_option("--min-loss-scale", f.min_loss_scale,
                      "Dynamic loss scaling: the scale never backs off below it")
           ->capture_default_str()},
      {"--loss-scale-window",
       app.add_option("--loss-scale-window", f.loss_scale_window,
                      "Dynamic loss scaling: finite iterations in a row before the scale doubles")
           ->capture_default_str()},
      {"--hysteresis", app.add_option("--hysteresis", f.hysteresis,
                                      "Dynamic loss scaling: non-finite iterations (since the last "
                                      "growth) before the scale halves")
                           ->capture_default_str()},
  };
  app.add_flag("--grad-reduce-in-bf16", f.grad_reduce_in_bf16,
               "With --bf16: sum the gradients over the data-parallel ranks in bf16 (half the "
               "bytes; default fp32)");
  app.add_flag("--overlap-grad-reduce", f.overlap_grad_reduce,
               "Accepted when the program was compiled with `megac compile --overlap-grad-reduce` "
               "(the overlap is compiled in)");
  app.add_flag("--rank-layout", f.rank_layout,
               "Print the global rank -> (pp, dp, tp) table of the compiled plan and exit");
  for (const char *name : {"--train-iters", "--micro-batch-size", "--global-batch-size",
                           "--lr-warmup-iters", "--lr-decay-iters", "--seed", "--ckpt-step",
                           "--save-interval", "--keep-latest-k", "--exit-interval", "--log-interval",
                           "--eval-interval", "--eval-iters",
                           "--ddp-bucket-size", "--loss-scale-window", "--hysteresis"})
    app.get_option(name)->check(kWholeNumber);
  for (const char *name : {"--lr", "--min-lr", "--weight-decay", "--adam-beta1", "--adam-beta2",
                           "--adam-eps", "--clip-grad", "--exit-duration-in-mins",
                           "--distributed-timeout-minutes", "--peak-tflops", "--loss-scale",
                           "--initial-loss-scale", "--min-loss-scale"})
    app.get_option(name)->check(kFiniteNumber);
  try {
    app.parse(argc, argv);
    f.ddp_bucket_size_given = bucket->count() > 0;
    f.seed_given = seed->count() > 0;
    for (const auto &[name, option] : dynamic)
      if (option->count() > 0)
        f.dynamic_scale_flags_given.push_back(name);
  } catch (const CLI::CallForHelp &e) {
    return app.exit(e, out, err);
  } catch (const CLI::ParseError &e) {
    err << ("error: " + std::string(e.what()) + "\nRun with --help to list the flags.\n") << std::flush;
    return 1;
  }
  f.shuffle = !no_shuffle;
  return std::nullopt;
}

// A compiled program runs in the precision it was compiled for: its activation buffers are
// that wide.
static void apply_compiled_precision(TrainFlags &f, const ProgramDesc &program) {
  if (!program.compiled_precision || (f.bf16 && f.fp16)) // both: resolve_precision_flags says so
    return;
  const std::string compiled = program.compiled_precision;
  const std::string asked = f.bf16 ? "bf16" : f.fp16 ? "fp16" : "";
  if (!asked.empty() && asked != compiled)
    throw Error("--" + asked + ": this program was compiled for " + compiled +
                (compiled == "fp32" ? "" : " (megac compile --" + compiled + ")") +
                "; recompile with `megac compile SPEC --" + asked + " ...` or drop --" + asked);
  f.bf16 = compiled == "bf16";
  f.fp16 = compiled == "fp16";
}

void resolve_train_flags(TrainFlags &f, const ProgramDesc &program) {
  const std::string b = std::to_string(program.micro_batch_size);
  const bool lora = program.stages && program.stages[0].num_frozen_params > 0;
  if (!f.merge_lora.empty() && (!lora || f.save.empty() || f.skip_train))
    throw Error("--merge-lora " + f.merge_lora + " merges a LoRA run's final adapters, saved at the end: " +
                (!lora ? std::string("this program trains every parameter (nothing to merge)")
                       : f.skip_train ? std::string("--skip-train trains nothing; merge a checkpoint with "
                                                    "OUT/train merge-lora --load CKPT --save DIR")
                                      : std::string("give --save DIR too")));
  if (!f.pretrained_checkpoint.empty() && !lora)
    throw Error("--pretrained-checkpoint " + f.pretrained_checkpoint + " gives a LoRA program's frozen base model, "
                "but this program trains every parameter: load its weights with --load (or compile with "
                "megac compile --lora-rank R)");
  apply_compiled_precision(f, program);
  if (!f.metrics_file.empty()) { // found now, not when the first line or the last save fails
    std::error_code ec;
    namespace fs = std::filesystem;
    if (fs::is_directory(f.metrics_file, ec))
      throw Error("--metrics-file " + f.metrics_file + " is a folder; give a file, e.g. --metrics-file " +
                  (fs::path(f.metrics_file) / "metrics.jsonl").string());
    if (!f.save.empty() && fs::weakly_canonical(f.metrics_file, ec) == fs::weakly_canonical(f.save, ec))
      throw Error("--metrics-file and --save both name " + f.save +
                  ": the metrics are one file, the checkpoints a folder; give e.g. --metrics-file " +
                  f.save + ".jsonl");
  }
  require(f.train_iters >= (f.skip_train ? 0 : 1),
          "--train-iters is " + std::to_string(f.train_iters) + "; it must be at least " + (f.skip_train ? "0" : "1"));
  if (f.micro_batch_size == 0) {
    f.micro_batch_size = program.micro_batch_size;
  } else if (f.micro_batch_size != program.micro_batch_size) {
    throw Error("--micro-batch-size " + std::to_string(f.micro_batch_size) +
                " does not match the compiled program (" + b +
                "): recompile with `megac compile SPEC --micro-batch-size " +
                std::to_string(f.micro_batch_size) + "`");
  }
  // A pipeline schedule is compiled for its number of microbatches: the batch is fixed.
  if (program.pipeline_parallel_size > 1) {
    const int64_t fixed = f.micro_batch_size * std::max<int64_t>(program.data_parallel_size, 1) *
                          program.num_microbatches;
    if (f.global_batch_size == 0)
      f.global_batch_size = fixed;
    else if (f.global_batch_size != fixed)
      throw Error("--global-batch-size " + std::to_string(f.global_batch_size) +
                  " does not match the compiled pipeline schedule: micro batch " + b + " x dp " +
                  std::to_string(program.data_parallel_size) + " x " +
                  std::to_string(program.num_microbatches) + " microbatches = " +
                  std::to_string(fixed) + "; recompile with `megac compile ... --global-batch-size " +
                  std::to_string(f.global_batch_size) + "` (or leave the flag out)");
  }
  // Megatron's default: one microbatch per data-parallel rank.
  if (f.global_batch_size == 0)
    f.global_batch_size = f.micro_batch_size * std::max<int64_t>(program.data_parallel_size, 1);
  require(f.global_batch_size >= 1, "--global-batch-size is " +
                                        std::to_string(f.global_batch_size) +
                                        "; it must be at least 1");
  const int64_t dp = program.data_parallel_size;
  if (dp <= 1 && f.global_batch_size % f.micro_batch_size != 0)
    throw Error("--global-batch-size (" + std::to_string(f.global_batch_size) +
                ") is not a multiple of the micro batch size (" + b + "); use a multiple of " +
                b + ", e.g. " +
                std::to_string((f.global_batch_size / f.micro_batch_size + 1) * f.micro_batch_size));
  // Each dp rank takes B / dp samples as whole microbatches.
  const int64_t unit = f.micro_batch_size * dp;
  if (dp > 1 && f.global_batch_size % unit != 0)
    throw Error("--global-batch-size (" + std::to_string(f.global_batch_size) +
                ") is not divisible by micro batch (" + b + ") x data parallel size (" +
                std::to_string(dp) + "); use a multiple of " + std::to_string(unit) + ", e.g. " +
                std::to_string((f.global_batch_size / unit + 1) * unit));
  require(f.ddp_bucket_size >= 1, "--ddp-bucket-size is " + std::to_string(f.ddp_bucket_size) +
                                      "; it must be at least 1 element");
  bool compiled_buckets = false;
  if (program.stages)
    for (int64_t i = 0; i < program.pipeline_parallel_size; ++i)
      compiled_buckets = compiled_buckets || program.stages[i].sync_gradients != nullptr;
  require(!(f.ddp_bucket_size_given && compiled_buckets),
          "--ddp-bucket-size is compiled into this program: its gradient buckets come from `megac compile "
          "--ddp-bucket-size N`; recompile to change them");
  require(!f.overlap_grad_reduce || program.overlap_grad_reduce,
          "--overlap-grad-reduce: this program sums its data-parallel gradients after backward; the overlap "
          "is compiled in: recompile with `megac compile ... --overlap-grad-reduce`, or drop the flag");
  require(std::isfinite(f.distributed_timeout_minutes) && f.distributed_timeout_minutes > 0,
          "--distributed-timeout-minutes is " + num(f.distributed_timeout_minutes) +
              "; it must be > 0 (minutes a rank waits for the others, e.g. 10, or 0.5)");
  require(std::isfinite(f.peak_tflops) && f.peak_tflops >= 0,
          "--peak-tflops is " + num(f.peak_tflops) + "; it must be >= 0 (0: the device's own figure)");
  // Evaluation alone steps nothing: the schedule flags a script may pass are set aside.
  const bool schedule_runs = !f.skip_train;
  if (!schedule_runs) {
    f.lr = f.min_lr = f.lr_warmup_init = 0;
    f.lr_warmup_iters = f.lr_wsd_decay_iters = 0;
    f.lr_warmup_fraction = -1;
    f.lr_decay_style = "constant";
  }
  if (schedule_runs)
    require(std::isfinite(f.lr) && f.lr > 0, "--lr is " + num(f.lr) + "; it must be > 0");
  require(std::isfinite(f.min_lr) && f.min_lr >= 0 && f.min_lr <= f.lr,
          "--min-lr is " + num(f.min_lr) + "; it must be between 0 and --lr (" + num(f.lr) + ")");
  require(f.lr_warmup_iters >= 0,
          "--lr-warmup-iters is " + std::to_string(f.lr_warmup_iters) + "; it must be >= 0");
  if (f.lr_decay_iters == 0)
    f.lr_decay_iters = f.train_iters;
  require(f.lr_decay_iters >= 1 || !schedule_runs,
          "--lr-decay-iters is " + std::to_string(f.lr_decay_iters) + "; it must be >= 1");
  if (f.lr_decay_style != "constant" && f.lr_warmup_iters > f.lr_decay_iters)
    throw Error("--lr-warmup-iters (" + std::to_string(f.lr_warmup_iters) +
                ") is greater than --lr-decay-iters (" + std::to_string(f.lr_decay_iters) +
                "); warmup must end before decay does");
  if (f.lr_warmup_fraction >= 0 || !std::isfinite(f.lr_warmup_fraction)) {
    require(std::isfinite(f.lr_warmup_fraction) && f.lr_warmup_fraction < 1,
            "--lr-warmup-fraction is " + num(f.lr_warmup_fraction) + "; it must be in [0, 1) (of --lr-decay-iters)");
    require(f.lr_warmup_iters == 0, "--lr-warmup-fraction and --lr-warmup-iters are both given; give one "
                                    "(Megatron takes one of them)");
  } else {
    require(f.lr_warmup_fraction == -1, "--lr-warmup-fraction is " + num(f.lr_warmup_fraction) +
                                            "; it must be in [0, 1) (of --lr-decay-iters)");
  }
  require(std::isfinite(f.lr_warmup_init) && f.lr_warmup_init >= 0 && f.lr_warmup_init <= f.lr,
          "--lr-warmup-init is " + num(f.lr_warmup_init) + "; it must be between 0 and --lr (" + num(f.lr) + ")");
  if (f.lr_decay_style == "WSD")
    require(f.lr_wsd_decay_iters >= 1 && f.lr_wsd_decay_iters <= f.lr_decay_iters,
            "--lr-decay-style WSD needs --lr-wsd-decay-iters between 1 and --lr-decay-iters (" +
                std::to_string(f.lr_decay_iters) + "), got " + std::to_string(f.lr_wsd_decay_iters) +
                ": the anneal is the last of the decay's iterations");
  else
    require(f.lr_wsd_decay_iters == 0, "--lr-wsd-decay-iters is for --lr-decay-style WSD (this run has " +
                                           f.lr_decay_style + "); drop it or use WSD");
  require(std::isfinite(f.weight_decay) && f.weight_decay >= 0,
          "--weight-decay is " + num(f.weight_decay) + "; it must be >= 0");
  require(f.adam_beta1 >= 0 && f.adam_beta1 < 1,
          "--adam-beta1 is " + num(f.adam_beta1) + "; it must be in [0, 1)");
  require(f.adam_beta2 >= 0 && f.adam_beta2 < 1,
          "--adam-beta2 is " + num(f.adam_beta2) + "; it must be in [0, 1)");
  require(std::isfinite(f.adam_eps) && f.adam_eps > 0,
          "--adam-eps is " + num(f.adam_eps) + "; it must be > 0");
  require(std::isfinite(f.clip_grad) && f.clip_grad >= 0,
          "--clip-grad is " + num(f.clip_grad) + "; it must be >= 0 (0 disables clipping)");
  require(f.seed >= 0, "--seed is " + std::to_string(f.seed) + "; it must be >= 0");
  require(f.log_interval >= 1,
          "--log-interval is " + std::to_string(f.log_interval) + "; it must be at least 1");
  require(f.eval_interval >= 1,
          "--eval-interval is " + std::to_string(f.eval_interval) + "; it must be at least 1");
  require(f.eval_iters >= 0, "--eval-iters is " + std::to_string(f.eval_iters) + "; it must be >= 0");
  require(!f.skip_train || f.eval_iters > 0, "--skip-train evaluates, but --eval-iters is 0; give --eval-iters N");
  require(f.save_interval >= 0,
          "--save-interval is " + std::to_string(f.save_interval) + "; it must be >= 0");
  if (f.save_interval > 0 && f.save.empty())
    throw Error("--save-interval " + std::to_string(f.save_interval) +
                " needs --save DIR to say where checkpoints go");
  for (const auto &[given, flag] : {std::pair{f.ckpt_step >= 0, "--ckpt-step"},
                                    std::pair{f.finetune, "--finetune"},
                                    std::pair{f.no_load_optim, "--no-load-optim"},
                                    std::pair{f.no_load_rng, "--no-load-rng"},
                                    std::pair{f.override_opt_param_scheduler,
                                              "--override-opt_param-scheduler"}})
    if (given && f.load.empty())
      throw Error(std::string(flag) + " says how to load a checkpoint, but no --load is given; "
                  "add --load DIR or drop " + flag);
  if (f.keep_latest_k > 0 && f.save.empty())
    throw Error("--keep-latest-k " + std::to_string(f.keep_latest_k) +
                " needs --save DIR to say which checkpoints to keep");
  if (f.overwrite_checkpoints && f.save.empty())
    throw Error("--overwrite-checkpoints needs --save DIR");
  require(std::isfinite(f.exit_duration_in_mins) && f.exit_duration_in_mins >= 0,
          "--exit-duration-in-mins is " + num(f.exit_duration_in_mins) +
              "; it must be >= 0 (0: no limit)");
  resolve_precision_flags(f);
  // The schedule's own checks (same rules; keeps the two from drifting apart).
  lr_schedule(f).validate();
}

LrSchedule lr_schedule(const TrainFlags &f) {
  LrSchedule s{f.lr_decay_style, f.lr, f.min_lr, f.lr_warmup_iters, f.lr_decay_iters};
  s.warmup_fraction = f.lr_warmup_fraction;
  s.init_lr = f.lr_warmup_init;
  s.wsd_style = f.lr_wsd_decay_style;
  s.wsd_decay_iters = f.lr_wsd_decay_iters;
  s.samples_per_iteration = std::max<int64_t>(f.global_batch_size, 1);
  return s;
}

} // namespace megart
