// Private to comm_nccl.cpp (construction, collectives) and comm_nccl_p2p.cpp (point-to-point):
// the NCCL communicator's class, its point-to-point channels, and the helpers they share.
//
// Point-to-point design. NCCL runs the calls of one communicator one after the other on the GPU,
// and a send does not finish before its peer's receive runs: two messages on one communicator
// can block each other where MPI's would not (rank r's receive from r - 1 queued behind its send
// to r + 1, around a ring of ranks: the interleaved schedule's wrap-around). So every (peer, tag,
// direction) gets its own channel: a 2-rank NCCL communicator on its own stream, which carries
// only that direction's messages of that tag, in call order (MPI's per-tag order). A channel is
// made on its first message, by the two ranks alone: the sender makes the ncclUniqueId and sends
// it over the host communicator (tag p2p_tag::kNcclChannelSetup, with the user tag, so ids of
// channels made in different orders on the two sides find their channel). Every NCCL
// communicator here is nonblocking (config.blocking = 0): its setup and its first call's
// connection run in NCCL's threads while the host goes on, and every wait has the timeout.
#pragma once

#include "megart/comm.h"
#include "megart/poll.h"

#include <array>
#include <cstdint>
#include <cuda_runtime.h>
#include <deque>
#include <map>
#include <memory>
#include <nccl.h>
#include <string>
#include <tuple>

namespace megart::cuda::nccl {

// "NCCL error in <call>: <ncclGetErrorString>", then NCCL's last message and `context` (the
// method and axis) when given.
[[noreturn]] void fail(ncclResult_t rc, const std::string &call, const std::string &context = "");
// Throws unless rc is ncclSuccess or ncclInProgress (a nonblocking communicator still busy).
ncclResult_t nccl_check(ncclResult_t rc, const char *call, const std::string &context = "");
// The state of a nonblocking communicator: ncclSuccess (idle), ncclInProgress, or its error.
ncclResult_t state_of(ncclComm_t comm);

// Whether p is device (or managed) memory, which goes through NCCL; anything else, pointers CUDA
// cannot classify included, is host memory, which goes to the host communicator.
bool on_device(const void *p);

// An ncclUniqueId travels as floats (the host communicator moves floats; the bytes are only
// copied), after one float that carries a flag or a tag.
constexpr int kIdFloats = static_cast<int>(sizeof(ncclUniqueId) / sizeof(float));
static_assert(sizeof(ncclUniqueId) % sizeof(float) == 0, "ncclUniqueId is not whole floats");
using IdMessage = std::array<float, kIdFloats + 1>;

// One isend or irecv of a device buffer.
struct P2pOp {
  enum class State {
    kQueued,    // called, not yet given to NCCL (its channel is being made, or busy)
    kIssuing,   // given to NCCL, which is still enqueuing it (nonblocking communicator)
    kEnqueued,  // on the channel's stream, `done` recorded after it
    kDone,      // `done` has completed
    kAbandoned, // its request was destroyed while queued: never given to NCCL
  };
  bool receive = false;
  float *data = nullptr;
  int64_t n = 0;
  int peer = 0, tag = 0;
  State state = State::kQueued;
  // Recorded on compute_stream() at the call: the channel's stream waits for it, so that the
  // kernels that wrote a send buffer (or last read a receive buffer) are finished.
  cudaEvent_t ready = nullptr;
  cudaEvent_t done = nullptr; // recorded on the channel's stream after the NCCL call
  P2pOp() = default;
  P2pOp(const P2pOp &) = delete;
  P2pOp &operator=(const P2pOp &) = delete;
  ~P2pOp();
};

// The messages of one tag in one direction between this rank and `peer`.
struct Channel {
  enum class State { kAwaitingId, kInitializing, kReady };
  int peer = 0, tag = 0;
  bool sending = false; // this rank is NCCL rank 0 (the sender) of the 2-rank communicator
  State state = State::kAwaitingId;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  std::string name;                         // NCCL's name for it (config.commName points here)
  IdMessage id_message{};                   // the sender's message: tag, then the id
  std::unique_ptr<Request> id_send;         // that message on the host communicator, until complete
  std::deque<std::shared_ptr<P2pOp>> queue; // not yet on the stream, in call order
};

// The ids a peer sent for its channels to this rank, by tag, until their channel is made here.
struct IdInbox {
  IdMessage message{};
  std::unique_ptr<Request> pending; // a host receive of the next id message
  std::map<int, ncclUniqueId> ids;
};

class NcclCommunicator;

// An overlapped all-reduce (iall_reduce_sum) of a device buffer: complete when `done`, recorded
// on the collectives' side stream after it, is.
class CollectiveRequest final : public Request {
public:
  explicit CollectiveRequest(NcclCommunicator &owner);
  ~CollectiveRequest() override;
  CollectiveRequest(const CollectiveRequest &) = delete;
  CollectiveRequest &operator=(const CollectiveRequest &) = delete;
  bool test() override;

