// The only runtime source that includes mpi.h.
#include "megart/comm_mpi.h"

#include "megart/error.h"
#include "megart/exit_signal.h"
#include "megart/half.h"
#include "megart/poll.h"

// The C API only: OpenMPI's mpi.h otherwise pulls in its C++ bindings (libmpi_cxx).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace megart {

namespace {

// MPI counts are int; longer all-reduces and broadcasts are sent in pieces of this size.
constexpr int64_t kMaxPiece = int64_t{1} << 30;

// From this many floats on, a sum all-reduce runs as our own ring of point-to-point messages:
// OpenMPI's non-blocking MPI_Iallreduce (libnbc) picks a binomial tree, reduce then broadcast,
// for fewer than 4 ranks or in-place buffers, about 2x slower than MPI_Allreduce on large
// messages (measured on 2 ranks, 4.27 M floats: 9.5 ms against 4.1 ms; the ring: 4.0 ms).
// Small ones stay on MPI_Iallreduce, where latency, not bandwidth, counts.
constexpr int64_t kRingMinElements = 16384;
// The ring's messages in the reduce phase, at most: 256 KiB of floats (large enough to run at the
// link's bandwidth, small enough that the receive buffer is no memory worth planning).
constexpr int64_t kRingSliceElements = 65536;

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS)
    return "MPI error code " + std::to_string(code);
  return std::string(text, static_cast<size_t>(len));
}

template <typename T> bool overlaps(const T *a, int64_t na, const T *b, int64_t nb) {
  return a < b + nb && b < a + na;
}

} // namespace

// ---------------------------------------------------------------------------------------------
// Process lifetime

bool mpi_running() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

MpiSession::MpiSession() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized)
    throw Error("MPI was already finalized in this process and cannot start again; run one "
                "training per process");
  if (initialized)
    return;
  int provided = 0;
  const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  if (rc != MPI_SUCCESS)
    throw Error("MPI_Init_thread failed: " + mpi_error_text(rc) +
                "; check the MPI installation (mpirun --version) and the launch command");
  started_here_ = true;
}

MpiSession::~MpiSession() {
  if (started_here_ && mpi_running())
    MPI_Finalize();
}

void mpi_abort(int code) {
  if (mpi_running())
    MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);
}

// ---------------------------------------------------------------------------------------------
// Communicator

struct MpiCommunicator::Handle {
  MPI_Comm comm = MPI_COMM_NULL;
  bool owned = false; // MPI_COMM_WORLD is not ours to free
  // The ring all-reduce's receive buffers (and the 16-bit reduce-scatter's partial sums, slot
  // 1), kept between calls.
  std::vector<float> scratch;
  std::vector<bf16_t> scratch_bf16[2];
  std::vector<fp16_t> scratch_fp16[2];
  std::vector<float> &ring_scratch(const float *, int = 0) { return scratch; }
  std::vector<bf16_t> &ring_scratch(const bf16_t *, int slot = 0) { return scratch_bf16[slot]; }
  std::vector<fp16_t> &ring_scratch(const fp16_t *, int slot = 0) { return scratch_fp16[slot]; }
};

