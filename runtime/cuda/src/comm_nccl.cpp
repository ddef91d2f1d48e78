// The NCCL communicator: construction, collectives, and what it shares with the point-to-point
// half (comm_nccl_p2p.cpp). A call on device memory runs through NCCL on compute_stream(), in
// stream order with the kernels (it returns before the transfer is done); a call on host memory
// (the loss, the gradient norm's double) goes to the host communicator it wraps.
#include "comm_nccl_impl.h"

#include "megart/comm_mpi.h"
#include "megart/cuda/comm_nccl.h"
#include "megart/cuda/device.h"
#include "megart/cuda/kernels.h"
#include "megart/error.h"
#include "megart/launch_env.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace megart::cuda {

std::unique_ptr<Communicator> nccl_communicator(std::unique_ptr<Communicator> host) {
  return std::make_unique<nccl::NcclCommunicator>(std::move(host));
}

namespace nccl {

void fail(ncclResult_t rc, const std::string &call, const std::string &context) {
  std::string message = "NCCL error in " + call + ": " + ncclGetErrorString(rc);
  const char *last = ncclGetLastError(nullptr);
  if (last && *last)
    message += std::string(" (") + last + ")";
  if (!context.empty())
    message += ", in " + context;
  throw Error(message);
}

ncclResult_t nccl_check(ncclResult_t rc, const char *call, const std::string &context) {
  if (rc != ncclSuccess && rc != ncclInProgress)
    fail(rc, call, context);
  return rc;
}

ncclResult_t state_of(ncclComm_t comm) {
  ncclResult_t state = ncclSuccess;
  nccl_check(ncclCommGetAsyncError(comm, &state), "ncclCommGetAsyncError");
  return state;
}

P2pOp::~P2pOp() {
  // Destroying an event still pending on a stream is allowed: CUDA frees it when it completes.
  if (ready)
    cudaEventDestroy(ready);
  if (done)
    cudaEventDestroy(done);
}

bool on_device(const void *p) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
    cudaGetLastError(); // not a sticky error: clear it
    return false;
  }
  return attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
}

namespace {

// Whether a collective's two buffers are on the device; both must be on the same side.
bool both_on_device(const void *out, const void *in, const char *method) {
  const bool device_out = on_device(out);
  if (device_out != on_device(in))
    throw Error(std::string(method) + " with its output in " + (device_out ? "device" : "host") +
                " memory and its input in " + (device_out ? "host" : "device") +
                " memory: both must be on the same side");
  return device_out;
}

void check_count(int64_t n, const char *method) {
  if (n < 0)
    throw Error(std::string(method) + " of " + std::to_string(n) + " elements");
}

bool overlaps(const float *a, int64_t na, const float *b, int64_t nb) { return a < b + nb && b < a + na; }

// Device memory for one call, freed in stream order after the work enqueued on it.
class StreamTemp {
public:
  explicit StreamTemp(int64_t floats) {
    cuda::check(cudaMallocAsync(reinterpret_cast<void **>(&data_), sizeof(float) * floats, compute_stream()),
                "cudaMallocAsync (NCCL communicator scratch)");
  }
  ~StreamTemp() { cudaFreeAsync(data_, compute_stream()); }
  StreamTemp(const StreamTemp &) = delete;
  StreamTemp &operator=(const StreamTemp &) = delete;
  float *data() const { return data_; }

private:
  float *data_ = nullptr;
};

void copy_on_device(float *dst, const float *src, int64_t n) { copy_buffer(dst, src, sizeof(float) * n); }

// memmove on the device: cudaMemcpy's ranges must not overlap.
void move_on_device(float *dst, const float *src, int64_t n) {
  if (dst == src || n == 0)
    return;
  if (!overlaps(dst, n, src, n)) {
    copy_on_device(dst, src, n);
    return;
  }
  StreamTemp temp(n);
  copy_on_device(temp.data(), src, n);
  copy_on_device(dst, temp.data(), n);
}

} // namespace

NcclCommunicator::NcclCommunicator(std::unique_ptr<Communicator> host) : host_(std::move(host)) {
  if (!host_)
    throw Error("nccl_communicator needs the host communicator of its ranks");
  rank_ = host_->rank();
  size_ = host_->size();
  if (const auto *mpi = dynamic_cast<const MpiCommunicator *>(host_.get()))
    axis_ = mpi->axis();
  world_rank_ = detect_launch_env().rank;
  Communicator::set_timeout(host_->timeout());
  if (size_ == 1)
    return; // no NCCL: collectives are copies or nothing
  try {
    init_collectives();
  } catch (...) {
    release();
    throw;
  }
}

