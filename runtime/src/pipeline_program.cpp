#include "megart/pipeline_program.h"

#include "megart/closing_actions.h"
#include "megart/error.h"
#include "megart/param_layout.h"
#include "megart/pipeline_executor.h"

#include <algorithm>
#include <optional>
#include <set>
#include <tuple>

namespace megart {

namespace {

[[noreturn]] void bad(const std::string &problem) {
  throw Error("compiled program: " + problem + "; regenerate with megac compile");
}

// The (sending chunk, microbatch) of each message one rank sends to / receives from a peer, in
// schedule order. A receive names the receiving chunk; `shift` turns it into the sender's.
using Messages = std::vector<std::pair<int32_t, int32_t>>;
Messages messages(const PipelineStageDesc &stage, PipeOpKind kind, int64_t peer, int32_t shift) {
  Messages out;
  for (int64_t i = 0; i < stage.num_ops; ++i) {
    const PipeOp &op = stage.ops[i];
    if (op.kind == kind && op.peer == peer)
      out.emplace_back(op.chunk + shift, op.microbatch);
  }
  return out;
}

std::string first_difference(const Messages &sent, const Messages &received) {
  for (size_t i = 0; i < std::max(sent.size(), received.size()); ++i) {
    auto text = [i](const Messages &m) {
      return i < m.size() ? "chunk " + std::to_string(m[i].first) + " microbatch " +
                                std::to_string(m[i].second)
                          : std::string("nothing");
    };
    if (i >= sent.size() || i >= received.size() || sent[i] != received[i])
      return "message " + std::to_string(i) + " is " + text(sent) + "'s on the sender, " +
             text(received) + "'s on the receiver";
  }
  return "";
}

bool same_block(const ParamDesc &a, const ParamDesc &b) {
  if (a.rank != b.rank || a.tp_split_dim != b.tp_split_dim || a.padded != b.padded)
    return false;
  for (int d = 0; d < a.rank; ++d)
    if (a.shape[d] != b.shape[d] || a.offsets[d] != b.offsets[d] ||
        a.full_shape[d] != b.full_shape[d])
      return false;
  return true;
}

// The blocks of tensor `name` in a stage's table, in table order.
std::vector<const ParamDesc *> blocks_of(const PipelineStageDesc &s, const std::string &name) {
  std::vector<const ParamDesc *> out;
  for (int64_t i = 0; i < s.num_params; ++i)
    if (name == s.params[i].name)
      out.push_back(&s.params[i]);
  return out;
}

// ZeRO-2 and ZeRO-3 keep only reduced shards, and sum a tied tensor's gradient between its stages shard by
// shard: in every stage that holds it, each of its blocks must sit alone in a bucket, of the same
// size in each. Checked on every stage's table (each rank has them all), so every rank refuses
// the same program before any collective.
void check_tied_buckets(const ProgramDesc &program) {
  const std::map<std::string, std::vector<int64_t>> stages = tensor_stages(program);
  auto bad = [](const std::string &problem) {
    throw Error("compiled program: " + problem + "; ZeRO-2 and ZeRO-3 sum tied gradients shard by shard and need "
                "each tied parameter alone in a bucket of the same size in every stage (regenerate the "
                "program with megac compile)");
  };
  for (const auto &[name, set] : stages) {
    if (set.size() < 2)
      continue;
    std::vector<int64_t> first_sizes;
    for (int64_t s : set) {
      const PipelineStageDesc &stage = program.stages[s];
      if (!stage.flat_layout || !stage.flat_layout->param_offsets || !stage.flat_layout->buckets)
        return; // refused where the layouts are read
      const FlatLayoutDesc &l = *stage.flat_layout;
      std::vector<int64_t> sizes;
      for (int64_t i = 0; i < stage.num_params; ++i) {
        if (name != stage.params[i].name)
          continue;
        const int64_t at = l.param_offsets[i];
        const FlatBucket *k = std::find_if(l.buckets, l.buckets + l.num_buckets, [&](const FlatBucket &b) {
          return at >= b.offset && at < b.offset + b.numel;
        });
        if (k == l.buckets + l.num_buckets)
          bad("stage " + std::to_string(s) + ": the tied parameter '" + name + "' lies in no gradient bucket");
        for (int64_t j = 0; j < stage.num_params; ++j)
          if (j != i && l.param_offsets[j] >= k->offset && l.param_offsets[j] < k->offset + k->numel)
            bad("stage " + std::to_string(s) + ": the tied parameter '" + name + "' shares gradient bucket " +
                std::to_string(k - l.buckets) + " with '" + stage.params[j].name + "'");
        sizes.push_back(k->numel);
      }
      if (s == set.front())
        first_sizes = sizes;
      else if (sizes != first_sizes)
        bad("the tied parameter '" + name + "' has gradient buckets of different sizes in stages " +
            std::to_string(set.front()) + " and " + std::to_string(s));
    }
  }
}

} // namespace

void validate_pipeline_program(const ProgramDesc &p) {
  const int64_t P = p.pipeline_parallel_size, V = p.virtual_pipeline_size,
                m = p.num_microbatches;
  if (!p.stages)
    bad("pipeline_parallel_size is " + std::to_string(P) + " but there are no stages");
  if (m < 1)
    bad("num_microbatches is " + std::to_string(m) + "; a pipeline needs at least 1");
  if (V < 1)
    bad("virtual_pipeline_size is " + std::to_string(V) + "; it must be at least 1");
  for (int64_t r = 0; r < P; ++r) {
    const PipelineStageDesc &s = p.stages[r];
    if (s.num_params < 1 || !s.params)
      bad("stage " + std::to_string(r) + " has no parameters");
    for (int64_t i = 0; i < s.num_params; ++i)
      if (!s.params[i].name)
        bad("stage " + std::to_string(r) + "'s parameter " + std::to_string(i) + " has no name");
    validate_pipeline_stage(s, r, P, V, m);
  }
  // Neighbouring chunks agree on the activation's size.
  for (int64_t c = 0; c + 1 < P * V; ++c) {
    const ChunkDesc &a = p.stages[c % P].chunks[c / P], &b = p.stages[(c + 1) % P].chunks[(c + 1) / P];
    if (a.output_numel != b.input_numel || a.element_bytes != b.element_bytes)
      bad("chunk " + std::to_string(c) + "'s output has " + std::to_string(a.output_numel) + " elements of " +
          std::to_string(a.element_bytes) + " bytes but chunk " + std::to_string(c + 1) + "'s input has " +
          std::to_string(b.input_numel) + " of " + std::to_string(b.element_bytes));
  }
  // Every message is received by the op meant for it: same sequence on both sides.
  for (int64_t from = 0; from < P; ++from)
    for (int64_t to = 0; to < P; ++to) {
      const struct { PipeOpKind send, recv; int32_t shift; const char *what; } kinds[] = {
          {PipeOpKind::SendActivation, PipeOpKind::RecvActivation, -1, "activations"},
          {PipeOpKind::SendGrad, PipeOpKind::RecvGrad, 1, "gradients"}};
      for (const auto &k : kinds) {
        const Messages sent = messages(p.stages[from], k.send, to, 0);
        const Messages received = messages(p.stages[to], k.recv, from, k.shift);
        if (sent != received)
          bad("pp rank " + std::to_string(from) + " sends " + std::to_string(sent.size()) + " " +
              k.what + " to pp rank " + std::to_string(to) + ", which receives " +
              std::to_string(received.size()) + " and they do not pair up: " +
              first_difference(sent, received));
      }
    }
  // A tied tensor's gradients are summed block by block between its stages.
  for (const auto &[name, stages] : tensor_stages(p)) {
    const std::vector<const ParamDesc *> first = blocks_of(p.stages[stages[0]], name);
    for (size_t i = 1; i < stages.size(); ++i) {
      const std::vector<const ParamDesc *> other = blocks_of(p.stages[stages[i]], name);
      bool same = other.size() == first.size();
      for (size_t b = 0; same && b < first.size(); ++b)
        same = same_block(*first[b], *other[b]);
      if (!same)
        bad("tensor '" + name + "' is held by stages " + std::to_string(stages[0]) + " and " +
            std::to_string(stages[i]) + " in different blocks; a tied weight needs the same "
            "blocks on every stage");
    }
  }
  // Every stage holding a tied tensor sums it with the others, all at the same point of the
  // iteration; the others do not.
  std::set<int64_t> tied;
  for (const auto &[name, stages] : tensor_stages(p))
    if (stages.size() > 1)
      tied.insert(stages.begin(), stages.end());
  std::optional<TiedSumPlace> place;
  for (int64_t r = 0; r < P; ++r) {
    const TiedSumPlace here = tied_sum_place(p.stages[r].ops, p.stages[r].num_ops);
    if ((here.kind >= 0) != (tied.count(r) > 0))
      bad("stage " + std::to_string(r) + (here.kind >= 0 ? " sums tied gradients but holds no weight another stage holds"
                                                         : " holds a weight another stage holds but its table has "
                                                           "no TiedSum"));
    if (here.kind < 0)
      continue;
    if (place && (place->kind != here.kind || place->before_sync != here.before_sync))
      bad("stage " + std::to_string(r) + " sums its tied gradients otherwise than stage " + std::to_string(*tied.begin()));
    place = here;
  }
  // Whole gradients exist only without ZeRO-2/3, and only until a reduce-scatter leaves a shard.
  if (place && place->kind == static_cast<int32_t>(PipeOpKind::TiedSum))
    for (int64_t r : tied)
      if (const FlatLayoutDesc *flat = p.stages[r].flat_layout;
          flat && (flat->sharding != DataParallelSharding::Optim || !place->before_sync || p.overlap_grad_reduce))
        bad("stage " + std::to_string(r) + " sums whole tied gradients " +
            (flat->sharding != DataParallelSharding::Optim ? "but ZeRO-2/3 keeps only reduced shards of them"
                                                           : "after the reduce-scatter has left a shard of them"));
  if (place && place->kind == static_cast<int32_t>(PipeOpKind::TiedSumShards)) { // summed as shards
    for (int64_t r : tied)
      if (!p.stages[r].flat_layout)
        bad("stage " + std::to_string(r) + " sums tied gradient shards but has no flat_layout to shard them");
    check_tied_buckets(p);
  }
}

std::map<std::string, std::vector<int64_t>> tensor_stages(const ProgramDesc &p, bool frozen) {
  std::map<std::string, std::vector<int64_t>> out;
  for (int64_t r = 0; r < p.pipeline_parallel_size; ++r) {
    const PipelineStageDesc &s = p.stages[r];
    const ParamDesc *params = frozen ? s.frozen_params : s.params;
    const int64_t n = frozen ? s.num_frozen_params : s.num_params;
    for (int64_t i = 0; i < n; ++i) {
      std::vector<int64_t> &stages = out[params[i].name];
      if (stages.empty() || stages.back() != r)
        stages.push_back(r);
    }
  }
  return out;
}

int64_t stage_tensor_elements(const PipelineStageDesc &s) {
  return tensor_elements(s.params, group_by_tensor(s.params, s.num_params));
}

int64_t model_tensor_elements(const ProgramDesc &p) {
  std::set<std::string> seen;
  int64_t n = 0;
  for (int64_t r = 0; r < p.pipeline_parallel_size; ++r) {
    const PipelineStageDesc &s = p.stages[r];
    std::vector<CheckpointTensor> first_here; // tensors no earlier stage holds
    for (CheckpointTensor &t : group_by_tensor(s.params, s.num_params))
      if (seen.insert(t.name).second)
        first_here.push_back(std::move(t));
    n += tensor_elements(s.params, first_here);
  }
  return n;
}

int64_t model_tensor_count(const ProgramDesc &p) {
  return static_cast<int64_t>(tensor_stages(p).size());
}

std::string describe_pipeline(const ProgramDesc &p) {
  const int64_t P = p.pipeline_parallel_size;
  std::string s = "pp " + std::to_string(P) + " x vpp " + std::to_string(p.virtual_pipeline_size) +
                  ", " + (p.pipeline_schedule ? p.pipeline_schedule : "compiled") + " schedule, " +
                  std::to_string(p.num_microbatches) + " microbatches";
  for (int64_t r = 0; r < P; ++r) {
    const PipelineStageDesc &st = p.stages[r];
    s += "; stage " + std::to_string(r) + " holds chunk" + (st.num_chunks > 1 ? "s " : " ");
    for (int64_t c = 0; c < st.num_chunks; ++c)
      s += (c ? ", " : "") + std::to_string(st.chunks[c].chunk);
    s += " (" + std::to_string(stage_tensor_elements(st)) + " parameters)";
  }
  return s;
}

} // namespace megart
