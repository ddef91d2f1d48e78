// Everything a rank checks and allocates before it trains: the program, the flags against it,
// the parameter layout, the data, the output folders, then the weights (initialised or loaded)
// and, on the logging rank, the metrics file. Split from train_main so the ranks can agree that
// every one of them is ready before any starts training.
#pragma once

#include "megart/metrics.h"
#include "megart/param_store.h"
#include "megart/process_grid.h"
#include "megart/program.h"
#include "megart/save_lock.h"
#include "megart/tensorboard.h"
#include "megart/train_data.h"
#include "megart/train_flags.h"
#include "megart/train_state.h"

#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace megart {

// The shard degree of the program's flat layout (stage 0's with pp) where it divides dp and is
// less than it (hybrid sharding), else dp.
int64_t hybrid_shard_degree(const ProgramDesc &program, int64_t dp);

// The data of split `which` (0 train, 1 valid, 2 test): --train-data-path (and its valid / test
// siblings) when given, else --data-path with --split. Null when the split has no data (valid or
// test without a path or a --split share); the training split must have some.
std::unique_ptr<TrainData> open_split_data(const TrainFlags &flags, int which, const ProgramDesc &program);

struct TrainSetup {
  std::unique_ptr<TrainData> data;
  std::unique_ptr<TrainData> valid, test; // null: none (or --eval-iters 0)
  std::unique_ptr<ParamStore> store; // this rank's blocks (of its stage's tensors with pp > 1)
  // The frozen parameters (LoRA's base model), likewise; null when the program has none.
  std::unique_ptr<ParamStore> frozen;
  std::unique_ptr<MetricsFile> metrics; // global rank 0 only, opened by open_metrics
  std::unique_ptr<TensorBoardWriter> tensorboard; // --tensorboard-dir: global rank 0 only, likewise
  // Where the run starts: iteration 0 with this run's seed, or a resumed checkpoint's state.
  TrainState start;
  std::string weights_from;   // "initialised with seed 1234", "loaded from ...", "resumed from ..."
  std::vector<std::string> removed_temps; // what a killed save had left in --save (rank 0)
  std::optional<SaveLock> save_lock;      // --save held by this run (global rank 0)
};

// The checks (throwing megart::Error naming the thing, the value and the fix) and the
// allocations. Local to this rank: no collectives, so a failing rank cannot leave others waiting.
// Resolves the flags' defaults in place.
TrainSetup prepare_training(TrainFlags &flags, const ProgramDesc &program, const ProcessGrid &grid);

// Opens --metrics-file on global rank 0 (it truncates the file, so only once every rank is ready).
void open_metrics(TrainSetup &setup, const TrainFlags &flags, const ProcessGrid &grid);

// The start-up summary global rank 0 prints: program, plan, parameters, data, schedule.
void print_header(std::ostream &out, const ProgramDesc &program, const TrainFlags &flags,
                  const ProcessGrid &grid, const TrainSetup &setup);

} // namespace megart
