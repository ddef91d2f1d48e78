#include "megart/grad_norm.h"

#include "megart/optimizer.h"

#include <cmath>
#include <utility>
#include <vector>

namespace megart {

double model_grad_norm(const ParamStore &store, Communicator &tp) {
  SelfCommunicator one_stage;
  return model_grad_norm(store, tp, one_stage, {});
}

double model_grad_norm(const ParamStore &store, Communicator &tp, Communicator &pp,
                       const std::vector<char> &counted) {
  // Table order, as the single-rank sum: with tp 1 and pp 1 the result is bit-identical to it.
  std::vector<std::pair<const float *, int64_t>> grads;
  for (int64_t i = 0; i < store.size(); ++i)
    if ((store.tp_split(i) || tp.rank() == 0) && (counted.empty() || counted[i]))
      grads.emplace_back(store.grad(i), store.numel(i));
  double sum = store.device().sum_of_squares(grads);
  tp.all_reduce_sum(&sum, 1);
  pp.all_reduce_sum(&sum, 1);
  return std::sqrt(sum);
}

double sharded_grad_norm(const ParamStore &store, Communicator &tp, Communicator &pp,
                         const std::vector<char> &counted) {
  const DistributedOptimizerState &state = *store.sharded();
  std::vector<std::pair<const float *, int64_t>> grads;
  const MutableTensorList &pieces = state.shard_grads();
  for (size_t k = 0; k < pieces.size(); ++k) {
    const int64_t i = state.piece_param(static_cast<int64_t>(k));
    if ((store.tp_split(i) || tp.rank() == 0) && (counted.empty() || counted[i]))
      grads.emplace_back(pieces[k].first, pieces[k].second);
  }
  double sum = store.device().sum_of_squares(grads);
  state.group().all_reduce_sum(&sum, 1);
  tp.all_reduce_sum(&sum, 1);
  pp.all_reduce_sum(&sum, 1);
  return std::sqrt(sum);
}

} // namespace megart