// Collective over host's ranks: rank 0 makes the id and broadcasts it over the host
// communicator, with a flag saying whether it could, so that the others fail with it instead of
// waiting for a communicator that never forms.
void NcclCommunicator::init_collectives() {
  device(); // makes this process's GPU current: NCCL binds the communicator to it
  IdMessage message{};
  std::string failure;
  if (rank_ == 0) {
    ncclUniqueId id{};
    const ncclResult_t rc = ncclGetUniqueId(&id);
    if (rc == ncclSuccess) {
      message[0] = 1;
      std::memcpy(&message[1], &id, sizeof id);
    } else {
      failure = std::string("NCCL error in ncclGetUniqueId: ") + ncclGetErrorString(rc);
    }
  }
  host_->broadcast(message.data(), static_cast<int64_t>(message.size()), 0);
  // Every rank has the id before any polls NCCL only: an MPI that defers the broadcast's
  // progress to later MPI calls would otherwise leave a rank without it.
  host_->barrier();
  if (message[0] != 1)
    throw Error(rank_ == 0 ? failure
                           : "rank 0 of the " + axis_text() +
                                 " could not create the NCCL communicator (its error says why)");
  ncclUniqueId id{};
  std::memcpy(&id, &message[1], sizeof id);
  name_ = "megart " + axis_text();
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0; // the setup is polled, with the timeout
  config.commName = name_.c_str();
  const ncclResult_t rc = ncclCommInitRankConfig(&comm_, size_, id, rank_, &config);
  settle(comm_, rc, "ncclCommInitRankConfig", "creating the NCCL communicator");
}

NcclCommunicator::~NcclCommunicator() { release(); }

// Idle communicators are finalized all at once, then destroyed: finalizing waits until the peers
// finalize too, so one at a time could wait on a peer that finalizes the same ones in another
// order. Those with work pending (error paths), or whose peers do not finalize within the
// timeout, are aborted, which never waits.
void NcclCommunicator::release() noexcept {
  std::vector<ncclComm_t> finalizing;
  auto retire = [&finalizing](ncclComm_t comm, bool idle) {
    if (!comm)
      return;
    ncclResult_t state = ncclInternalError;
    const bool quiet = idle && ncclCommGetAsyncError(comm, &state) == ncclSuccess && state == ncclSuccess;
    const ncclResult_t rc = quiet ? ncclCommFinalize(comm) : ncclInternalError;
    if (rc == ncclSuccess || rc == ncclInProgress)
      finalizing.push_back(comm);
    else
      ncclCommAbort(comm);
  };
  for (auto &[key, c] : channels_)
    retire(c->comm, c->state == Channel::State::kReady && c->queue.empty() &&
                        cudaStreamQuery(c->stream) == cudaSuccess);
  if (comm_) {
    // The collectives still queued on the stream (a healthy end) are let finish first: a
    // communicator aborted under them would leave them to run on freed resources. The side
    // stream's are drained with them.
    if (side_last_)
      cudaStreamWaitEvent(compute_stream(), side_last_, 0);
    Poll drain(timeout());
    while (cudaStreamQuery(compute_stream()) == cudaErrorNotReady && !drain.expired())
      drain.pause();
    retire(comm_, cudaStreamQuery(compute_stream()) == cudaSuccess);
  }
  comm_ = nullptr;
  Poll poll(timeout());
  while (!finalizing.empty()) {
    const bool give_up = poll.expired();
    for (size_t i = 0; i < finalizing.size();) {
      ncclResult_t state = ncclInternalError;
      ncclCommGetAsyncError(finalizing[i], &state);
      if (state == ncclInProgress && !give_up) {
        ++i;
        continue;
      }
      if (state == ncclSuccess)
        ncclCommDestroy(finalizing[i]);
      else
        ncclCommAbort(finalizing[i]);
      finalizing.erase(finalizing.begin() + static_cast<std::ptrdiff_t>(i));
    }
    if (!finalizing.empty())
      poll.pause();
  }
  for (auto &[key, c] : channels_)
    if (c->stream)
      cudaStreamDestroy(c->stream);
  channels_.clear(); // their host requests go before host_
  inboxes_.clear();
  if (side_stream_)
    cudaStreamDestroy(side_stream_);
  if (side_ready_)
    cudaEventDestroy(side_ready_);
  if (side_last_)
    cudaEventDestroy(side_last_);
  side_stream_ = nullptr;
  side_ready_ = side_last_ = nullptr;
}

