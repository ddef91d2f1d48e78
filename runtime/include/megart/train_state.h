// The training state beside a checkpoint's tensors: where the run stands (iteration, samples
// consumed, optimizer updates), how it reads its data, the loss scaler, and the arguments and
// program that produced it. Written as iter_NNNNNNN/train_state.json; with the weights and the
// AdamW moments it is everything a resumed run needs to continue bit for bit.
//
// Randomness needs no state of its own: initialisation, the data order (and dropout, once
// compiled) are counter-based functions of --seed, so the seed is the RNG state.
#pragma once

#include "megart/loss_scaler.h"
#include "megart/program.h"
#include "megart/train_flags.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace megart {

// The learning-rate and weight-decay schedule a checkpoint was trained with: a resumed run
// must continue it (Megatron's OptimizerParamScheduler check), unless told to override it.
struct ScheduleArgs {
  double lr = 0, min_lr = 0;
  std::string lr_decay_style;
  int64_t lr_warmup_iters = 0, lr_decay_iters = 0;
  double weight_decay = 0;
  double lr_warmup_fraction = -1, lr_warmup_init = 0;
  std::string lr_wsd_decay_style = "exponential";
  int64_t lr_wsd_decay_iters = 0;
};

struct TrainState {
  int64_t iteration = 0;          // iterations completed
  int64_t consumed_samples = 0;   // samples of the data order used so far
  int64_t optimizer_steps = 0;    // updates made; the lr schedule's step count
  int64_t skipped_iterations = 0; // iterations without an update (non-finite gradients)
  // The data order: each epoch a shuffle drawn from the seed and the epoch, or dataset order
  // (megart/epoch_order.h); consumed_samples past num_samples are in later epochs.
  uint64_t seed = 0;
  bool shuffle = true;
  int64_t data_num_samples = 0;   // samples the order was drawn over (the data's size then)
  std::optional<LossScalerState> loss_scaler; // --fp16 runs only
  // For people and for checks on resume: the flags and the plan (JSON objects), the program's
  // summary and the spec it was compiled from.
  std::string args_json = "{}";
  ScheduleArgs schedule;          // read back from args_json
  std::string plan_json = "{}";
  int64_t qlora_block_size = 0;   // read back from plan_json: QLoRA's NF4 block (0: none)
  std::string program_summary;
  std::string spec_yaml;
  // A LoRA program's frozen base model: the weight files it was loaded from (absolute paths),
  // which a resumed run loads again (the checkpoint holds the adapters alone). Empty otherwise.
  std::vector<std::string> base_weights;
  std::vector<std::string> base_weights_checksums; // file_checksum of each, in the same order
  // A LoRA program's adapter settings (its adapter_config.json as compiled), kept so that the
  // checkpoint's adapter_config.json can be checked against what the run trained with.
  std::string adapter_config_json;
};

// The JSON text, one key per line. Doubles are written so they read back bit for bit.
std::string format_train_state(const TrainState &state);

// Parses what format_train_state wrote. Throws megart::Error naming `path`, the key and what
// was wrong (missing, wrong type, out of range).
TrainState parse_train_state(const std::string &text, const std::string &path);

// The training flags as a JSON object (every value, defaults included).
std::string format_train_args(const TrainFlags &flags);

// The program's parallel plan as a JSON object (sizes, schedule, micro batch, QLoRA's block).
std::string format_program_plan(const ProgramDesc &program);

// QLoRA's NF4 block size of the program's frozen weights (0: no NF4 weight).
int64_t program_qlora_block_size(const ProgramDesc &program);

} // namespace megart
