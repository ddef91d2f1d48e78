// The training program's entry point: flags -> process grid -> checks -> weights -> loop ->
// summary. On a grid of several ranks only global rank 0 prints (and writes metrics and
// checkpoints); a rank that fails says so with its rank.
#include "megart/train_driver.h"

#include "megart/cpu_threads.h"
#include "megart/generate.h"
#include "megart/lora_merge.h"
#include "megart/train_checkpoint.h"

#include "megart/comm_mpi.h"
#include "megart/error.h"
#include "megart/exit_signal.h"
#include "megart/launch_env.h"
#include "megart/memory_accounting.h"
#include "megart/process_grid.h"
#include "megart/resident_memory.h"
#include "megart/train_flags.h"
#include "megart/train_loop.h"
#include "megart/train_setup.h"

#include <chrono>
#include <malloc.h>
#include <cstdio>
#include <iostream>
#include <new>
#include <optional>
#include <thread>
#include <vector>

namespace megart {

namespace {

std::string fmt(const char *format, double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, x);
  return buf;
}

// Runs fn; returns "" or the message of what it threw.
template <typename Fn> std::string failure_of(Fn &&fn, const ProgramDesc &program) {
  try {
    fn();
    return "";
  } catch (const Error &e) {
    return e.what();
  } catch (const std::bad_alloc &) {
    return std::string("out of memory (") + (program.pipeline_parallel_size > 1 ? "this stage's " : "") +
           "parameters, optimizer state, workspace and stashed activations must fit)";
  } catch (const std::exception &e) {
    return e.what();
  }
}

std::string rank_prefix(const ProcessGrid &grid) {
  return "error (rank " + std::to_string(grid.global_rank()) + " of " +
         std::to_string(grid.world_size()) + "): ";
}

// Every rank says whether its `failure` is empty; true when all are. Otherwise the lowest
// failing rank prints its message once: plainly when every rank failed (the same bad flag or
// file everywhere), with its rank when only some did. No rank trains unless all can, and no
// rank is left waiting in a collective for one that gave up.
bool all_ranks_ready(const ProcessGrid &grid, const std::string &failure, std::ostream &err) {
  std::vector<float> failed(static_cast<size_t>(grid.world_size()));
  const float mine = failure.empty() ? 0.0f : 1.0f;
  grid.world().all_gather(failed.data(), &mine, 1);
  int64_t first = -1, count = 0;
  for (int64_t r = 0; r < grid.world_size(); ++r)
    if (failed[r] != 0) {
      count += 1;
      if (first < 0)
        first = r;
    }
  if (count == 0)
    return true;
  if (first == grid.global_rank())
    // One write: under mpirun every write is forwarded on its own and can interleave.
    err << ((count == grid.world_size() ? std::string("error: ") : rank_prefix(grid)) + failure + "\n")
        << std::flush;
  return false;
}

// Flags parsed; the grid is built. Everything that can fail is checked on every rank first.
int train_with(TrainFlags &flags, const ProgramDesc &program, ProcessGrid &grid, std::ostream &out,
               std::ostream &err) {
  // From the start: a SIGTERM while the run sets up stops it after its first iteration, saved.
  if (flags.exit_signal_handler)
    install_exit_signal_handler();
  install_stop_signal_handlers(); // a stop signal during a save waits for it
  std::ostream silent(nullptr); // what the ranks other than global rank 0 print to
  std::ostream &log = grid.global_rank() == 0 ? out : silent;
  if (flags.rank_layout) {
    log << format_rank_layout(grid.shape()) << std::flush;
    return 0;
  }
  // The device first (a rank without one says so), then its communicators: collective. Hybrid
  // sharding splits dp into shard groups and replicas first (a shard degree that does not divide
  // dp is left to the program's validation, which names it).
  if (!all_ranks_ready(grid, failure_of([&] { program_device(program); }, program), err))
    return 2;
  const int64_t shard_degree = hybrid_shard_degree(program, grid.shape().dp);
  if (!all_ranks_ready(grid, failure_of([&] { grid.split_data_parallel(shard_degree); }, program), err))
    return 2;
  if (!all_ranks_ready(grid, failure_of([&] { grid.use_device(program_device(program)); }, program),
                       err))
    return 2;
  // The memory report gives this run's high-water marks, not those of an earlier run in the
  // same process (tests run many).
  memory_tracker().reset_peaks();
  const int64_t resident_at_start = resident_bytes();
  TrainSetup setup;
  if (!all_ranks_ready(grid, failure_of([&] { setup = prepare_training(flags, program, grid); },
                                        program),
                       err))
    return 2;
  // Opened only once every rank is ready: it truncates the file.
  if (!all_ranks_ready(grid, failure_of([&] { open_metrics(setup, flags, grid); }, program), err))
    return 2;

  // From here on the ranks are in lockstep: a failure on one cannot be agreed on, so it stops
  // the whole job. A rank whose peer died or hung finds out by the timeout, and stops it too.
  grid.set_timeout(flags.distributed_timeout_minutes * 60);
  program_device(program).set_timeout(flags.distributed_timeout_minutes * 60);
  const std::string failure = failure_of(
      [&] {
        print_header(log, program, flags, grid, setup);
        const TrainResult r = run_train_loop(program, flags, setup.start, *setup.store,
                                             *setup.data, grid, setup.metrics.get(), log, resident_at_start,
                                             setup.tensorboard.get(), setup.valid.get(), setup.test.get(),
                                             setup.frozen.get());
        if (flags.skip_train) {
          log << "evaluation done (--skip-train): nothing trained" << std::endl;
          return;
        }
        log << "training done: " << r.iterations << " iterations, final lm loss "
            << fmt("%.6f", r.final_loss);
        if (r.skipped_iterations > 0)
          log << ", " << r.skipped_iterations << " skipped (non-finite gradient norm)";
        log << std::endl;
        if (!flags.merge_lora.empty() && grid.global_rank() == 0) {
          if (setup.start.base_weights.empty())
            throw Error("--merge-lora: the base model was initialised at random (no --load), so there are no base "
                        "weights to merge into; the adapters are saved in " + flags.save);
          const std::string folder = iteration_folder(flags.save, flags.train_iters);
          const MergeReport m = merge_lora(folder, setup.start.base_weights, flags.merge_lora);
          log << "merged " << m.merged << " adapted weights of " << m.tensors << " tensors into " << flags.merge_lora
              << " (a Hugging Face folder)" << std::endl;
        }
        if (r.optimizer_steps == setup.start.optimizer_steps)
          throw Error("every iteration of this run was skipped (" +
                      std::to_string(r.skipped_iterations) +
                      " with a non-finite gradient norm): the weights never changed, and nothing "
                      "was saved. Check the data, the loaded weights and --lr; with --fp16 lower "
                      "--initial-loss-scale");
      },
      program);
  if (failure.empty())
    return 0;
  if (grid.world_size() == 1) {
    err << ("error: " + failure + "\n") << std::flush;
    return 2;
  }
  err << (rank_prefix(grid) + failure + "\n") << std::flush;
  mpi_abort(2);
}

} // namespace