void NcclCommunicator::set_timeout(double seconds) {
  Communicator::set_timeout(seconds);
  host_->set_timeout(seconds);
}

std::string NcclCommunicator::rank_name(int r) const {
  return (axis_.empty() ? "rank " : axis_ + " rank ") + std::to_string(r);
}

// "rank 0 (pp rank 0) timed out after 10 s in recv from pp rank 1 during iteration 3, ...", as
// MpiCommunicator says it.
void NcclCommunicator::timed_out(const std::string &what, const std::string &cause) const {
  const std::string activity = comm_activity().describe();
  throw Error("rank " + std::to_string(world_rank_) + " (" + rank_name(rank_) + ") timed out after " +
              seconds_text(timeout()) + " s in " + what + (activity.empty() ? "" : " during " + activity) +
              ": " + cause + "; raise --distributed-timeout-minutes if it is only slow");
}

void NcclCommunicator::settle(ncclComm_t comm, ncclResult_t rc, const char *call, const char *method) {
  if (rc == ncclSuccess) // the usual case: enqueued, no text built
    return;
  const std::string what = std::string(method) + " over the " + axis_text();
  nccl_check(rc, call, what);
  Poll poll(timeout());
  for (;;) {
    const ncclResult_t state = state_of(comm);
    if (state == ncclSuccess)
      return;
    if (state != ncclInProgress)
      fail(state, call, what);
    if (poll.expired())
      timed_out(what, "another rank of the axis may have died or hung, or the ranks did not make the "
                      "same collective calls");
    poll.pause();
  }
}

void NcclCommunicator::all_reduce(void *data, int64_t n, ncclDataType_t type, ncclRedOp_t op,
                                  const char *method) {
  check_count(n, method);
  if (size_ == 1 || n == 0)
    return;
  settle(comm_, ncclAllReduce(data, data, static_cast<size_t>(n), type, op, comm_, collective_stream()),
         "ncclAllReduce", method);
}

void NcclCommunicator::all_reduce_sum(float *data, int64_t n) {
  if (!on_device(data))
    return host_->all_reduce_sum(data, n);
  all_reduce(data, n, ncclFloat, ncclSum, "all_reduce_sum(float)");
}

void NcclCommunicator::all_reduce_max(float *data, int64_t n) {
  if (!on_device(data))
    return host_->all_reduce_max(data, n);
  all_reduce(data, n, ncclFloat, ncclMax, "all_reduce_max(float)");
}

void NcclCommunicator::all_reduce_sum(double *data, int64_t n) {
  if (!on_device(data))
    return host_->all_reduce_sum(data, n);
  all_reduce(data, n, ncclDouble, ncclSum, "all_reduce_sum(double)");
}

void NcclCommunicator::all_reduce_sum_bf16(uint16_t *data, int64_t n) {
  if (!on_device(data))
    return host_->all_reduce_sum_bf16(data, n);
  all_reduce(data, n, ncclBfloat16, ncclSum, "all_reduce_sum(bf16)");
}

void NcclCommunicator::all_gather(float *out, const float *in, int64_t n) {
  if (!both_on_device(out, in, "all_gather"))
    return host_->all_gather(out, in, n);
  check_count(n, "all_gather");
  if (size_ == 1)
    return move_on_device(out, in, n);
  if (n == 0)
    return;
  // In place (NCCL's form too) when `in` is this rank's chunk of `out`; NCCL does not allow
  // other overlaps, so such an input is copied first.
  const float *send = in;
  std::unique_ptr<StreamTemp> copy;
  if (in != out + static_cast<int64_t>(rank_) * n && overlaps(in, n, out, n * size_)) {
    copy = std::make_unique<StreamTemp>(n);
    copy_on_device(copy->data(), in, n);
    send = copy->data();
  }
  settle(comm_, ncclAllGather(send, out, static_cast<size_t>(n), ncclFloat, comm_, collective_stream()),
         "ncclAllGather", "all_gather");
}