  NcclCommunicator &owner;
  cudaEvent_t done = nullptr;
  bool complete = false;
};

class NcclCommunicator final : public Communicator {
public:
  explicit NcclCommunicator(std::unique_ptr<Communicator> host);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator &) = delete;
  NcclCommunicator &operator=(const NcclCommunicator &) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void all_reduce_sum(float *data, int64_t n) override;
  void all_reduce_max(float *data, int64_t n) override;
  void all_reduce_sum(double *data, int64_t n) override;
  void all_reduce_sum_bf16(uint16_t *data, int64_t n) override;
  void all_gather(float *out, const float *in, int64_t n) override;
  void reduce_scatter_sum(float *out, const float *in, int64_t n) override;
  void broadcast(float *data, int64_t n, int root) override;
  void barrier() override;
  std::unique_ptr<Request> iall_reduce_sum(float *data, int64_t n) override;
  std::unique_ptr<Request> iall_reduce_sum_bf16(uint16_t *data, int64_t n) override;
  std::unique_ptr<Request> ireduce_scatter_sum(float *out, const float *in, int64_t n) override;
  std::unique_ptr<Request> iall_gather(float *out, const float *in, int64_t n) override;
  std::unique_ptr<Request> isend(const float *data, int64_t n, int peer, int tag) override;
  std::unique_ptr<Request> irecv(float *data, int64_t n, int peer, int tag) override;
  void wait(Request &request) override;
  void set_timeout(double seconds) override;

  // Moves every channel on as far as it goes without blocking: ids, setups, queued calls.
  void progress();
  // Whether `op` is complete (it never blocks).
  bool complete(P2pOp &op);

private:
  // "tp axis", or "axis" when the host communicator is not MPI's (whose axis has a name).
  std::string axis_text() const { return axis_.empty() ? "axis" : axis_ + " axis"; }
  std::string rank_name(int r) const; // "pp rank 1"
  [[noreturn]] void timed_out(const std::string &what, const std::string &cause) const;
  // Polls a nonblocking communicator whose call returned `rc` until it is idle: throws the
  // call's error, or the timeout error naming `method` ("broadcast") and the axis.
  void settle(ncclComm_t comm, ncclResult_t rc, const char *call, const char *method);
  void init_collectives();
  void all_reduce(void *data, int64_t n, ncclDataType_t type, ncclRedOp_t op, const char *method);
  // compute_stream(), made to wait for the overlapped all-reduces issued so far: comm_'s calls
  // must run one after the other, in the same order on every rank, whichever stream they use.
  cudaStream_t collective_stream();
  // iall_reduce_sum(_bf16) of a device buffer on side_stream_.
  std::unique_ptr<Request> start_overlapped_sum(void *data, int64_t n, ncclDataType_t type);
  // side_stream_ (made on first use), ordered after the compute stream's work so far; the
  // request that `issue` (which enqueues one NCCL call on the stream it gets) completes.
  template <typename Issue> std::unique_ptr<Request> start_overlapped(const char *method, Issue issue);
  void wait_overlapped(CollectiveRequest &request);

  std::unique_ptr<Request> start_p2p(bool receive, float *data, int64_t n, int peer, int tag);
  Channel &channel(int peer, int tag, bool sending);
  void init_channel(Channel &c, const ncclUniqueId &id);
  bool take_id(const Channel &c, ncclUniqueId &id);
  void advance(Channel &c);
  std::string p2p_what(const P2pOp &op) const; // "recv from pp rank 1"
  void release() noexcept;

  std::unique_ptr<Communicator> host_; // first: destroyed last (channels hold its requests)
  std::string axis_;
  int rank_ = 0, size_ = 1, world_rank_ = 0;
  std::string name_;
  ncclComm_t comm_ = nullptr; // the collectives' (size > 1), on compute_stream()
  // iall_reduce_sum's calls on comm_ run on this high-priority stream (made on the first), so
  // that the kernels queued after them on compute_stream() go on meanwhile. `side_ready_` is
  // recorded on compute_stream() before each (the gradients' producers); `side_last_` after the
  // last, for the collectives on compute_stream() to wait for.
  cudaStream_t side_stream_ = nullptr;
  cudaEvent_t side_ready_ = nullptr, side_last_ = nullptr;
  std::map<std::tuple<int, int, bool>, std::unique_ptr<Channel>> channels_; // (peer, tag, sending)
  std::map<int, IdInbox> inboxes_;                                          // by peer
};

} // namespace megart::cuda::nccl
