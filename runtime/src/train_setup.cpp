#include "megart/train_setup.h"

#include "megart/checkpoint_match.h"
#include "megart/closing_actions.h"
#include "megart/cpu_threads.h"
#include "megart/error.h"
#include "megart/loss_scaler.h"
#include "megart/number_text.h"
#include "megart/param_layout.h"
#include "megart/pipeline_program.h"
#include "megart/train_checkpoint.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>

namespace megart {

namespace {

// The distributed optimizer's fields of the program (or of one pipeline stage, `where`). The
// layout's own tables are checked against the parameters when the store is built.
void validate_flat_layout_fields(const ProgramDesc &p, const FlatLayoutDesc *flat, SyncFn sync,
                                 GatherParamsFn gather, const PipeOp *ops, int64_t num_ops, const std::string &where) {
  // The distributed optimizer steps each rank's shard: the table gathers the updated parameters
  // after the step exactly where they are not kept sharded (ZeRO-3) and there are other dp ranks.
  const bool gathers = flat && flat->sharding != DataParallelSharding::OptimGradsParams && p.data_parallel_size > 1;
  if (gathers_params(ops, num_ops) != gathers)
    throw Error("compiled program: " + where + "the table " + (gathers ? "has no" : "has a") +
                " ParamGather after its OptimizerStep, but the parameters " + (gathers ? "are" : "are not") +
                " sharded over several dp ranks for the step (regenerate the program with megac compile)");
  if (!flat && gather)
    throw Error("compiled program: " + where + "gather_params is set but flat_layout is not "
                "(regenerate the program with megac compile)");
  if (!flat)
    return;
  if (flat->shard_degree < 1 || p.data_parallel_size % flat->shard_degree != 0)
    throw Error("compiled program: " + where + "flat_layout shards the optimizer state over " +
                std::to_string(flat->shard_degree) + " ranks, which does not divide data_parallel_size " +
                std::to_string(p.data_parallel_size) + " (regenerate the program with megac compile)");
  if (flat->shard_degree != p.data_parallel_size && !sync)
    throw Error("compiled program: " + where + "flat_layout shards over " + std::to_string(flat->shard_degree) +
                " of the " + std::to_string(p.data_parallel_size) + " dp ranks (hybrid sharding) but has no "
                "sync_gradients to sum the shards across the replicas (regenerate the program with megac compile)");
  const int64_t ep = p.expert_parallel_size;
  if (flat->expert_shard_degree != 0 &&
      (ep <= 1 || flat->expert_shard_degree != p.data_parallel_size / ep || flat->shard_degree != p.data_parallel_size))
    throw Error("compiled program: " + where + "flat_layout shards its experts over " +
                std::to_string(flat->expert_shard_degree) + " ranks, but data_parallel_size " +
                std::to_string(p.data_parallel_size) + " / expert_parallel_size " + std::to_string(ep) +
                " are the dp ranks holding the same experts (and the rest must shard over every dp rank; "
                "regenerate the program with megac compile)");
  if (flat->sharding != DataParallelSharding::Optim && flat->sharding != DataParallelSharding::OptimGrads &&
      flat->sharding != DataParallelSharding::OptimGradsParams)
    throw Error("compiled program: " + where + "flat_layout's sharding is " +
                std::to_string(static_cast<int>(flat->sharding)) +
                "; it must be optim (1), optim_grads (2) or optim_grads_params (3) (regenerate the "
                "program with megac compile)");
  if (flat->sharding == DataParallelSharding::OptimGradsParams && gather)
    throw Error("compiled program: " + where + "gather_params is set, but with optim_grads_params the "
                "parameters stay sharded after the step (regenerate the program with megac compile)");
  if (p.overlap_grad_reduce && flat->sharding != DataParallelSharding::Optim)
    throw Error("compiled program: " + where + "overlap_grad_reduce is set with ZeRO-2/3 (flat_layout sharding " +
                std::to_string(static_cast<int>(flat->sharding)) + "), whose backward reduce-scatters (and "
                "overlaps) by itself: no bucket is the runtime's to start (regenerate the program with megac compile)");
}

} // namespace

int64_t hybrid_shard_degree(const ProgramDesc &p, int64_t dp) {
  const FlatLayoutDesc *flat = p.stages ? p.stages[0].flat_layout : nullptr;
  if (!flat || flat->shard_degree < 1 || flat->shard_degree >= dp || dp % flat->shard_degree != 0)
    return dp;
  return flat->shard_degree;
}

namespace {

// The generated table is trusted to be well-formed, but a broken one should say so rather
// than crash inside the loop.
void validate_program(const ProgramDesc &p) {
  auto bad = [](const std::string &field, long long value) {
    throw Error("compiled program: " + field + " is " + std::to_string(value) +
                "; it must be positive (regenerate the program with megac compile)");
  };
  if (p.micro_batch_size < 1) bad("micro_batch_size", p.micro_batch_size);
  validate_pipeline_program(p); // every stage, one-stage programs too
  const FlatLayoutDesc *flat = p.stages[0].flat_layout;
  if (p.overlap_param_gather && (!flat || flat->sharding == DataParallelSharding::OptimGradsParams))
    throw Error("compiled program: overlap_param_gather is set, but the parameters are not gathered after the step "
                "(it needs a flat_layout of optim or optim_grads; regenerate the program with megac compile)");
  if (p.seq_length < 1) bad("seq_length", p.seq_length);
  if (p.vocab_size < 1) bad("vocab_size", p.vocab_size);
  for (int64_t r = 0; r < p.pipeline_parallel_size; ++r) {
    const PipelineStageDesc &stage = p.stages[r];
    const FlatLayoutDesc *first = p.stages[0].flat_layout;
    if (stage.flat_layout && first && stage.flat_layout->sharding != first->sharding)
      throw Error("compiled program: stage " + std::to_string(r) + "'s flat_layout shards other state than " +
                  "stage 0's (regenerate the program with megac compile)");
    if ((stage.flat_layout != nullptr) != (first != nullptr))
      throw Error("compiled program: stage " + std::to_string(r) + (stage.flat_layout ? " has" : " has no") +
                  " flat_layout but stage 0" + (stage.flat_layout ? " has none" : " has one") +
                  "; the distributed optimizer covers every stage or none (regenerate the "
                  "program with megac compile)");
    const std::string where = p.pipeline_parallel_size > 1 ? "stage " + std::to_string(r) + ": " : "";
    validate_flat_layout_fields(p, stage.flat_layout, stage.sync_gradients, stage.gather_params, stage.ops,
                                stage.num_ops, where);
    // The runtime has no buckets or gathers of its own: the compiled sync runs after the last
    // microbatch unless backward started the buckets (--overlap-grad-reduce) or reduce-scattered
    // them (ZeRO-2/3).
    const bool grads_in_backward = stage.flat_layout && stage.flat_layout->sharding != DataParallelSharding::Optim;
    if (p.data_parallel_size > 1 && !p.overlap_grad_reduce && !grads_in_backward && !stage.sync_gradients)
      throw Error("compiled program: " + where + "data_parallel_size is " + std::to_string(p.data_parallel_size) +
                  " but there is no sync_gradients to sum the gradients over dp (regenerate the program with "
                  "megac compile)");
    if (gathers_params(stage.ops, stage.num_ops) && !stage.gather_params)
      throw Error("compiled program: " + where + "the table gathers the parameters after the step but there is no "
                  "gather_params (regenerate the program with megac compile)");
  }
}

std::string exact(double x) { return shortest_exact_text(x); }

// Megatron's OptimizerParamScheduler check: a resumed run continues the checkpoint's lr and
// weight-decay schedule; values that differ are refused unless overridden.
void check_schedule(const ScheduleArgs &saved, const TrainFlags &f) {
  std::string differs;
  auto compare = [&](const char *flag, const std::string &then, const std::string &now) {
    if (then != now)
      differs += std::string(differs.empty() ? "" : ", ") + flag + " " + now + " (checkpoint: " + then + ")";
  };
  compare("--lr", exact(saved.lr), exact(f.lr));
  compare("--min-lr", exact(saved.min_lr), exact(f.min_lr));
  compare("--lr-decay-style", saved.lr_decay_style, f.lr_decay_style);
  compare("--lr-warmup-iters", std::to_string(saved.lr_warmup_iters), std::to_string(f.lr_warmup_iters));
  compare("--lr-decay-iters", std::to_string(saved.lr_decay_iters), std::to_string(f.lr_decay_iters));
  compare("--weight-decay", exact(saved.weight_decay), exact(f.weight_decay));
  compare("--lr-warmup-fraction", exact(saved.lr_warmup_fraction), exact(f.lr_warmup_fraction));
  compare("--lr-warmup-init", exact(saved.lr_warmup_init), exact(f.lr_warmup_init));
  if (f.lr_decay_style == "WSD" || saved.lr_decay_style == "WSD") {
    compare("--lr-wsd-decay-style", saved.lr_wsd_decay_style, f.lr_wsd_decay_style);
    compare("--lr-wsd-decay-iters", std::to_string(saved.lr_wsd_decay_iters), std::to_string(f.lr_wsd_decay_iters));
  }
  if (!differs.empty())
    throw Error("--load " + f.load + ": this run's schedule differs from the checkpoint's: " + differs +
                ". A resumed run continues the checkpoint's schedule (--lr-decay-iters defaults to "
                "--train-iters): give the checkpoint's values, or add --override-opt_param-scheduler "
                "to use this run's");
}

// The checkpoint's loss-scaler state must fit this run's dynamic scaler flags.
void check_loss_scaler(const LossScalerState &saved, const TrainFlags &f) {
  try {
    make_loss_scaler(f)->restore(saved);
  } catch (const Error &) {
    throw Error("--load " + f.load + ": the checkpoint's loss scale " + exact(saved.scale) +
                " (growth count " + std::to_string(saved.growth_tracker) + ", hysteresis left " +
                std::to_string(saved.hysteresis_tracker) + ") does not fit --min-loss-scale " +
                exact(f.min_loss_scale) + " / --loss-scale-window " + std::to_string(f.loss_scale_window) +
                " / --hysteresis " + std::to_string(f.hysteresis) + "; resume with the values it was "
                "saved with, or add --no-load-optim to start the loss scale over");
  }
}

// A resumed run continues from `saved`: its position always; its optimizer count, schedule and
// loss scaler unless --no-load-optim; its data order unless --no-load-rng.
void restore_state(TrainState &start, const TrainState &saved, const TrainFlags &flags,
                   const LoadSource &source) {
  if (source.iteration >= 0 && saved.iteration != source.iteration)
    throw Error("--load " + flags.load + ": " + source.state_file + " says iteration " +
                std::to_string(saved.iteration) + ", but its folder is iteration " +
                std::to_string(source.iteration) + "; the checkpoint is damaged (load another iteration "
                "with --ckpt-step N)");
  if (saved.iteration >= flags.train_iters && !flags.skip_train)
    throw Error("--load " + flags.load + ": the checkpoint is at iteration " +
                std::to_string(saved.iteration) + ", so --train-iters " +
                std::to_string(flags.train_iters) + " leaves nothing to train; --train-iters is "
                "the total count: raise it above " + std::to_string(saved.iteration));
  start.iteration = saved.iteration;
  start.consumed_samples = saved.consumed_samples;
  start.skipped_iterations = saved.skipped_iterations;
  start.data_num_samples = saved.data_num_samples;
  if (!flags.no_load_optim) {
    if (!flags.override_opt_param_scheduler && !flags.skip_train) // evaluation runs no schedule
      check_schedule(saved.schedule, flags);
    start.optimizer_steps = saved.optimizer_steps;
    if (flags.fp16 && flags.loss_scale == 0 && saved.loss_scaler) { // only a dynamic scale moves
      check_loss_scaler(*saved.loss_scaler, flags);
      start.loss_scaler = saved.loss_scaler;
    }
  }
  if (!flags.no_load_rng) {
    if (flags.seed_given && static_cast<uint64_t>(flags.seed) != saved.seed)
      throw Error("--seed " + std::to_string(flags.seed) + " differs from the checkpoint's (" +
                  std::to_string(saved.seed) + "), whose data order the run resumes; drop "
                  "--seed, or add --no-load-rng to use the new seed's order");
    if (!flags.shuffle && saved.shuffle)
      throw Error("--no-shuffle: the checkpoint's run read its data shuffled, and the run resumes "
                  "that order; drop --no-shuffle, or add --no-load-rng to read in dataset order");
    start.seed = saved.seed;
    start.shuffle = saved.shuffle;
  }
}

// A resumed run continues the model it saved: the spec and QLoRA's quantization the
// checkpoint records must be this program's (config.json, checked on every load, covers what
// Hugging Face's config holds; the spec adds dropout and the rest).
void check_resumed_program(const TrainState &saved, const ProgramDesc &program, const std::string &what) {
  if (!saved.spec_yaml.empty() && program.spec_yaml)
    check_spec(saved.spec_yaml, program.spec_yaml, what);
  const int64_t block = program_qlora_block_size(program);
  if (saved.qlora_block_size != block)
    throw Error(what + ": the checkpoint's base model was quantized " +
                (saved.qlora_block_size ? "in NF4 blocks of " + std::to_string(saved.qlora_block_size)
                                        : std::string("not at all (no --qlora)")) +
                ", this program's " + (block ? "in blocks of " + std::to_string(block) : std::string("not at all")) +
                ": the adapters were trained against that base; compile with " +
                (saved.qlora_block_size ? "--qlora --qlora-block-size " + std::to_string(saved.qlora_block_size)
                                        : std::string("no --qlora")) +
                ", or start a new run from its adapters with --finetune");
}

// Megatron's way for jobs requeued with the same command: --load naming the --save folder
// before anything was saved there starts a new run.
bool nothing_saved_yet(const TrainFlags &flags) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (flags.load.empty() || flags.save.empty() || flags.ckpt_step >= 0 ||
      fs::weakly_canonical(flags.load, ec) != fs::weakly_canonical(flags.save, ec))
    return false;
  return !fs::exists(flags.load, ec) || (fs::is_directory(flags.load, ec) && read_tracker(flags.load) < 0 &&
                                         !fs::exists(fs::path(flags.load) / "train_state.json", ec));
}

/// The tensors other pipeline stages hold (the file may have them; they are skipped).
std::set<std::string> held_elsewhere(const ProgramDesc &program, bool frozen) {
  std::set<std::string> names;
  if (program.pipeline_parallel_size > 1)
    for (const auto &entry : tensor_stages(program, frozen))
      names.insert(entry.first);
  return names;
}

std::vector<std::string> absolute_paths(const std::vector<std::string> &files) {
  std::vector<std::string> out;
  for (const std::string &f : files)
    out.push_back(std::filesystem::absolute(f).lexically_normal().string());
  return out;
}

/// A LoRA program: the frozen base model from --pretrained-checkpoint, a Hugging Face folder in
/// --load, the base a resumed checkpoint names (its train_state.json), or the one a folder PEFT
/// saved names (its adapter_config.json's base_model_name_or_path); the adapters from the
/// checkpoint or PEFT's folder, or new (A kaiming-uniform, B zeros: training starts from the
/// base model).
void load_lora(TrainSetup &s, const TrainFlags &flags, const ProgramDesc &program, const LoadSource &source,
               bool resume, bool fresh) {
  const uint64_t seed = static_cast<uint64_t>(flags.seed);
  const bool from_checkpoint = !flags.load.empty() && !fresh && source.adapters;
  std::vector<std::string> base;
  std::string base_from;
  if (!flags.pretrained_checkpoint.empty() || from_checkpoint) {
    base = checkpoint_base_weights(source, flags.load, flags.pretrained_checkpoint);
    base_from = !flags.pretrained_checkpoint.empty() ? "--pretrained-checkpoint"
                : source.resume                     ? "the checkpoint's base_weights"
                                                    : "adapter_config.json's base_model_name_or_path";
  } else if (!flags.load.empty() && !fresh) {
    base = source.weight_files;
    base_from = "--load";
  }
  if (base.empty()) {
    s.frozen->init(seed);
    s.weights_from = "base model initialised with seed " + std::to_string(seed) + " (no --load)";
  } else {
    for (const std::string &f : base)
      if (!std::filesystem::is_regular_file(f))
        throw Error(base_from + ": the base model's weight file " + f + " is not there (give its folder with "
                    "--pretrained-checkpoint)");
    // The config.json beside the base's weights, when they have one, describes this program's model.
    const std::filesystem::path base_config = std::filesystem::path(base.front()).parent_path() / "config.json";
    if (program.hf_config_json && std::filesystem::is_regular_file(base_config))
      check_hf_config(base_config.string(), program.hf_config_json, "the base model (" + base_from + ")");
    try {
      s.frozen->load(base, held_elsewhere(program, /*frozen=*/true));
    } catch (const Error &e) {
      throw Error(std::string("the base model (") + base_from + "): " + e.what());
    }
    s.start.base_weights = absolute_paths(base);
    s.start.base_weights_checksums = base_weights_checksums(base);
    s.weights_from = "base model loaded from " + (base.size() == 1 ? base[0] : std::to_string(base.size()) + " files");
  }
  if (from_checkpoint) {
    s.store->load(source.weight_files, held_elsewhere(program, false));
    if (resume && !flags.no_load_optim)
      s.store->load_optimizer_state(source.optimizer_file, held_elsewhere(program, false));
    s.weights_from += resume ? "; adapters resumed from " + source.folder + " at iteration " +
                                   std::to_string(s.start.iteration)
                             : "; adapters loaded from " + source.weight_files[0];
  } else {
    s.store->init(seed);
    s.weights_from += "; adapters initialised with seed " + std::to_string(seed);
  }
}

std::string fmt(const char *format, double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, x);
  return buf;
}

} // namespace

