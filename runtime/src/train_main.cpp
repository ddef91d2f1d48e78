// The training program's entry point: flags -> checks -> weights -> loop -> summary.
#include "megart/train_driver.h"

#include "megart/error.h"
#include "megart/metrics.h"
#include "megart/param_layout.h"
#include "megart/param_store.h"
#include "megart/train_checkpoint.h"
#include "megart/train_data.h"
#include "megart/train_flags.h"
#include "megart/train_loop.h"

#include <cstdio>
#include <iostream>
#include <memory>
#include <new>
#include <optional>

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

void print_header(std::ostream &out, const ProgramDesc &p, const TrainFlags &f,
                  const ParamStore &store, const TrainData &data) {
  const int64_t B = f.global_batch_size, b = p.micro_batch_size;
  out << "megart: " << (p.summary ? p.summary : "") << "\n"
      << "  parameters: " << store.num_tensor_elements() << " in " << store.tensors().size()
      << " tensors; " << (f.load.empty() ? "initialised with seed " + std::to_string(f.seed)
                                         : "loaded from " + f.load)
      << "\n"
      << "  data: " << f.data_path << ": " << data.dataset().num_tokens() << " tokens, "
      << data.num_samples() << " samples of " << p.seq_length << "+1 tokens; using "
      << f.train_iters * B << (f.shuffle ? " in shuffled order" : " in dataset order") << "\n"
      << "  training: " << f.train_iters << " iterations, global batch " << B << " = "
      << B / b << " x micro batch " << b << ", lr " << fmt("%g", f.lr) << " ("
      << f.lr_decay_style << " to " << fmt("%g", f.min_lr) << ", warmup " << f.lr_warmup_iters
      << "), clip-grad " << fmt("%g", f.clip_grad) << std::endl;
}

} // namespace

int train_main(int argc, const char *const *argv, const ProgramDesc &program, std::ostream &out,
               std::ostream &err) {
  TrainFlags flags;
  if (std::optional<int> code = parse_train_flags(argc, argv, flags, out, err))
    return *code;
  try {
    // Every check before any work: flags, program, parameter layout, data, output folders.
    validate_program(program);
    resolve_train_flags(flags, program);
    validate_param_layout(program.params, program.num_params);
    TrainData data(flags.data_path, program.seq_length, program.vocab_size);
    data.require_samples(flags.train_iters, flags.global_batch_size);
    if (!flags.save.empty())
      check_checkpoint_dir(flags.save);
    // Allocated only now: the model's state is the big allocation, the checks above are cheap.
    ParamStore store(program.params, program.num_params);
    if (flags.load.empty())
      store.init(static_cast<uint64_t>(flags.seed));
    else
      store.load(flags.load);
    // Opened last: it truncates the file, which only a run that is about to train may do.
    std::unique_ptr<MetricsFile> metrics;
    if (!flags.metrics_file.empty())
      metrics = std::make_unique<MetricsFile>(MetricsFile::open(flags.metrics_file));

    print_header(out, program, flags, store, data);
    const TrainResult r = run_train_loop(program, flags, store, data, metrics.get(), out);
    out << "training done: " << r.iterations << " iterations, final lm loss "
        << fmt("%.6f", r.final_loss);
    if (r.skipped_iterations > 0)
      out << ", " << r.skipped_iterations << " skipped (non-finite gradient norm)";
    out << std::endl;
    return 0;
  } catch (const Error &e) {
    err << "error: " << e.what() << std::endl;
  } catch (const std::bad_alloc &) {
    err << "error: out of memory (parameters, optimizer state and the "
        << program.arena_bytes << "-byte workspace must fit)" << std::endl;
  } catch (const std::exception &e) {
    err << "error: " << e.what() << std::endl;
  }
  return 2;
}

int train_main(int argc, char **argv, const ProgramDesc &program) {
  return train_main(argc, argv, program, std::cout, std::cerr);
}

} // namespace megart