namespace {

[[noreturn]] void mpi_failed(int rc, const char *call, const std::string &method,
                             const std::string &axis) {
  throw Error(std::string(call) + " failed in " + method + " over the " + axis + " axis: " +
              mpi_error_text(rc) +
              " (every rank of the axis must make the same collective calls with the same "
              "sizes)");
}

void check(int rc, const char *call, const char *method, const std::string &axis) {
  if (rc != MPI_SUCCESS)
    mpi_failed(rc, call, method, axis);
}

// check() for a method whose name is built only on failure: describe() returns it
// ("recv from pp rank 1"), which keeps the string work off the point-to-point hot path.
template <typename Describe>
void check_lazy(int rc, const char *call, const Describe &describe, const std::string &axis) {
  if (rc != MPI_SUCCESS)
    mpi_failed(rc, call, describe(), axis);
}

int to_count(int64_t n, const char *method, const std::string &axis) {
  if (n < 0 || n > INT_MAX)
    throw Error(std::string(method) + " over the " + axis + " axis got " + std::to_string(n) +
                " elements per rank; MPI counts are limited to " + std::to_string(INT_MAX) +
                " (split the buffer into smaller calls)");
  return static_cast<int>(n);
}

int world_rank() {
  int r = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

// A stop signal that came while this rank waited: mpirun sends it to the other ranks when one
// exits, so what this rank waited for names the lost peer (mpirun only names the first rank).
[[noreturn]] void stopped_while_waiting(const std::string &what, const std::string &axis,
                                        double waited) {
  const std::string activity = comm_activity().describe();
  std::fprintf(stderr,
               "megart: rank %d ended by %s after waiting %.1f s in %s%s%s: when mpirun reports "
               "a rank that exited, that rank is the one this wait needed\n",
               world_rank(), stop_signal_name(held_stop_signal()), waited, what.c_str(),
               what.find(axis) == std::string::npos ? (" over the " + axis + " axis").c_str() : "",
               activity.empty() ? "" : (" during " + activity).c_str());
  std::fflush(stderr);
  end_by_held_stop_signal();
}

// Waits until `request` completes (true) or `timeout` seconds pass (false; it stays pending),
// paced by Poll. describe() names the method for an error (check_lazy).
template <typename Describe>
bool poll(MPI_Request &request, MPI_Status *status, double timeout, const Describe &describe,
          const std::string &axis) {
  const WaitingForPeer waiting;
  const Poll wait(timeout);
  for (;;) {
    int done = 0;
    check_lazy(MPI_Test(&request, &done, status), "MPI_Test", describe, axis);
    if (done)
      return true;
    if (held_stop_signal())
      stopped_while_waiting(describe(), axis, wait.elapsed());
    if (wait.expired())
      return false;
    wait.pause();
  }
}

// "rank 0 (pp rank 0) timed out after 10 s in recv from pp rank 1 during iteration 3, ...".
[[noreturn]] void timed_out(const MpiCommunicator &c, const std::string &what,
                            const std::string &cause) {
  const std::string activity = comm_activity().describe();
  throw Error("rank " + std::to_string(world_rank()) + " (" + c.axis() + " rank " +
              std::to_string(c.rank()) + ") timed out after " + seconds_text(c.timeout()) +
              " s in " + what + (activity.empty() ? "" : " during " + activity) + ": " + cause +
              "; raise --distributed-timeout-minutes if it is only slow");
}

// A collective that does not complete in time cannot be cancelled (MPI forbids freeing it):
// it is left pending, and the error ends the job.
void finish_collective(MPI_Request &request, const MpiCommunicator &c, const char *method) {
  if (!poll(request, MPI_STATUS_IGNORE, c.timeout(), [method] { return std::string(method); },
            c.axis()))
    timed_out(c, std::string(method) + " over the " + c.axis() + " axis",
              "another rank of the axis may have died or hung, or the ranks did not make the "
              "same collective calls");
}

// A collective over n elements in pieces of at most kMaxPiece (MPI counts are int), each
// finished before the next starts: start(offset, count, &request) starts the piece at `offset`
// with MPI call `call` and returns its code.
template <typename Start>
void collective_in_pieces(const MpiCommunicator &c, int64_t n, const char *call,
                          const char *method, const Start &start) {
  for (int64_t i = 0; i < n; i += kMaxPiece) {
    MPI_Request r;
    check(start(i, static_cast<int>(std::min(kMaxPiece, n - i)), &r), call, method, c.axis());
    finish_collective(r, c, method);
  }
}

// An in-place MPI_Iallreduce of n elements of `type` (elem_bytes each) at `data`, in pieces.
void iallreduce_pieces(const MpiCommunicator &c, MPI_Comm comm, void *data, int64_t n,
                       size_t elem_bytes, MPI_Datatype type, MPI_Op op, const char *method) {
  char *bytes = static_cast<char *>(data);
  collective_in_pieces(c, n, "MPI_Iallreduce", method,
                       [&](int64_t offset, int count, MPI_Request *r) {
                         return MPI_Iallreduce(MPI_IN_PLACE, bytes + offset * elem_bytes, count,
                                               type, op, comm, r);
                       });
}

void check_p2p(const MpiCommunicator &c, const char *method, int peer, int tag) {
  if (peer < 0 || peer >= c.size())
    throw Error(std::string(method) + " over the " + c.axis() + " axis with peer " +
                std::to_string(peer) + ": the axis has ranks 0.." + std::to_string(c.size() - 1));
  if (tag < 0 || tag > 32767) // the largest tag every MPI must support
    throw Error(std::string(method) + " over the " + c.axis() + " axis with tag " +
                std::to_string(tag) + ": tags must be in 0..32767");
}

} // namespace

MpiCommunicator::MpiCommunicator(std::unique_ptr<Handle> handle, std::string axis)
    : handle_(std::move(handle)), axis_(std::move(axis)) {
  // Errors come back as codes, which check() turns into messages; the default handler would
  // abort the whole job without saying which collective failed.
  check(MPI_Comm_set_errhandler(handle_->comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler",
        "setup", axis_);
  check(MPI_Comm_rank(handle_->comm, &rank_), "MPI_Comm_rank", "setup", axis_);
  check(MPI_Comm_size(handle_->comm, &size_), "MPI_Comm_size", "setup", axis_);
}

MpiCommunicator::~MpiCommunicator() {
  if (handle_ && handle_->owned && mpi_running())
    MPI_Comm_free(&handle_->comm);
}

std::unique_ptr<MpiCommunicator> MpiCommunicator::world() {
  if (!mpi_running())
    throw Error("the world communicator needs MPI, which is not running (start an MpiSession "
                "first)");
  auto h = std::make_unique<Handle>();
  h->comm = MPI_COMM_WORLD;
  return std::unique_ptr<MpiCommunicator>(new MpiCommunicator(std::move(h), "world"));
}

std::unique_ptr<MpiCommunicator> MpiCommunicator::split(int color, int key,
                                                        const std::string &axis) const {
  auto h = std::make_unique<Handle>();
  check(MPI_Comm_split(handle_->comm, color, key, &h->comm), "MPI_Comm_split", "split",
        axis_ + " -> " + axis);
  h->owned = true;
  std::unique_ptr<MpiCommunicator> c(new MpiCommunicator(std::move(h), axis));
  c->set_timeout(timeout());
  c->synchronous_sends_ = synchronous_sends_;
  return c;
}

void MpiCommunicator::all_reduce_sum(float *data, int64_t n) {
  if (size_ > 1 && n >= kRingMinElements) {
    for (int64_t i = 0; i < n; i += kMaxPiece)
      ring_all_reduce_sum(data + i, std::min(kMaxPiece, n - i), "all_reduce_sum(float)");
    return;
  }
  iallreduce_pieces(*this, handle_->comm, data, n, sizeof(float), MPI_FLOAT, MPI_SUM,
                    "all_reduce_sum(float)");
}

void MpiCommunicator::all_reduce_max(float *data, int64_t n) {
  iallreduce_pieces(*this, handle_->comm, data, n, sizeof(float), MPI_FLOAT, MPI_MAX,
                    "all_reduce_max(float)");
}

void MpiCommunicator::all_reduce_sum(double *data, int64_t n) {
  iallreduce_pieces(*this, handle_->comm, data, n, sizeof(double), MPI_DOUBLE, MPI_SUM,
                    "all_reduce_sum(double)");
}

// MPI has no 16-bit float types and no sums for them: always the ring, which adds with 16-bit
// rounding.
template <typename T>
void MpiCommunicator::all_reduce_sum_16(T *data, int64_t n, const char *method) {
  if (size_ == 1)
    return;
  for (int64_t i = 0; i < n; i += kMaxPiece)
    ring_all_reduce_sum(data + i, std::min(kMaxPiece, n - i), method);
}

void MpiCommunicator::all_reduce_sum(bf16_t *data, int64_t n) {
  all_reduce_sum_16(data, n, "all_reduce_sum(bf16)");
}
void MpiCommunicator::all_reduce_sum(fp16_t *data, int64_t n) {
  all_reduce_sum_16(data, n, "all_reduce_sum(fp16)");
}
// --grad-reduce-in-bf16's buffers hold bf16 as uint16_t: the same bits.
void MpiCommunicator::all_reduce_sum_bf16(uint16_t *data, int64_t n) {
  all_reduce_sum(reinterpret_cast<bf16_t *>(data), n);
}

namespace {
MPI_Datatype mpi_type(const float *) { return MPI_FLOAT; }
MPI_Datatype mpi_type(const bf16_t *) { return MPI_UINT16_T; } // the bits, moved as they are
MPI_Datatype mpi_type(const fp16_t *) { return MPI_UINT16_T; }
} // namespace

template <typename T>
void MpiCommunicator::gather(T *out, const T *in, int64_t n, const char *method) {
  const int count = to_count(n, method, axis_);
  // MPI_IN_PLACE when this rank's chunk is already in place (its send count and type are then
  // ignored); MPI forbids aliasing other than that, so an overlapping input is copied first.
  const void *send = MPI_IN_PLACE;
  std::vector<T> copy;
  if (in != out + static_cast<int64_t>(rank_) * n) {
    if (overlaps(in, n, out, n * size_)) {
      copy.assign(in, in + n);
      in = copy.data();
    }
    send = in;
  }
  MPI_Request r;
  check(MPI_Iallgather(send, count, mpi_type(in), out, count, mpi_type(in), handle_->comm, &r),
        "MPI_Iallgather", method, axis_);
  finish_collective(r, *this, method);
}

void MpiCommunicator::all_gather(float *out, const float *in, int64_t n) {
  gather(out, in, n, "all_gather");
}
void MpiCommunicator::all_gather(bf16_t *out, const bf16_t *in, int64_t n) {
  gather(out, in, n, "all_gather(bf16)");
}
void MpiCommunicator::all_gather(fp16_t *out, const fp16_t *in, int64_t n) {
  gather(out, in, n, "all_gather(fp16)");
}

void MpiCommunicator::reduce_scatter_sum(float *out, const float *in, int64_t n) {
  const int count = to_count(n, "reduce_scatter_sum", axis_);
  // MPI_IN_PLACE when out == in: the input is the whole buffer, the result lands in its start.
  // An input that overlaps `out` otherwise is copied first (MPI forbids that aliasing).
  const void *send = MPI_IN_PLACE;
  std::vector<float> copy;
  if (out != in) {
    if (overlaps(out, n, in, n * size_)) {
      copy.assign(in, in + n * size_);
      in = copy.data();
    }
    send = in;
  }
  MPI_Request r;
  check(MPI_Ireduce_scatter_block(send, out, count, MPI_FLOAT, MPI_SUM, handle_->comm, &r),
        "MPI_Ireduce_scatter_block", "reduce_scatter_sum", axis_);
  finish_collective(r, *this, "reduce_scatter_sum");
}

void MpiCommunicator::all_to_all_v(const float *in, const int64_t *send_counts, float *out,
                                   const int64_t *recv_counts) {
  // MPI's counts and displacements are int: every one is checked, the totals included.
  std::vector<int> sends(size_), recvs(size_), send_at(size_), recv_at(size_);
  int64_t sent = 0, received = 0;
  for (int r = 0; r < size_; ++r) {
    send_at[r] = to_count(sent, "all_to_all_v", axis_), recv_at[r] = to_count(received, "all_to_all_v", axis_);
    sends[r] = to_count(send_counts[r], "all_to_all_v", axis_), recvs[r] = to_count(recv_counts[r], "all_to_all_v", axis_);
    sent += send_counts[r], received += recv_counts[r];
  }
  to_count(sent, "all_to_all_v", axis_), to_count(received, "all_to_all_v", axis_);
  if (overlaps(in, sent, out, received))
    throw Error("all_to_all_v over the " + axis_ + " axis: the input and the output overlap");
  MPI_Request r;
  check(MPI_Ialltoallv(in, sends.data(), send_at.data(), MPI_FLOAT, out, recvs.data(), recv_at.data(), MPI_FLOAT,
                       handle_->comm, &r),
        "MPI_Ialltoallv", "all_to_all_v", axis_);
  finish_collective(r, *this, "all_to_all_v");
}

void MpiCommunicator::all_to_all(const int32_t *in, int32_t *out, int64_t n) {
  const int count = to_count(n, "all_to_all", axis_);
  to_count(n * size_, "all_to_all", axis_);
  if (overlaps(in, n * size_, out, n * size_))
    throw Error("all_to_all over the " + axis_ + " axis: the input and the output overlap");
  MPI_Request r;
  check(MPI_Ialltoall(in, count, MPI_INT32_T, out, count, MPI_INT32_T, handle_->comm, &r), "MPI_Ialltoall",
        "all_to_all", axis_);
  finish_collective(r, *this, "all_to_all");
}

void MpiCommunicator::broadcast(float *data, int64_t n, int root) {
  if (root < 0 || root >= size_)
    throw Error("broadcast over the " + axis_ + " axis from root " + std::to_string(root) +
                ": the axis has ranks 0.." + std::to_string(size_ - 1));
  collective_in_pieces(*this, n, "MPI_Ibcast", "broadcast",
                       [&](int64_t offset, int count, MPI_Request *r) {
                         return MPI_Ibcast(data + offset, count, MPI_FLOAT, root, handle_->comm,
                                           r);
                       });
}

void MpiCommunicator::barrier() {
  MPI_Request r;
  check(MPI_Ibarrier(handle_->comm, &r), "MPI_Ibarrier", "barrier", axis_);
  finish_collective(r, *this, "barrier");
}

namespace {
// sum = a + b; 16-bit: each partial sum added in fp32 and rounded, as NCCL's 16-bit sums add.
template <typename T> void add_into(T *sum, const T *a, const T *b, int n) {
  for (int i = 0; i < n; ++i)
    sum[i] = from_float<T>(to_float(a[i]) + to_float(b[i]));
}
template <typename T> void add_into(T *sum, const T *add, int n) { add_into(sum, sum, add, n); }
} // namespace

// One step around the ring: `send` to the right neighbour while `recv` arrives from the left.
template <typename T>
void MpiCommunicator::ring_step(const T *send, int send_count, T *recv, int recv_count,
                                const char *method) {
  const int right = (rank_ + 1) % size_, left = (rank_ + size_ - 1) % size_;
  MPI_Request r[2]; // the receive first, so the message finds it waiting
  check(MPI_Irecv(recv, recv_count, mpi_type(recv), left, p2p_tag::kRing, handle_->comm, &r[0]),
        "MPI_Irecv", method, axis_);
  check(MPI_Isend(send, send_count, mpi_type(send), right, p2p_tag::kRing, handle_->comm, &r[1]),
        "MPI_Isend", method, axis_);
  finish_collective(r[0], *this, method);
  finish_collective(r[1], *this, method);
}

// Reduce-scatter then all-gather around the ring of ranks: every rank sends and receives
// 2 (p - 1) / p of the data, what a bandwidth-optimal all-reduce moves. Each chunk is summed
// once, by its last rank in the ring, and copied from there, so every rank ends with the same
// bits.
// The chunks pass in slices of at most kRingSliceElements, so the receive buffer stays small
// whatever the message (a buffer of the whole chunk would be memory nobody planned for: a
// bucket of 30 M floats over 2 ranks would hold 60 MB more per rank).
template <typename T>
void MpiCommunicator::ring_all_reduce_sum(T *data, int64_t n, const char *method) {
  const int p = size_;
  auto begin = [&](int c) { return n * c / p; };
  auto count = [&](int c) { return static_cast<int>(begin(c + 1) - begin(c)); };
  // Every rank walks the same number of slices (of the largest chunk); a chunk's slices past
  // its end are empty messages.
  const int64_t largest = (n + p - 1) / p, slices = (largest + kRingSliceElements - 1) / kRingSliceElements;
  std::vector<T> &received = handle_->ring_scratch(data, 0);
  if (received.size() < static_cast<size_t>(std::min(largest, kRingSliceElements)))
    received.resize(static_cast<size_t>(std::min(largest, kRingSliceElements)));
  auto slice = [&](int c, int64_t k) {
    return static_cast<int>(std::clamp<int64_t>(count(c) - k * kRingSliceElements, 0, kRingSliceElements));
  };
  for (int step = 0; step < p - 1; ++step) { // rank r ends owning the sum of chunk r + 1
    const int send = (rank_ - step + p) % p, recv = (rank_ - step - 1 + 2 * p) % p;
    for (int64_t k = 0; k < slices; ++k) {
      const int64_t at = k * kRingSliceElements;
      ring_step(data + begin(send) + at, slice(send, k), received.data(), slice(recv, k), method);
      add_into(data + begin(recv) + at, received.data(), slice(recv, k));
    }
  }
  for (int step = 0; step < p - 1; ++step) { // pass the sums around
    const int send = (rank_ + 1 - step + p) % p, recv = (rank_ - step + p) % p;
    ring_step(data + begin(send), count(send), data + begin(recv), count(recv), method);
  }
}

// The reduce-scatter half of the ring, slice by slice (the chunks are n elements each): at step
// s this rank sends its partial sum of chunk rank - s - 1 and receives the left neighbour's of
// chunk rank - s - 2, adding its own; after p - 1 steps it holds all of chunk rank. Chunk c is
// summed from rank c + 1 around the ring to rank c, rounded at every hop.
template <typename T>
void MpiCommunicator::ring_reduce_scatter_sum(T *out, const T *in, int64_t n, const char *method) {
  const int p = size_;
  std::vector<T> copy;
  if (out != in && overlaps(out, n, in, n * p)) { // in place is safe: out is chunk 0's slots
    copy.assign(in, in + n * p);
    in = copy.data();
  }
  const int64_t piece = std::min(n, kRingSliceElements);
  std::vector<T> &received = handle_->ring_scratch(in, 0), &partial = handle_->ring_scratch(in, 1);
  if (received.size() < static_cast<size_t>(piece)) {
    received.resize(static_cast<size_t>(piece));
    partial.resize(static_cast<size_t>(piece));
  }
  for (int64_t at = 0; at < n; at += kRingSliceElements) {
    const int len = static_cast<int>(std::min(kRingSliceElements, n - at));
    for (int step = 0; step < p - 1; ++step) {
      const int send = (rank_ - step - 1 + 2 * p) % p, recv = (rank_ - step - 2 + 2 * p) % p;
      ring_step(step == 0 ? in + send * n + at : partial.data(), len, received.data(), len, method);
      add_into(partial.data(), received.data(), in + recv * n + at, len);
    }
    std::copy(partial.data(), partial.data() + len, out + at);
  }
}

void MpiCommunicator::reduce_scatter_sum(bf16_t *out, const bf16_t *in, int64_t n) {
  if (size_ == 1)
    std::memmove(out, in, sizeof(bf16_t) * n);
  else
    ring_reduce_scatter_sum(out, in, n, "reduce_scatter_sum(bf16)");
}
void MpiCommunicator::reduce_scatter_sum(fp16_t *out, const fp16_t *in, int64_t n) {
  if (size_ == 1)
    std::memmove(out, in, sizeof(fp16_t) * n);
  else
    ring_reduce_scatter_sum(out, in, n, "reduce_scatter_sum(fp16)");
}

// ---------------------------------------------------------------------------------------------
// Point-to-point

namespace {

class MpiRequest final : public Request {
public:
  MpiRequest(const MpiCommunicator &owner, bool receive, int peer, int64_t n, const char *collective = nullptr)
      : owner(owner), receive(receive), peer(peer), n(n), collective(collective) {}
  // Abandoned in flight (an error unwinds past it): a receive is cancelled so that its buffer
  // is not written later; a send cannot be, and completes or not on its own; a collective may
  // be neither cancelled nor freed (MPI forbids both): it is left to the job's end.
  ~MpiRequest() override {
    if (request == MPI_REQUEST_NULL || !mpi_running() || collective)
      return;
    if (receive)
      MPI_Cancel(&request);
    MPI_Request_free(&request);
  }
  bool test() override {
    if (request == MPI_REQUEST_NULL)
      return true;
    int done = 0;
    MPI_Status status;
    check_lazy(MPI_Test(&request, &done, &status), "MPI_Test", [this] { return what(); },
               owner.axis());
    if (done)
      check_received(status);
    return done != 0;
  }
  // "recv from pp rank 1", "reduce_scatter_sum over the dp axis"
  std::string what() const {
    if (collective)
      return std::string(collective) + " over the " + owner.axis() + " axis";
    return std::string(receive ? "recv from " : "send to ") + owner.axis() + " rank " +
           std::to_string(peer);
  }
  // A receive of fewer elements than expected is a schedule whose two sides disagree on the
  // activation's size; MPI would only report the opposite case (truncation).
  void check_received(const MPI_Status &status) const {
    if (!receive)
      return;
    int count = 0;
    MPI_Get_count(&status, MPI_FLOAT, &count);
    if (count != n)
      throw Error(what() + " got " + std::to_string(count) + " elements, expected " +
                  std::to_string(n) + ": the two ranks disagree on the message size");
  }

  const MpiCommunicator &owner;
  const bool receive;
  const int peer;
  const int64_t n;
  const char *const collective; // the collective's name, null for point-to-point
  MPI_Request request = MPI_REQUEST_NULL;
};

} // namespace

std::unique_ptr<Request> MpiCommunicator::isend(const float *data, int64_t n, int peer, int tag) {
  check_p2p(*this, "isend", peer, tag);
  auto r = std::make_unique<MpiRequest>(*this, false, peer, n);
  auto start = synchronous_sends_ ? MPI_Issend : MPI_Isend;
  check_lazy(start(data, to_count(n, "isend", axis_), MPI_FLOAT, peer, tag, handle_->comm, &r->request),
             synchronous_sends_ ? "MPI_Issend" : "MPI_Isend", [&r] { return r->what(); }, axis_);
  return r;
}

// The overlapped collectives: started here, finished by wait(). An input that overlaps the
// output other than in place would need a copy that outlives the call: those run at once.
std::unique_ptr<Request> MpiCommunicator::ireduce_scatter_sum(float *out, const float *in, int64_t n) {
  const int count = to_count(n, "ireduce_scatter_sum", axis_);
  if (out != in && overlaps(out, n, in, n * size_))
    return Communicator::ireduce_scatter_sum(out, in, n);
  auto r = std::make_unique<MpiRequest>(*this, false, -1, n, "reduce_scatter_sum");
  check(MPI_Ireduce_scatter_block(out == in ? MPI_IN_PLACE : in, out, count, MPI_FLOAT, MPI_SUM, handle_->comm,
                                  &r->request),
        "MPI_Ireduce_scatter_block", "ireduce_scatter_sum", axis_);
  return r;
}

std::unique_ptr<Request> MpiCommunicator::iall_gather(float *out, const float *in, int64_t n) {
  const int count = to_count(n, "iall_gather", axis_);
  const bool in_place = in == out + static_cast<int64_t>(rank_) * n;
  if (!in_place && overlaps(in, n, out, n * size_))
    return Communicator::iall_gather(out, in, n);
  auto r = std::make_unique<MpiRequest>(*this, false, -1, n, "all_gather");
  check(MPI_Iallgather(in_place ? MPI_IN_PLACE : in, count, MPI_FLOAT, out, count, MPI_FLOAT, handle_->comm,
                       &r->request),
        "MPI_Iallgather", "iall_gather", axis_);
  return r;
}

std::unique_ptr<Request> MpiCommunicator::irecv(float *data, int64_t n, int peer, int tag) {
  check_p2p(*this, "irecv", peer, tag);
  auto r = std::make_unique<MpiRequest>(*this, true, peer, n);
  check_lazy(MPI_Irecv(data, to_count(n, "irecv", axis_), MPI_FLOAT, peer, tag, handle_->comm,
                       &r->request),
             "MPI_Irecv", [&r] { return r->what(); }, axis_);
  return r;
}

void MpiCommunicator::wait(Request &request) {
  auto *r = dynamic_cast<MpiRequest *>(&request);
  if (!r)
    return Communicator::wait(request); // the completed request of iall_reduce_sum
  if (&r->owner != this)
    throw Error("wait over the " + axis_ + " axis on a request of another communicator");
  if (r->request == MPI_REQUEST_NULL)
    return;
  MPI_Status status;
  if (!poll(r->request, &status, timeout(), [r] { return r->what(); }, axis_))
    timed_out(*this, r->what(),
              "the other rank may have died or hung, or the two ranks' schedules do not match");
  r->check_received(status);
}

} // namespace megart