int train_on_grid(int argc, const char *const *argv, const ProgramDesc &program,
                  ProcessGrid &grid, std::ostream &out, std::ostream &err) {
  std::ostream silent(nullptr);
  const bool speaker = grid.global_rank() == 0;
  TrainFlags flags;
  if (std::optional<int> code =
          parse_train_flags(argc, argv, flags, speaker ? out : silent, speaker ? err : silent))
    return *code;
  const std::string failure = failure_of(
      [&] {
        const GridShape plan = grid_shape_of(program);
        if (plan.tp != grid.shape().tp || plan.pp != grid.shape().pp || plan.dp != grid.shape().dp)
          throw Error("the program was compiled for " + plan.describe() + ", but the grid is " +
                      grid.shape().describe());
      },
      program);
  if (!failure.empty()) {
    (speaker ? err : silent) << ("error: " + failure + "\n") << std::flush;
    return 2;
  }
  return train_with(flags, program, grid, out, err);
}

int train_main(int argc, const char *const *argv, const ProgramDesc &program, std::ostream &out,
               std::ostream &err) {
  if (argc > 1 && std::strcmp(argv[1], "generate") == 0) // OUT/train generate ... (megart/generate.h)
    return generate_main(argc - 1, argv + 1, program, out, err);
  if (argc > 1 && std::strcmp(argv[1], "merge-lora") == 0) // OUT/train merge-lora ... (megart/lora_merge.h)
    return merge_lora_main(argc - 1, argv + 1, program, out, err);
  // Before MPI starts, the launcher's numbering says which process speaks for all: flag errors
  // and --help are the same on every rank and are printed once.
  const LaunchEnv launch = detect_launch_env();
  std::ostream silent(nullptr);
  std::ostream &log = launch.rank == 0 ? out : silent, &log_err = launch.rank == 0 ? err : silent;
  TrainFlags flags;
  if (std::optional<int> code = parse_train_flags(argc, argv, flags, log, log_err))
    return *code;
  std::unique_ptr<ProcessGrid> grid;
  const std::string failure = failure_of(
      [&] {
        const GridShape plan = grid_shape_of(program);
        // The table needs no processes: print it without mpirun, whatever the plan's size.
        if (flags.rank_layout && !launch.under_launcher) {
          log << format_rank_layout(plan) << std::flush;
          return;
        }
        // The world size is checked here, before anything else is.
        grid = ProcessGrid::launch(plan, argc > 0 && argv[0] ? argv[0] : "train",
                                   program.recompile_command ? program.recompile_command : "");
      },
      program);
  if (!failure.empty()) {
    log_err << ("error: " + failure + "\n") << std::flush;
    // MPI is already gone, so there is no barrier: the ranks that say nothing wait a moment,
    // because mpirun aborts the job at the first failing exit and rank 0's line could be lost.
    if (launch.under_launcher && launch.rank != 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    return 2;
  }
  if (!grid)
    return 0; // printed the rank layout
  // The grid (and with it MPI, when it started MPI) ends when this returns, errors included.
  return train_with(flags, program, *grid, out, err);
}

int train_main(int argc, char **argv, const ProgramDesc &program) {
  adopt_cpu_thread_defaults(); // may restart the process once: before anything else
  // A fixed threshold: every allocation of 256 KiB or more is its own mapping, returned to the
  // system when freed. glibc's default raises the threshold to the largest block freed so far,
  // after which the temporaries of collectives (MPI's among them) stay in the heap as resident
  // memory nobody planned.
  mallopt(M_MMAP_THRESHOLD, 256 * 1024);
  return train_main(argc, argv, program, std::cout, std::cerr);
}

} // namespace megart
