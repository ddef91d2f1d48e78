// The global gradient norm of a model whose parameters are split over tensor-parallel ranks:
// the norm the single-rank program would compute, which clipping needs on every rank.
#pragma once

#include "megart/comm.h"
#include "megart/param_store.h"

namespace megart {

// sqrt of the sum of squares of every gradient of the whole model. Each tp rank adds the
// squares of its tp-split blocks (disjoint parts of the model) and, on tp rank 0 only, those of
// the replicated parameters (tp_split_dim -1: the same gradient on every tp rank, counted
// once); then a double all-reduce over `tp`. Vocabulary padding adds nothing: the program
// leaves its gradients zero (ParamDesc::padded). Collective over `tp`; every rank gets the same
// value (non-finite on all ranks when any gradient is non-finite).
double model_grad_norm(const ParamStore &store, Communicator &tp);

} // namespace megart
