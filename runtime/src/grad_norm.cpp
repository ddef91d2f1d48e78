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
                       const std::vector<char> &counted, Communicator *ep) {
  // Sharded, every rank's shards are distinct pieces (an ep rank's experts sharded over the dp
  // ranks holding the same): the sum over the shard group covers each once, experts included.
  const DistributedOptimizerState *sharded = store.sharded();
  if (sharded)
    ep = nullptr;
  const bool first_ep_rank = !ep || ep->rank() == 0;
  auto counts = [&](int64_t i) {
    return (store.tp_split(i) || tp.rank() == 0) && (store.ep_split(i) || first_ep_rank) &&
           (counted.empty() || counted[i]);
  };
  // Table order, as the single-rank sum (bit-identical to it at tp 1, pp 1); sharded, buffer order.
  std::vector<std::pair<const float *, int64_t>> grads;
  if (sharded) {
    const MutableTensorList &pieces = sharded->shard_grads();
    for (size_t k = 0; k < pieces.size(); ++k)
      if (counts(sharded->piece_param(static_cast<int64_t>(k))))
        grads.emplace_back(pieces[k].first, pieces[k].second);
  } else {
    for (int64_t i = 0; i < store.size(); ++i)
      if (counts(i))
        grads.emplace_back(store.grad(i), store.numel(i));
  }
  double sum = store.device().sum_of_squares(grads);
  if (sharded)
    sharded->group().all_reduce_sum(&sum, 1);
  tp.all_reduce_sum(&sum, 1);
  if (ep)
    ep->all_reduce_sum(&sum, 1);
  pp.all_reduce_sum(&sum, 1);
  return std::sqrt(sum);
}

} // namespace megart
