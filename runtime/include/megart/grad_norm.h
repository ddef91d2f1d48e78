// The global gradient norm of a model whose parameters are split over tensor-parallel ranks and
// pipeline stages: the norm the single-rank program would compute, which clipping needs on
// every rank.
#pragma once

#include "megart/comm.h"
#include "megart/param_store.h"

#include <vector>

namespace megart {

// sqrt of the sum of squares of every gradient of the whole model. Each tp rank adds the
// squares of its tp-split blocks (disjoint parts of the model) and, on tp rank 0 only, those of
// the replicated parameters (tp_split_dim -1: the same gradient on every tp rank, counted
// once); then a double all-reduce over `tp`. Vocabulary padding adds nothing: the program
// leaves its gradients zero (ParamDesc::padded). Collective over `tp`; every rank gets the same
// value (non-finite on all ranks when any gradient is non-finite).
double model_grad_norm(const ParamStore &store, Communicator &tp);

// The same for one stage of a pipeline: parameter i adds its squares only where counted[i] is
// non-zero (empty: all), so a weight tied between stages counts once - on its first stage, as
// Megatron counts the shared embedding - and the sum goes over tp, then over pp. Collective over
// tp and pp.
//
// With the distributed optimizer (store.sharded()), after the reduce-scatter, each rank holds the
// reduced gradients of its shard pieces only: a piece adds its squares where its parameter would
// (tp-split, or replicated on tp rank 0; counted[i]), and the sum goes over the shard group first
// (every element of the stage once), then tp, then pp. Both overloads do so.
//
// With expert parallelism (`ep`: the store's ep group) the experts' blocks (ep_split) add their
// squares on every ep rank, the rest on ep rank 0 only, and the sum goes over ep too.
double model_grad_norm(const ParamStore &store, Communicator &tp, Communicator &pp,
                       const std::vector<char> &counted, Communicator *ep = nullptr);

} // namespace megart
