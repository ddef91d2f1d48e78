// NCCL communicators for the CUDA backend, one per grid axis, bootstrapped over the MPI (host)
// communicator of the same ranks.
#pragma once

#include "megart/comm.h"

#include <memory>

namespace megart::cuda {

// A communicator over host's ranks (same rank numbers) for buffers of either kind, told apart by
// pointer (cudaPointerGetAttributes: device or managed memory is the device's):
//  - collectives on device buffers run through NCCL on compute_stream(), in stream order with
//    the kernels, and return before they finish; in-place forms as comm.h documents them;
//  - iall_reduce_sum of a device buffer runs on a high-priority side stream of its own, after
//    the compute_stream() work issued before the call, while later kernels go on; test() /
//    wait() see it done and order compute_stream() after it, and every later collective waits
//    for it (one NCCL communicator's calls must not overlap);
//  - isend / irecv of device buffers run through NCCL on a stream of their own per (peer, tag,
//    direction), after the compute_stream() work issued before the call; wait() polls until the
//    transfer is done (or the timeout) and orders compute_stream() after a receive;
//  - calls on host buffers (the loss, the gradient norm's double, stash-peak reports) go to
//    `host`, which it keeps, as does barrier() once this GPU's queued work is done.
// Messages of one tag between two ranks must be all device or all host buffers. Size 1 needs no
// NCCL: device copies only, and no point-to-point. Collective over host's ranks (rank 0 makes
// the ncclUniqueId and broadcasts it over `host`). Its timeout is host's, and set_timeout sets
// both. Destroying it waits, up to the timeout, for its queued collectives and for the peers to
// release theirs (every rank destroys it); transfers still in flight are aborted.
std::unique_ptr<Communicator> nccl_communicator(std::unique_ptr<Communicator> host);

} // namespace megart::cuda
