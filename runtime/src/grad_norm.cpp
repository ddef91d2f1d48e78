#include "megart/grad_norm.h"

#include "megart/optimizer.h"

#include <cmath>
#include <utility>
#include <vector>

namespace megart {

double model_grad_norm(const ParamStore &store, Communicator &tp) {
  // Table order, as the single-rank sum: with tp 1 the result is bit-identical to it.
  std::vector<std::pair<const float *, int64_t>> counted;
  for (int64_t i = 0; i < store.size(); ++i)
    if (store.tp_split(i) || tp.rank() == 0)
      counted.emplace_back(store.grad(i), store.numel(i));
  double sum = grad_sum_of_squares(counted);
  tp.all_reduce_sum(&sum, 1);
  return std::sqrt(sum);
}

} // namespace megart