std::unique_ptr<TrainData> open_split_data(const TrainFlags &flags, int which, const ProgramDesc &program) {
  static const char *const kSplitFlags[] = {"--train-data-path", "--valid-data-path", "--test-data-path"};
  if (!flags.train_data_path.empty()) {
    const std::vector<std::string> &paths =
        which == 0 ? flags.train_data_path : which == 1 ? flags.valid_data_path : flags.test_data_path;
    if (paths.empty())
      return nullptr;
    return std::make_unique<TrainData>(parse_blend(paths, kSplitFlags[which]), std::vector<double>{}, 0,
                                       program.seq_length, program.vocab_size, kSplitFlags[which]);
  }
  const std::vector<double> split = flags.split.empty() ? std::vector<double>{} : parse_split(flags.split);
  // Evaluation alone without --split: all of --data-path is what it evaluates.
  if (which == 1 && split.empty() && flags.skip_train)
    return std::make_unique<TrainData>(parse_blend(flags.data_path, "--data-path"), split, 0, program.seq_length,
                                       program.vocab_size, "--data-path");
  if (which > 0 && (split.empty() || split[static_cast<size_t>(which)] == 0))
    return nullptr;
  if (which == 0 && !split.empty() && split[0] == 0)
    throw Error("--split " + flags.split + " gives training no documents; e.g. --split 949,50,1");
  return std::make_unique<TrainData>(parse_blend(flags.data_path, "--data-path"), split, which, program.seq_length,
                                     program.vocab_size, "--data-path");
}