void NcclCommunicator::reduce_scatter_sum(float *out, const float *in, int64_t n) {
  if (!both_on_device(out, in, "reduce_scatter_sum"))
    return host_->reduce_scatter_sum(out, in, n);
  check_count(n, "reduce_scatter_sum");
  if (size_ == 1)
    return move_on_device(out, in, n);
  if (n == 0)
    return;
  const int64_t mine = static_cast<int64_t>(rank_) * n;
  if (out == in) {
    // Our in place (the result at the start) is not NCCL's (the result at this rank's chunk):
    // reduce into the chunk in place, then move it to the start (disjoint unless rank 0).
    settle(comm_,
           ncclReduceScatter(in, out + mine, static_cast<size_t>(n), ncclFloat, ncclSum, comm_,
                             collective_stream()),
           "ncclReduceScatter", "reduce_scatter_sum");
    if (rank_ != 0)
      copy_on_device(out, out + mine, n);
    return;
  }
  const float *send = in;
  std::unique_ptr<StreamTemp> copy;
  if (out != in + mine && overlaps(out, n, in, n * size_)) {
    copy = std::make_unique<StreamTemp>(n * size_);
    copy_on_device(copy->data(), in, n * size_);
    send = copy->data();
  }
  settle(comm_,
         ncclReduceScatter(send, out, static_cast<size_t>(n), ncclFloat, ncclSum, comm_, collective_stream()),
         "ncclReduceScatter", "reduce_scatter_sum");
}

void NcclCommunicator::broadcast(float *data, int64_t n, int root) {
  if (root < 0 || root >= size_)
    throw Error("broadcast over the " + axis_text() + " from root " + std::to_string(root) +
                ": the axis has ranks 0.." + std::to_string(size_ - 1));
  if (!on_device(data))
    return host_->broadcast(data, n, root);
  check_count(n, "broadcast");
  if (size_ == 1 || n == 0)
    return;
  settle(comm_,
         ncclBroadcast(data, data, static_cast<size_t>(n), ncclFloat, root, comm_, collective_stream()),
         "ncclBroadcast", "broadcast");
}

// This rank's GPU work first (its collectives included, overlapped ones too), polled with the
// timeout, then the host barrier: every rank's work issued before the barrier is done after it.
void NcclCommunicator::barrier() {
  const cudaStream_t stream = collective_stream();
  Poll poll(timeout());
  for (;;) {
    const cudaError_t status = cudaStreamQuery(stream);
    if (status == cudaSuccess)
      break;
    if (status != cudaErrorNotReady)
      cuda::check(status, "cudaStreamQuery (barrier)");
    if (poll.expired())
      timed_out("barrier over the " + axis_text() + " (waiting for this GPU's queued work)",
                "a collective on the GPU did not complete: another rank may have died or hung, or "
                "the ranks did not make the same collective calls");
    poll.pause();
  }
  host_->barrier();
}

cudaStream_t NcclCommunicator::collective_stream() {
  if (side_last_)
    cuda::check(cudaStreamWaitEvent(compute_stream(), side_last_, 0),
                "cudaStreamWaitEvent (NCCL collective)");
  return compute_stream();
}

CollectiveRequest::CollectiveRequest(NcclCommunicator &owner) : owner(owner) {
  cuda::check(cudaEventCreateWithFlags(&done, cudaEventDisableTiming),
              "cudaEventCreateWithFlags (all_reduce_sum (overlapped))");
}

// Destroying an event still pending on a stream is allowed: CUDA frees it when it completes.
CollectiveRequest::~CollectiveRequest() { cudaEventDestroy(done); }

// compute_stream() is ordered after the sum however its completion is seen, since a caller
// that sees test() succeed skips wait() (GradSync::finish). The host has seen the event
// complete, so the wait costs nothing; it states the dependency for the optimizer's kernels.
bool CollectiveRequest::test() {
  if (complete)
    return true;
  const cudaError_t status = cudaEventQuery(done);
  if (status == cudaErrorNotReady)
    return false;
  cuda::check(status, "cudaEventQuery (all_reduce_sum (overlapped))");
  cuda::check(cudaStreamWaitEvent(compute_stream(), done, 0),
              "cudaStreamWaitEvent (all_reduce_sum (overlapped))");
  complete = true;
  return true;
}

// Device buffers of a real axis only: the others have nothing to overlap, and the base class
// sums them at once (all_reduce_sum: host buffers go to host_) into a completed request.
std::unique_ptr<Request> NcclCommunicator::iall_reduce_sum(float *data, int64_t n) {
  if (size_ == 1 || n <= 0 || !on_device(data))
    return Communicator::iall_reduce_sum(data, n);
  return start_overlapped_sum(data, n, ncclFloat);
}

