#include "megart/train_pipeline.h"

#include "megart/error.h"
#include "megart/pipeline_program.h"

#include <map>

namespace megart {

TiedGradients::TiedGradients(const ProgramDesc &program, const ParamStore &store,
                             const ProcessGrid &grid)
    : norm_counted_(static_cast<size_t>(store.size()), 1) {
  const int64_t here = grid.coord().pp;
  const std::map<std::string, std::vector<int64_t>> stages = tensor_stages(program);
  // One group per distinct set of stages, built in the same order on every rank.
  std::map<std::vector<int64_t>, Communicator *> group_of;
  for (const auto &[name, set] : stages) {
    if (set.size() < 2 || group_of.count(set))
      continue;
    const bool embedding = set.size() == 2 && set.front() == 0 &&
                           set.back() == program.pipeline_parallel_size - 1;
    groups_.push_back(grid.pp_subgroup(set, embedding ? "embedding" : "tied"));
    group_of[set] = groups_.back().get(); // null where this rank is not in the set
  }
  // This stage's tied tensors in name order, the one order every stage agrees on.
  std::map<std::string, std::vector<int64_t>> mine;
  for (const CheckpointTensor &t : store.tensors())
    if (stages.at(t.name).size() >= 2)
      mine[t.name] = t.blocks;
  for (const auto &[name, blocks] : mine) {
    const std::vector<int64_t> &set = stages.at(name);
    tied_.push_back({blocks, group_of.at(set)});
    if (set.front() != here)
      for (int64_t b : blocks)
        norm_counted_[static_cast<size_t>(b)] = 0;
  }
}

TiedGradients::~TiedGradients() = default;

void TiedGradients::sync(ParamStore &store, bool shards) {
  const DistributedOptimizerState *sharded = store.sharded();
  if (shards && !sharded)
    throw Error("tied-weight sums on gradient shards need the distributed optimizer's flat layout");
  for (const Tied &t : tied_)
    for (int64_t b : t.blocks) {
      if (!shards) {
        t.group->all_reduce_sum(store.grad(b), store.numel(b));
        continue;
      }
      // ZeRO-2: this rank's reduced shard of the block's own bucket, the same shard in each stage.
      const int64_t k = sharded->bucket_of(b);
      t.group->all_reduce_sum(sharded->bucket_grad_shard(k), sharded->shard_size(k));
    }
}

std::string StashPeaks::describe() const {
  auto list = [](const std::vector<int64_t> &v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i)
      s += (i ? ", " : "") + std::to_string(v[i]);
    return s + "]";
  };
  return "pipeline: stashed activations peak per pp rank: measured " + list(measured) +
         ", predicted " + list(predicted);
}

std::vector<CommunicationBytes> gather_sent_bytes(const CommunicationBytes &mine, Communicator &pp) {
  // Doubles summed with zeros: every stage's numbers arrive exactly.
  std::vector<double> all(static_cast<size_t>(4 * pp.size()), 0.0);
  const size_t at = static_cast<size_t>(4 * pp.rank());
  all[at] = mine.tp, all[at + 1] = mine.dp, all[at + 2] = mine.pp, all[at + 3] = mine.ep;
  pp.all_reduce_sum(all.data(), static_cast<int64_t>(all.size()));
  std::vector<CommunicationBytes> out(static_cast<size_t>(pp.size()));
  for (size_t r = 0; r < out.size(); ++r)
    out[r] = {all[4 * r], all[4 * r + 1], all[4 * r + 2], all[4 * r + 3]};
  return out;
}

StashPeaks gather_stash_peaks(const ProgramDesc &program, int64_t measured, Communicator &pp) {
  // Floats carry small integers exactly; the communicators move floats.
  std::vector<float> all(static_cast<size_t>(pp.size()));
  const float mine = static_cast<float>(measured);
  pp.all_gather(all.data(), &mine, 1);
  StashPeaks peaks;
  for (int64_t r = 0; r < pp.size(); ++r) {
    peaks.measured.push_back(static_cast<int64_t>(all[static_cast<size_t>(r)]));
    peaks.predicted.push_back(program.stages[r].predicted_peak_stash);
  }
  return peaks;
}

} // namespace megart
