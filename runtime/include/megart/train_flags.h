// The training program's command line: Megatron-LM flag names and defaults, parsed with CLI11,
// then checked against the compiled program before anything runs.
#pragma once

#include "megart/device.h"
#include "megart/optimizer.h"
#include "megart/program.h"

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace megart {

struct TrainFlags {
  // --data-path PREFIX (PREFIX.bin + PREFIX.idx), or a blend: W1 PREFIX1 W2 PREFIX2 ... (or
  // prefixes alone, weighted by size); --split cuts each dataset's documents into train, valid
  // and test. --train-data-path / --valid-data-path / --test-data-path: a blend per split instead.
  std::vector<std::string> data_path;
  std::string split;                // "949,50,1"; empty: every document trains
  std::vector<std::string> train_data_path, valid_data_path, test_data_path;
  int64_t train_iters = 0;          // --train-iters
  int64_t micro_batch_size = 0;     // --micro-batch-size; 0 = not given: the compiled one
  int64_t global_batch_size = 0;    // --global-batch-size; 0 = not given: micro batch x dp
                                    // (x the compiled microbatches with pipeline parallelism)
  double lr = 0;                    // --lr (required, as in Megatron)
  double min_lr = 0;                // --min-lr
  std::string lr_decay_style = "linear";
  int64_t lr_warmup_iters = 0;
  int64_t lr_decay_iters = 0;       // 0 = not given: --train-iters
  double lr_warmup_fraction = -1;   // --lr-warmup-fraction (of the decay); < 0 = not given
  double lr_warmup_init = 0;        // --lr-warmup-init: the lr warmup starts from
  std::string lr_wsd_decay_style = "exponential"; // --lr-wsd-decay-style (WSD's anneal)
  int64_t lr_wsd_decay_iters = 0;   // --lr-wsd-decay-iters (WSD: required)
  double weight_decay = 0.01;
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double adam_eps = 1e-8;
  double clip_grad = 1.0;           // 0 = no clipping
  int64_t seed = 1234;
  bool shuffle = true;              // false with --no-shuffle
  bool seed_given = false;          // --seed on the command line (a resume checks it)
  // --load: a checkpoint folder resumes the whole state; a .safetensors file, a sharded
  // *.index.json or a Hugging Face folder gives the initial weights of a new run.
  std::string load;
  int64_t ckpt_step = -1;           // --ckpt-step N: resume from iter_N instead of the latest
  // --pretrained-checkpoint: a LoRA program's frozen base model (a Hugging Face folder or
  // weights file); default: --load's weights, or the base a LoRA checkpoint names.
  std::string pretrained_checkpoint;
  // --merge-lora DIR: a LoRA run's final adapters merged into its base model, written to DIR as a
  // Hugging Face folder after the last iteration (needs --save; megart/lora_merge.h).
  std::string merge_lora;
  bool finetune = false;            // --finetune: weights only; iteration, optimizer, data restart
  bool no_load_optim = false;       // --no-load-optim: moments, lr schedule and loss scaler restart
  bool no_load_rng = false;         // --no-load-rng: the data order from this run's --seed
  // --override-opt_param-scheduler: a resumed run takes this run's lr / weight-decay schedule
  // instead of refusing one that differs from the checkpoint's (Megatron's flag).
  bool override_opt_param_scheduler = false;
  std::string save;                 // --save DIR
  int64_t save_interval = 0;        // 0 = save only at the end (when --save is given)
  int64_t keep_latest_k = 0;        // --keep-latest-k K: keep the newest K checkpoints; 0 = all
  bool overwrite_checkpoints = false; // --overwrite-checkpoints: --save may hold newer ones
  // Stopping early, saving first (Megatron's): after an iteration divisible by
  // --exit-interval, after --exit-duration-in-mins of training, or at the end of the iteration
  // during which SIGTERM arrived (--exit-signal-handler; Slurm sends it before a time limit).
  int64_t exit_interval = 0;
  double exit_duration_in_mins = 0;
  bool exit_signal_handler = false;
  int64_t log_interval = 1;
  // Validation (when there is validation data: --split's second share or --valid-data-path):
  // every --eval-interval iterations and at the end, --eval-iters batches of the global batch,
  // forward only; the test data once at the end. --skip-train: only evaluate (with --load).
  int64_t eval_interval = 1000;
  int64_t eval_iters = 100;
  bool skip_train = false;
  std::string metrics_file;         // --metrics-file FILE.jsonl
  std::string tensorboard_dir;      // --tensorboard-dir DIR: event files for TensorBoard
  int64_t tensorboard_log_interval = 1;
  int64_t ddp_bucket_size = 40'000'000; // --ddp-bucket-size: elements per dp all-reduce
  bool ddp_bucket_size_given = false;   // given on the command line (not the default)
  bool overlap_grad_reduce = false;     // --overlap-grad-reduce: compiled in; checked against it
  double distributed_timeout_minutes = 10; // how long a rank waits for the others, then stops
  double peak_tflops = 0;           // --peak-tflops: one GPU's peak for MFU; 0 = the device's
  bool rank_layout = false;         // --rank-layout: print the rank -> (pp, dp, tp) table, exit
  // Mixed precision (Megatron's names and defaults). Weights, gradients and the optimizer stay
  // fp32; --bf16 / --fp16 set the GEMM input precision. fp16 also scales the loss.
  bool bf16 = false;
  bool fp16 = false;
  double loss_scale = 0;            // --loss-scale: a static scale (fp16); 0 = dynamic
  double initial_loss_scale = 4294967296.0; // 2^32, the dynamic scale's start
  double min_loss_scale = 1;
  int64_t loss_scale_window = 1000; // finite iterations before the dynamic scale doubles
  int64_t hysteresis = 2;           // non-finite iterations before it halves
  bool grad_reduce_in_bf16 = false; // --bf16 only: the dp gradient sum in bf16 (GradSync)
  // The dynamic-scaler flags given on the command line (not defaults), to reject them when they
  // would do nothing.
  std::vector<std::string> dynamic_scale_flags_given;
};

// The lr schedule the flags give (Megatron's OptimizerParamScheduler arguments).
LrSchedule lr_schedule(const TrainFlags &f);

// fp32 unless --bf16 or --fp16.
inline Precision compute_precision(const TrainFlags &f) {
  return f.bf16 ? Precision::Bf16 : f.fp16 ? Precision::Fp16 : Precision::Fp32;
}

// Parses argv. Returns std::nullopt when training should go on. Otherwise the process should
// exit with the returned code: 0 after --help (usage printed to `out`), 1 after a parse error
// (unknown flag, missing required flag, bad number; "error: ..." printed to `err`). With
// --rank-layout no other flag is required.
std::optional<int> parse_train_flags(int argc, const char *const *argv, TrainFlags &flags,
                                     std::ostream &out, std::ostream &err);

// Fills the defaults that depend on other values (micro batch from the program, global batch,
// lr decay iters) and checks every value and its fit with the program (the global batch must
// split into whole microbatches on each data-parallel rank; with pipeline parallelism it is
// fixed at micro batch x dp x the compiled num_microbatches). Throws megart::Error naming the
// flag, the value and the fix.
void resolve_train_flags(TrainFlags &flags, const ProgramDesc &program);

} // namespace megart
