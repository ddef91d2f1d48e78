// The iteration loop of a training run: microbatches with gradient accumulation, global
// gradient-norm clipping, AdamW with the learning-rate schedule, logging, metrics and
// checkpoints. Everything it is given has already been validated.
#pragma once

#include "megart/metrics.h"
#include "megart/param_store.h"
#include "megart/process_grid.h"
#include "megart/program.h"
#include "megart/train_data.h"
#include "megart/train_flags.h"
#include "megart/train_state.h"

#include <cstdint>
#include <ostream>

namespace megart {

class TensorBoardWriter;

struct TrainResult {
  int64_t iterations = 0;          // the last iteration run
  int64_t optimizer_steps = 0;      // iterations whose gradients were finite
  int64_t skipped_iterations = 0;   // non-finite gradient norm: no update
  double final_loss = 0;            // lm loss of the last iteration
};

// Runs flags.train_iters iterations on this rank of `grid`. Data parallelism: iteration k's
// global batch is samples (k-1)*B .. k*B-1 of the data order; dp rank r takes the contiguous
// share [r*B/dp, (r+1)*B/dp) as B/(b*dp) microbatches of b, each step scaled by
// dloss = 1/(microbatches per rank x dp), so the gradients summed over dp (in buckets of
// flags.ddp_bucket_size elements) are the average over the whole batch. The iteration's loss is
// the average over dp of each rank's mean microbatch loss. Clipping uses model_grad_norm over
// tp. Prints the Megatron log line to `out` every flags.log_interval iterations (averaged over
// the interval, as Megatron does), appends one JSON object per iteration to `metrics` when
// given, and saves checkpoints to flags.save (from dp rank 0, gathered over tp). The caller
// passes a silent `out` and no `metrics` on every rank but global rank 0.
//
// --fp16 (loss_scaler.h): dloss is multiplied by the loss scale; after the dp and tied-weight
// sums the gradients are multiplied by 1/scale, then the norm decides: a non-finite one skips
// the step and tells the scaler. The log line and metrics show the scale after its update.
//
// Pipeline parallelism (pp > 1): `store` holds this rank's stage; each iteration runs the
// stage's compiled schedule over all microbatches (PipelineExecutor), sums the dp gradients,
// then the gradients of weights tied between stages (TiedGradients), and the loss over pp (only
// the last stage has it). The gradient norm adds over tp and pp, a tied weight once. After the
// first iteration global rank 0 prints every pp rank's measured stash peak next to the
// compiler's prediction (a warning when they differ) and adds both to the first metrics record
// (pipeline_stash_peak_measured / _predicted). Checkpoints gather every stage's tensors into
// one file on global rank 0.
//
// The distributed optimizer (the program's or the stage's flat_layout; `store` then holds the
// flat buffers and store.sharded() this rank's shard of the moments): after the microbatches
// (and, with pp, the tied-weight sums, which need the whole gradients) the compiled
// sync_gradients reduce-scatters each bucket over dp (the runtime's own reduce-scatter for a
// program without one); unscaling, the norm (model_grad_norm), clipping and AdamW work on this
// rank's shard pieces; then the compiled gather_params (or the runtime's all-gather) gives every
// dp rank the updated parameters. A save first gathers the moments' shards (every dp rank takes
// part), so the checkpoint is the one a run without the layout writes.
//
// After the first iteration global rank 0 prints the device memory the run allocated
// (memory_report.h): its own per category, or with pipeline parallelism every pp stage's, and
// adds the exact bytes to the first metrics record ("memory").
//
// `start` is where the run begins (train_state.h): iteration start.iteration + 1 reads the data
// order from sample start.consumed_samples on, AdamW and the lr schedule continue from
// start.optimizer_steps, the loss scaler from start.loss_scaler. Each save writes the whole
// state (train_checkpoint.h), so a run resumed from it continues bit for bit.
// `resident_at_start`: the process's resident bytes before the training state was allocated
// (resident_memory.h; -1: unknown), for the first iteration's report of how much it grew.
// `valid` / `test` (null: none): evaluated every --eval-interval iterations and after the last
// (the test data after the last only), --eval-iters global batches each, forward only; with
// --skip-train once, on the loaded weights, and nothing is trained. `frozen`: a LoRA program's
// base model (the compiled functions read it; null: none).
TrainResult run_train_loop(const ProgramDesc &program, const TrainFlags &flags,
                           const TrainState &start, ParamStore &store, TrainData &data,
                           ProcessGrid &grid, MetricsFile *metrics, std::ostream &out,
                           int64_t resident_at_start = -1, TensorBoardWriter *tensorboard = nullptr,
                           TrainData *valid = nullptr, TrainData *test = nullptr,
                           const ParamStore *frozen = nullptr);

// Model FLOPs of one iteration (global_batch_size x ProgramDesc::model_flops_per_sample), or -1
// when the program does not know its FLOPs.
double model_flops_per_iteration(const ProgramDesc &program, int64_t global_batch_size);

} // namespace megart