std::unique_ptr<Request> NcclCommunicator::iall_reduce_sum_bf16(uint16_t *data, int64_t n) {
  if (size_ == 1 || n <= 0 || !on_device(data))
    return Communicator::iall_reduce_sum_bf16(data, n);
  return start_overlapped_sum(data, n, ncclBfloat16);
}

template <typename Issue>
std::unique_ptr<Request> NcclCommunicator::start_overlapped(const char *method, Issue issue) {
  if (!side_stream_) {
    // The highest priority, as the p2p channels': the collective's few blocks start ahead of the
    // backward's queued compute blocks instead of after them.
    int least = 0, greatest = 0;
    cuda::check(cudaDeviceGetStreamPriorityRange(&least, &greatest), "cudaDeviceGetStreamPriorityRange");
    cuda::check(cudaStreamCreateWithPriority(&side_stream_, cudaStreamNonBlocking, greatest),
                "cudaStreamCreateWithPriority (NCCL side stream)");
    cuda::check(cudaEventCreateWithFlags(&side_ready_, cudaEventDisableTiming),
                "cudaEventCreateWithFlags (NCCL side stream)");
    cuda::check(cudaEventCreateWithFlags(&side_last_, cudaEventDisableTiming),
                "cudaEventCreateWithFlags (NCCL side stream)");
  }
  auto request = std::make_unique<CollectiveRequest>(*this);
  // After the kernels that wrote the input, and after comm_'s earlier calls on
  // compute_stream(): comm_'s calls must not run at the same time.
  cuda::check(cudaEventRecord(side_ready_, compute_stream()), "cudaEventRecord (NCCL side stream)");
  cuda::check(cudaStreamWaitEvent(side_stream_, side_ready_, 0), "cudaStreamWaitEvent (NCCL side stream)");
  issue(side_stream_, method);
  cuda::check(cudaEventRecord(request->done, side_stream_), "cudaEventRecord (NCCL side stream)");
  cuda::check(cudaEventRecord(side_last_, side_stream_), "cudaEventRecord (NCCL side stream)");
  return request;
}

std::unique_ptr<Request> NcclCommunicator::start_overlapped_sum(void *data, int64_t n, ncclDataType_t type) {
  check_count(n, "all_reduce_sum (overlapped)");
  return start_overlapped("all_reduce_sum (overlapped)", [&](cudaStream_t stream, const char *method) {
    settle(comm_, ncclAllReduce(data, data, static_cast<size_t>(n), type, ncclSum, comm_, stream), "ncclAllReduce",
           method);
  });
}

// Overlapped only where NCCL's own call does it all: separate (or NCCL-in-place) device buffers.
// Our in-place reduce-scatter (the result at the start) and overlapping inputs need a second
// step or a copy: those run on the compute stream, not overlapped.
std::unique_ptr<Request> NcclCommunicator::ireduce_scatter_sum(float *out, const float *in, int64_t n) {
  if (size_ == 1 || n <= 0 || !on_device(out) || !on_device(in) || overlaps(out, n, in, n * size_))
    return Communicator::ireduce_scatter_sum(out, in, n);
  check_count(n, "reduce_scatter_sum (overlapped)");
  return start_overlapped("reduce_scatter_sum (overlapped)", [&](cudaStream_t stream, const char *method) {
    settle(comm_, ncclReduceScatter(in, out, static_cast<size_t>(n), ncclFloat, ncclSum, comm_, stream),
           "ncclReduceScatter", method);
  });
}

std::unique_ptr<Request> NcclCommunicator::iall_gather(float *out, const float *in, int64_t n) {
  const bool in_place = in == out + static_cast<int64_t>(rank_) * n;
  if (size_ == 1 || n <= 0 || !on_device(out) || !on_device(in) || (!in_place && overlaps(in, n, out, n * size_)))
    return Communicator::iall_gather(out, in, n);
  check_count(n, "all_gather (overlapped)");
  return start_overlapped("all_gather (overlapped)", [&](cudaStream_t stream, const char *method) {
    settle(comm_, ncclAllGather(in, out, static_cast<size_t>(n), ncclFloat, comm_, stream), "ncclAllGather", method);
  });
}

void NcclCommunicator::wait_overlapped(CollectiveRequest &request) {
  Poll poll(timeout());
  while (!request.test()) {
    if (poll.expired())
      timed_out("an overlapped collective over the " + axis_text(),
                "another rank of the axis may have died or hung, or the ranks did not make the same "
                "collective calls");
    poll.pause();
  }
}

} // namespace nccl
} // namespace megart::cuda
