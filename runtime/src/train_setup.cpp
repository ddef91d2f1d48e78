#include "megart/train_setup.h"

#include "megart/error.h"
#include "megart/param_layout.h"
#include "megart/pipeline_program.h"
#include "megart/train_checkpoint.h"

#include <cstdio>
#include <set>
#include <string>

namespace megart {

namespace {

// The generated table is trusted to be well-formed, but a broken one should say so rather
// than crash inside the loop.
void validate_program(const ProgramDesc &p) {
  auto bad = [](const std::string &field, long long value) {
    throw Error("compiled program: " + field + " is " + std::to_string(value) +
                "; it must be positive (regenerate the program with megac compile)");
  };
  if (p.micro_batch_size < 1) bad("micro_batch_size", p.micro_batch_size);
  if (p.seq_length < 1) bad("seq_length", p.seq_length);
  if (p.vocab_size < 1) bad("vocab_size", p.vocab_size);
  // A pipeline's stages replace the single-stage fields, which then describe nothing.
  if (p.pipeline_parallel_size > 1) {
    validate_pipeline_program(p);
    return;
  }
  if (p.num_params < 1) bad("num_params", p.num_params);
  if (p.arena_bytes < 0)
    throw Error("compiled program: arena_bytes is " + std::to_string(p.arena_bytes) +
                "; it must be >= 0");
  if (!p.step)
    throw Error("compiled program: no step function");
}

std::string fmt(const char *format, double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, x);
  return buf;
}

} // namespace

TrainSetup prepare_training(TrainFlags &flags, const ProgramDesc &program,
                            const ProcessGrid &grid) {
  validate_program(program);
  resolve_train_flags(flags, program);
  // Before anything is opened or allocated: a backend that cannot compute in the precision
  // asked for says so first.
  program_device(program).set_compute_precision(compute_precision(flags));
  // With pipeline parallelism this rank holds only its stage's parameters.
  const bool pipelined = program.pipeline_parallel_size > 1;
  const ParamDesc *params = pipelined ? program.stages[grid.coord().pp].params : program.params;
  const int64_t num_params =
      pipelined ? program.stages[grid.coord().pp].num_params : program.num_params;
  validate_param_layout(params, num_params, grid.shape().tp);
  TrainSetup s;
  s.data = std::make_unique<TrainData>(flags.data_path, program.seq_length, program.vocab_size);
  s.data->require_samples(flags.train_iters, flags.global_batch_size);
  if (!flags.save.empty() && grid.global_rank() == 0) // the only rank that writes checkpoints
    check_checkpoint_dir(flags.save);
  // Allocated only now: the model's state is the big allocation, the checks above are cheap.
  s.store = std::make_unique<ParamStore>(params, num_params, grid.coord().tp, grid.shape().tp,
                                         program_device(program));
  if (flags.load.empty()) {
    s.store->init(static_cast<uint64_t>(flags.seed)); // a tied weight starts the same everywhere
  } else {
    // Each tp rank reads its own blocks of the full tensors; each stage only its tensors (both
    // stages of a tied weight read it), the others' are expected in the file.
    std::set<std::string> elsewhere;
    if (pipelined)
      for (const auto &entry : tensor_stages(program))
        elsewhere.insert(entry.first);
    s.store->load(flags.load, elsewhere);
  }
  return s;
}

void open_metrics(TrainSetup &setup, const TrainFlags &flags, const ProcessGrid &grid) {
  if (!flags.metrics_file.empty() && grid.global_rank() == 0)
    setup.metrics = std::make_unique<MetricsFile>(MetricsFile::open(flags.metrics_file));
}

void print_header(std::ostream &out, const ProgramDesc &p, const TrainFlags &f,
                  const ProcessGrid &grid, const TrainSetup &setup) {
  const int64_t B = f.global_batch_size, b = p.micro_batch_size, dp = grid.shape().dp;
  const ParamStore &store = *setup.store;
  const TrainData &data = *setup.data;
  out << "megart: " << (p.summary ? p.summary : "") << "\n";
  out << "  device: " << store.device().describe() << "\n";
  if (grid.world_size() > 1)
    out << "  parallel: " << grid.shape().describe() << " (--rank-layout prints which is which)\n";
  // The whole model's count, also when this rank holds one pipeline stage.
  const bool pipelined = p.pipeline_parallel_size > 1;
  out << "  parameters: " << (pipelined ? model_tensor_elements(p) : store.num_tensor_elements())
      << " in " << (pipelined ? model_tensor_count(p) : static_cast<int64_t>(store.tensors().size()))
      << " tensors; " << (f.load.empty() ? "initialised with seed " + std::to_string(f.seed)
                                         : "loaded from " + f.load)
      << "\n";
  if (pipelined)
    out << "  pipeline: " << describe_pipeline(p) << "\n";
  out << "  data: " << f.data_path << ": " << data.dataset().num_tokens() << " tokens, "
      << data.num_samples() << " samples of " << p.seq_length << "+1 tokens; using "
      << f.train_iters * B << (f.shuffle ? " in shuffled order" : " in dataset order") << "\n"
      << "  training: " << f.train_iters << " iterations, global batch " << B << " = "
      << (dp > 1 ? "dp " + std::to_string(dp) + " x " : std::string()) << B / (b * dp)
      << " x micro batch " << b << ", lr " << fmt("%g", f.lr) << " (" << f.lr_decay_style
      << " to " << fmt("%g", f.min_lr) << ", warmup " << f.lr_warmup_iters << "), clip-grad "
      << fmt("%g", f.clip_grad) << std::endl;
  if (f.bf16 || f.fp16) {
    out << "  precision: " << store.device().describe_precision(compute_precision(f))
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