TrainSetup prepare_training(TrainFlags &flags, const ProgramDesc &program,
                            const ProcessGrid &grid) {
  validate_program(program);
  resolve_train_flags(flags, program);
  // Before anything is opened or allocated: a backend that cannot compute in the precision
  // asked for says so first.
  program_device(program).set_compute_precision(compute_precision(flags));
  // This rank holds only its stage's parameters (all of them with pp = 1).
  const PipelineStageDesc &stage = program.stages[grid.coord().pp];
  const ParamDesc *params = stage.params;
  const int64_t num_params = stage.num_params;
  const FlatLayoutDesc *flat_layout = stage.flat_layout;
  validate_param_layout(params, num_params, grid.shape().tp, grid.shape().ep);
  if (flat_layout && flags.grad_reduce_in_bf16 && grid.shape().dp > 1)
    throw Error("--grad-reduce-in-bf16: the distributed optimizer (the program's flat_layout) "
                "reduce-scatters the gradients in fp32; bf16 reduction is not supported with it "
                "yet: drop --grad-reduce-in-bf16");
  TrainSetup s;
  s.start.seed = static_cast<uint64_t>(flags.seed);
  s.start.shuffle = flags.shuffle;
  LoadSource source;
  const bool fresh = nothing_saved_yet(flags);
  const bool lora = stage.num_frozen_params > 0;
  if (!flags.load.empty() && !fresh) {
    source = resolve_load(flags.load, flags.ckpt_step, !flags.no_load_optim && !flags.finetune);
    if (lora && source.resume && !source.adapters) // a whole model's checkpoint: LoRA's base
      source = resolve_load((std::filesystem::path(source.folder) / "model.safetensors").string());
    if (!lora && source.adapters)
      throw Error("--load " + flags.load + " is a LoRA checkpoint (adapters only), but this program trains every "
                  "parameter: compile with the same --lora-rank to resume it, or merge it into a whole model with "
                  "OUT/train merge-lora --load " + flags.load + " --save DIR");
  }
  if (!flags.load.empty() && !fresh)
    check_load_against_program(source, program, "--load " + flags.load);
  const bool resume = source.resume && !flags.finetune;
  if (resume) {
    const TrainState saved = read_train_state(source.state_file);
    restore_state(s.start, saved, flags, source); // first: its folder-and-state check is the most specific
    check_checkpoint_files(source, saved);
    if (!flags.skip_train) // evaluation computes the same model whatever the training settings
      check_resumed_program(saved, program, "--load " + flags.load);
  }
  s.data = open_split_data(flags, 0, program);
  // Evaluation alone reads no training sample: the order it would continue does not matter.
  if (resume && !flags.no_load_rng && !flags.skip_train && s.start.data_num_samples != s.data->num_samples())
    throw Error("--load " + flags.load + ": the checkpoint's data order is over " +
                std::to_string(s.start.data_num_samples) + " samples, but the training data has " +
                std::to_string(s.data->num_samples()) +
                "; resume with the data it was trained on, or add --no-load-rng to draw a new "
                "order over this data (or --finetune to start a new run from its weights)");
  s.start.data_num_samples = s.data->num_samples();
  if (!flags.skip_train)
    s.data->require_samples(s.start.consumed_samples, flags.train_iters - s.start.iteration,
                            flags.global_batch_size);
  if (!flags.save.empty() && s.data->tokenizer()) // checkpoints carry its files: they must be there
    tokenizer_checkpoint_files(*s.data->tokenizer());
  if (flags.eval_iters > 0) { // every evaluation reads the same first --eval-iters batches
    s.valid = open_split_data(flags, 1, program);
    s.test = open_split_data(flags, 2, program);
    for (auto [eval, what] : {std::pair{s.valid.get(), "validation"}, std::pair{s.test.get(), "test"}})
      if (eval)
        try {
          eval->require_samples(0, flags.eval_iters, flags.global_batch_size, "--eval-iters");
        } catch (const Error &e) {
          throw Error(std::string("the ") + what + " data: " + e.what());
        }
  }
  // A masked LM's batches: masked with the data's [MASK] under the run's seed, the same on every
  // rank and plan; data without one is refused here, before anything is written.
  if (program.masked_lm)
    for (TrainData *split : {s.data.get(), s.valid.get(), s.test.get()})
      if (split)
        split->set_masking(mlm_masking(split->tokenizer(), s.start.seed, split->describe(0)));
  if (flags.skip_train && !s.valid && !s.test)
    throw Error("--skip-train evaluates, but there is no validation or test data: give --split (e.g. 949,50,1) "
                "or --valid-data-path");
  if (!flags.save.empty() && grid.global_rank() == 0) { // the only rank that writes checkpoints
    check_save_dir(flags.save);
    s.save_lock.emplace(SaveLock::acquire(flags.save)); // before the clean-up: another run's save is not stale
    s.removed_temps = remove_stale_checkpoint_temps(flags.save);
    const int64_t latest = read_tracker(flags.save);
    if (latest > s.start.iteration && !flags.overwrite_checkpoints)
      throw Error("--save " + flags.save + " already holds a checkpoint at iteration " +
                  std::to_string(latest) + ", and this run starts at iteration " +
                  std::to_string(s.start.iteration) + ": its saves would replace newer ones. "
                  "Resume with --load " + flags.save + ", save elsewhere, or add "
                  "--overwrite-checkpoints");
  }
  // Allocated only now: the model's state is the big allocation, the checks above are cheap.
  s.store = std::make_unique<ParamStore>(params, num_params, grid.coord().tp, grid.shape().tp,
                                         program_device(program), flat_layout, &grid.dp_shard(),
                                         grid.ep().rank(), grid.shape().ep, &grid.expert_dp());
  if (stage.num_frozen_params > 0) {
    s.frozen = ParamStore::frozen(stage.frozen_params, stage.num_frozen_params, grid.coord().tp, grid.shape().tp, program_device(program));
    load_lora(s, flags, program, source, resume, fresh);
    return s;
  }
  if (flags.load.empty() || fresh) {
    s.store->init(static_cast<uint64_t>(flags.seed)); // a tied weight starts the same everywhere
    s.weights_from = "initialised with seed " + std::to_string(flags.seed) +
                     (fresh ? " (no checkpoint in --load " + flags.load + " yet: a new run)" : "");
    return s;
  }
  // Each tp rank reads its own blocks of the full tensors; each stage only its tensors (both
  // stages of a tied weight read it), the others' are expected in the file.
  const std::set<std::string> elsewhere = held_elsewhere(program, /*frozen=*/false);
  s.store->load(source.weight_files, elsewhere);
  if (resume && !flags.no_load_optim)
    s.store->load_optimizer_state(source.optimizer_file, elsewhere);
  s.weights_from = resume ? "resumed from " + source.folder + " at iteration " +
                                std::to_string(s.start.iteration)
                          : "loaded from " + (source.weight_files.size() == 1
                                                  ? source.weight_files[0]
                                                  : source.folder + " (" +
                                                        std::to_string(source.weight_files.size()) +
                                                        " shards)");
  return s;
}

