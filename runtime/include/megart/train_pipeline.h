// What the training loop adds for pipeline parallelism besides the executor: summing the
// gradients of weights tied between stages, which parameters the gradient norm counts, and the
// report of measured against predicted activation stash peaks.
#pragma once

#include "megart/comm.h"
#include "megart/param_store.h"
#include "megart/process_grid.h"
#include "megart/program.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace megart {

// The weights this rank's stage shares with other stages (GPT-2's wte on the first and the
// last stage) and the communicators joining those stages (same tp and dp coordinates).
class TiedGradients {
public:
  // Collective over pp: every rank of the pp group builds the groups of every set of stages
  // that shares a tensor (ProcessGrid::pp_subgroup). `store` holds this rank's stage.
  TiedGradients(const ProgramDesc &program, const ParamStore &store, const ProcessGrid &grid);
  ~TiedGradients();

  // Sums the tied gradients over the stages that hold them (one all-reduce per block, tensors
  // in name order). Collective over those groups. With `shards` (the store's flat layout, its
  // buckets reduce-scattered already), this rank's reduced shard of each block's own bucket.
  void sync(ParamStore &store, bool shards);
  // Which of the store's parameters the gradient norm counts here: all but the tied ones whose
  // first stage is another rank (Megatron counts the shared embedding on the first stage).
  const std::vector<char> &norm_counted() const { return norm_counted_; }

private:
  struct Tied {
    std::vector<int64_t> blocks; // store indices, in table order
    Communicator *group;
  };
  std::vector<std::unique_ptr<Communicator>> groups_;
  std::vector<Tied> tied_; // tensors in name order
  std::vector<char> norm_counted_;
};

// The stash peaks of every pp rank (measured by each rank's executor, all-gathered over pp),
// next to the compiler's predictions. Collective over pp.
struct StashPeaks {
  std::vector<int64_t> measured, predicted;
  bool match() const { return measured == predicted; }
  // "pipeline: stashed activations peak per pp rank: measured [4, 3], predicted [4, 3]"
  std::string describe() const;
};
StashPeaks gather_stash_peaks(const ProgramDesc &program, int64_t measured, Communicator &pp);

// Every pp rank's `mine`, in stage order. Collective over pp.
std::vector<CommunicationBytes> gather_sent_bytes(const CommunicationBytes &mine, Communicator &pp);

} // namespace megart