void open_metrics(TrainSetup &setup, const TrainFlags &flags, const ProcessGrid &grid) {
  if (grid.global_rank() != 0)
    return;
  // The event file first (a bad --tensorboard-dir fails before the metrics file is truncated);
  // it goes again if the metrics file cannot be opened.
  if (!flags.tensorboard_dir.empty())
    setup.tensorboard = std::make_unique<TensorBoardWriter>(TensorBoardWriter::open(flags.tensorboard_dir));
  try {
    if (!flags.metrics_file.empty())
      setup.metrics = std::make_unique<MetricsFile>(
          setup.start.iteration > 0 ? MetricsFile::open_resumed(flags.metrics_file, setup.start.iteration)
                                    : MetricsFile::open(flags.metrics_file));
  } catch (...) {
    if (setup.tensorboard) {
      const std::string path = setup.tensorboard->path();
      setup.tensorboard.reset();
      std::remove(path.c_str());
    }
    throw;
  }
}

void print_header(std::ostream &out, const ProgramDesc &p, const TrainFlags &f,
                  const ProcessGrid &grid, const TrainSetup &setup) {
  const int64_t B = f.global_batch_size, b = p.micro_batch_size, dp = grid.shape().dp;
  const ParamStore &store = *setup.store;
  const TrainData &data = *setup.data;
  out << "megart: " << (p.summary ? p.summary : "") << "\n";
  out << "  device: " << store.device().describe();
  if (store.device().describe() == "cpu") {
    const CpuThreadsReport threads = describe_cpu_threads();
    out << ", " << threads.line;
    if (!threads.warning.empty())
      out << "\n  warning: " << threads.warning;
  }
  out << "\n";
  if (grid.world_size() > 1)
    out << "  parallel: " << grid.shape().describe() << " (--rank-layout prints which is which)\n";
  // The whole model's count, also when this rank holds one pipeline stage.
  const bool stages = p.pipeline_parallel_size > 1;
  out << "  parameters: " << model_tensor_elements(p) << " in " << model_tensor_count(p) << " tensors";
  if (setup.frozen) // LoRA: the counts above are the adapters'
    out << " trained (LoRA adapters), " << (stages ? "this stage's " : "") << setup.frozen->num_tensor_elements()
        << " frozen in " << setup.frozen->tensors().size() << " tensors";
  out << "; " << setup.weights_from << "\n";
  if (stages)
    out << "  pipeline: " << describe_pipeline(p) << "\n";
  if (const DistributedOptimizerState *sharded = store.sharded()) {
    const FlatLayout &l = sharded->layout();
    int64_t used = 0;
    for (int64_t n : l.param_numels)
      used += n;
    out << "  distributed optimizer: parameters and gradients in flat buffers of " << l.numel
        << " elements (" << l.numel - used << " padding) in " << l.buckets.size() << " bucket"
        << (l.buckets.size() == 1 ? "" : "s") << (stages ? " (pp stage 0's)" : "")
        << "; AdamW moments sharded over dp " << sharded->group().size();
    const auto experts = std::find_if(l.buckets.begin(), l.buckets.end(), [](const FlatBucket &k) { return k.experts; });
    if (experts != l.buckets.end()) // an ep rank's experts: over the dp ranks holding the same
      out << " (the experts over expert_dp " << sharded->group_of(experts - l.buckets.begin()).size() << ")";
    out << ": " << sharded->shard_numel() << " elements each\n";
  }
  // The samples this run reads (none with --skip-train); require_samples bounded the sum.
  const int64_t from = setup.start.consumed_samples;
  const int64_t reads = f.skip_train ? 0 : (f.train_iters - setup.start.iteration) * B;
  const std::string epochs = data.describe_epochs(from, from + reads);
  if (f.skip_train) {
    // Evaluation alone: what is evaluated, not a training run's schedule.
    out << "  evaluation only (--skip-train): " << f.eval_iters << " batches of " << B << " samples";
    if (setup.valid)
      out << "; validation data " << setup.valid->describe(0) << ": " << setup.valid->num_samples() << " samples";
    if (setup.test)
      out << "; test data " << setup.test->describe(0) << ": " << setup.test->num_samples() << " samples";
    out << std::endl;
  } else {
    out << "  data: " << data.describe(from + reads) << ": " << data.num_tokens() << " tokens, "
        << data.num_samples() << " samples of " << p.seq_length << "+1 tokens; using " << reads
        << (setup.start.shuffle ? " in shuffled order" : " in dataset order")
        << (from > 0 ? " from sample " + std::to_string(from) : std::string())
        << (epochs.empty() ? std::string() : " (" + epochs + ")") << "\n"
        << "  training: "
        << (setup.start.iteration > 0 ? "iterations " + std::to_string(setup.start.iteration + 1) +
                                            " to " + std::to_string(f.train_iters)
                                      : std::to_string(f.train_iters) + " iterations")
        << ", global batch " << B << " = "
        << (dp > 1 ? "dp " + std::to_string(dp) + " x " : std::string()) << B / (b * dp)
        << " x micro batch " << b << ", lr " << fmt("%g", f.lr) << " (" << f.lr_decay_style
        << (f.lr_decay_style == "WSD" ? " with a " + f.lr_wsd_decay_style + " anneal over the last " +
                                            std::to_string(f.lr_wsd_decay_iters) + " iterations"
                                      : std::string())
        << " to " << fmt("%g", f.min_lr) << ", warmup "
        << (f.lr_warmup_fraction >= 0 ? fmt("%g", f.lr_warmup_fraction) + " of the decay"
                                      : std::to_string(f.lr_warmup_iters))
        << "), clip-grad "
        << fmt("%g", f.clip_grad) << std::endl;
  }
  if (!f.save.empty()) {
    out << "  checkpoints: " << f.save << ", "
        << (f.save_interval > 0 ? "every " + std::to_string(f.save_interval) + " iterations and "
                                : std::string())
        << "at the end";
    if (f.keep_latest_k > 0)
      out << ", keeping the newest " << f.keep_latest_k;
    if (!setup.removed_temps.empty())
      out << "; removed " << setup.removed_temps.size() << " leftover"
          << (setup.removed_temps.size() > 1 ? "s" : "") << " of an interrupted save";
    out << "\n";
  }
  if (f.bf16 || f.fp16) {
    const bool half_activations = p.compiled_precision && std::string(p.compiled_precision) != "fp32";
    out << "  precision: " << store.device().describe_precision(compute_precision(f))
        << (half_activations ? std::string("; activations stored in ") + p.compiled_precision +
                                   " (compiled so), computed in fp32"
                             : std::string())
        << "; weights, gradients and optimizer in fp32";
    if (dp > 1)
      out << "; data-parallel gradient sum in " << (f.grad_reduce_in_bf16 ? "bf16" : "fp32");
    else if (f.grad_reduce_in_bf16)
      out << "; --grad-reduce-in-bf16 does nothing at dp 1 (no gradient sum)";
    if (f.fp16)
      out << "; loss scale "
          << (f.loss_scale > 0 ? fmt("%.15g", f.loss_scale) + " (static)"
                               : fmt("%.15g", f.initial_loss_scale) + " (dynamic: min " +
                                     fmt("%.15g", f.min_loss_scale) + ", window " +
                                     std::to_string(f.loss_scale_window) + ", hysteresis " +
                                     std::to_string(f.hysteresis) + ")");
    out << std::endl;
  }
}

} // namespace megart
