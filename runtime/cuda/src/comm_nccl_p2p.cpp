// The NCCL communicator's point-to-point messages: one channel per (peer, tag, direction), made
// on its first message (comm_nccl_impl.h says why), and requests completed by CUDA events.
// Host buffers go to the host communicator, as the collectives' do.
#include "comm_nccl_impl.h"

#include "megart/cuda/device.h"
#include "megart/cuda/kernels.h"
#include "megart/error.h"

#include <cstring>

namespace megart::cuda::nccl {

namespace {

// A transfer of a device buffer, complete when its `done` event is.
class DeviceRequest final : public Request {
public:
  DeviceRequest(NcclCommunicator &owner, std::shared_ptr<P2pOp> op) : owner(owner), op(std::move(op)) {}
  // Abandoned while still queued: it is never given to NCCL, so the buffer is not touched after
  // it is freed. One already given to NCCL runs on (error paths only: the job is stopping).
  ~DeviceRequest() override {
    if (op->state == P2pOp::State::kQueued)
      op->state = P2pOp::State::kAbandoned;
  }
  bool test() override {
    owner.progress(); // a test is also what moves queued calls onto their streams
    return owner.complete(*op);
  }

  NcclCommunicator &owner;
  const std::shared_ptr<P2pOp> op;
};

// A transfer of a host buffer, by the host communicator.
class HostRequest final : public Request {
public:
  HostRequest(NcclCommunicator &owner, std::unique_ptr<Request> inner)
      : owner(owner), inner(std::move(inner)) {}
  bool test() override { return inner->test(); }

  NcclCommunicator &owner;
  const std::unique_ptr<Request> inner;
};

void create_event(cudaEvent_t *event) {
  check(cudaEventCreateWithFlags(event, cudaEventDisableTiming), "cudaEventCreateWithFlags (p2p)");
}

} // namespace

std::unique_ptr<Request> NcclCommunicator::isend(const float *data, int64_t n, int peer, int tag) {
  // NCCL reads a send buffer only; the op's pointer is not const because receives share it.
  return start_p2p(false, const_cast<float *>(data), n, peer, tag);
}

std::unique_ptr<Request> NcclCommunicator::irecv(float *data, int64_t n, int peer, int tag) {
  return start_p2p(true, data, n, peer, tag);
}

std::unique_ptr<Request> NcclCommunicator::start_p2p(bool receive, float *data, int64_t n, int peer,
                                                     int tag) {
  if (size_ == 1) // no peers: the base class says so
    return receive ? Communicator::irecv(data, n, peer, tag) : Communicator::isend(data, n, peer, tag);
  if (!on_device(data))
    return std::make_unique<HostRequest>(*this, receive ? host_->irecv(data, n, peer, tag)
                                                        : host_->isend(data, n, peer, tag));
  const char *method = receive ? "irecv" : "isend";
  if (peer < 0 || peer >= size_ || peer == rank_)
    throw Error(std::string(method) + " over the " + axis_text() + " with peer " + std::to_string(peer) +
                ": the peer must be another of the axis's ranks 0.." + std::to_string(size_ - 1));
  if (tag < 0 || tag > 32767) // as MpiCommunicator: the host path must accept the same tags
    throw Error(std::string(method) + " over the " + axis_text() + " with tag " + std::to_string(tag) +
                ": tags must be in 0..32767");
  if (n < 0)
    throw Error(std::string(method) + " of " + std::to_string(n) + " elements");
  auto op = std::make_shared<P2pOp>();
  op->receive = receive;
  op->data = data;
  op->n = n;
  op->peer = peer;
  op->tag = tag;
  if (n == 0) { // nothing to move; both sides skip it alike
    op->state = P2pOp::State::kDone;
    return std::make_unique<DeviceRequest>(*this, op);
  }
  create_event(&op->ready);
  create_event(&op->done);
  check(cudaEventRecord(op->ready, compute_stream()), "cudaEventRecord (p2p)");
  channel(peer, tag, !receive).queue.push_back(op);
  progress(); // on a ready channel the call reaches NCCL now
  return std::make_unique<DeviceRequest>(*this, op);
}

Channel &NcclCommunicator::channel(int peer, int tag, bool sending) {
  const auto key = std::make_tuple(peer, tag, sending);
  if (auto it = channels_.find(key); it != channels_.end())
    return *it->second;
  auto c = std::make_unique<Channel>();
  c->peer = peer;
  c->tag = tag;
  c->sending = sending;
  c->name = "megart " + axis_text() + " " + std::to_string(sending ? rank_ : peer) + "->" +
            std::to_string(sending ? peer : rank_) + " tag " + std::to_string(tag);
  // The highest priority: a transfer's few blocks start ahead of queued compute blocks.
  int least = 0, greatest = 0;
  check(cudaDeviceGetStreamPriorityRange(&least, &greatest), "cudaDeviceGetStreamPriorityRange");
  check(cudaStreamCreateWithPriority(&c->stream, cudaStreamNonBlocking, greatest),
        "cudaStreamCreateWithPriority (p2p channel)");
  if (sending) {
    try {
      ncclUniqueId id{};
      nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId", "making the channel " + c->name);
      std::memcpy(&c->id_message[0], &tag, sizeof tag);
      std::memcpy(&c->id_message[1], &id, sizeof id);
      c->id_send = host_->isend(c->id_message.data(), static_cast<int64_t>(c->id_message.size()), peer,
                                p2p_tag::kNcclChannelSetup);
      init_channel(*c, id);
    } catch (...) {
      if (c->comm)
        ncclCommAbort(c->comm);
      cudaStreamDestroy(c->stream);
      throw;
    }
  }
  return *channels_.emplace(key, std::move(c)).first->second;
}

// Starts the 2-rank communicator: the sender is its rank 0, the receiver its rank 1.
void NcclCommunicator::init_channel(Channel &c, const ncclUniqueId &id) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  config.commName = c.name.c_str();
  nccl_check(ncclCommInitRankConfig(&c.comm, 2, id, c.sending ? 0 : 1, &config), "ncclCommInitRankConfig",
             "making the channel " + c.name);
  c.state = Channel::State::kInitializing;
}

// The id of the receiving channel `c`, when its sender's message has come. Messages of the
// peer's other channels that come first are kept for those.
bool NcclCommunicator::take_id(const Channel &c, ncclUniqueId &id) {
  IdInbox &box = inboxes_[c.peer];
  for (;;) {
    if (auto it = box.ids.find(c.tag); it != box.ids.end()) {
      id = it->second;
      box.ids.erase(it);
      return true;
    }
    if (!box.pending)
      box.pending = host_->irecv(box.message.data(), static_cast<int64_t>(box.message.size()), c.peer,
                                 p2p_tag::kNcclChannelSetup);
    if (!box.pending->test())
      return false;
    box.pending.reset();
    int tag = 0;
    ncclUniqueId received{};
    std::memcpy(&tag, &box.message[0], sizeof tag);
    std::memcpy(&received, &box.message[1], sizeof received);
    box.ids[tag] = received;
  }
}

void NcclCommunicator::advance(Channel &c) {
  if (c.id_send && c.id_send->test()) // the host communicator moves it on when polled
    c.id_send.reset();
  if (c.state == Channel::State::kAwaitingId) {
    ncclUniqueId id{};
    if (!take_id(c, id))
      return;
    init_channel(c, id);
  }
  if (c.state == Channel::State::kInitializing) {
    const ncclResult_t state = state_of(c.comm);
    if (state == ncclInProgress)
      return;
    if (state != ncclSuccess)
      fail(state, "ncclCommInitRankConfig", "making the channel " + c.name);
    c.state = Channel::State::kReady;
  }
  while (!c.queue.empty()) {
    P2pOp &op = *c.queue.front();
    if (op.state == P2pOp::State::kAbandoned) {
      c.queue.pop_front();
      continue;
    }
    if (op.state == P2pOp::State::kQueued) {
      check(cudaStreamWaitEvent(c.stream, op.ready, 0), "cudaStreamWaitEvent (p2p)");
      const size_t count = static_cast<size_t>(op.n);
      const ncclResult_t rc = op.receive ? ncclRecv(op.data, count, ncclFloat, 0, c.comm, c.stream)
                                         : ncclSend(op.data, count, ncclFloat, 1, c.comm, c.stream);
      if (rc != ncclSuccess && rc != ncclInProgress)
        fail(rc, op.receive ? "ncclRecv" : "ncclSend", p2p_what(op));
      op.state = P2pOp::State::kIssuing;
    }
    // On the stream once the nonblocking communicator is idle again: at once, except while
    // NCCL connects the channel (its first call), which needs the peer's first call too.
    const ncclResult_t state = state_of(c.comm);
    if (state == ncclInProgress)
      return;
    if (state != ncclSuccess)
      fail(state, op.receive ? "ncclRecv" : "ncclSend", p2p_what(op));
    check(cudaEventRecord(op.done, c.stream), "cudaEventRecord (p2p)");
    op.state = P2pOp::State::kEnqueued;
    c.queue.pop_front();
  }
}

void NcclCommunicator::progress() {
  for (auto &[key, c] : channels_)
    advance(*c);
}

bool NcclCommunicator::complete(P2pOp &op) {
  if (op.state == P2pOp::State::kDone)
    return true;
  if (op.state != P2pOp::State::kEnqueued)
    return false;
  const cudaError_t status = cudaEventQuery(op.done);
  if (status == cudaErrorNotReady)
    return false;
  check(status, "cudaEventQuery (p2p)");
  op.state = P2pOp::State::kDone;
  return true;
}

std::string NcclCommunicator::p2p_what(const P2pOp &op) const {
  return (op.receive ? "recv from " : "send to ") + rank_name(op.peer);
}

// Polls until the transfer is complete (queued calls of every channel move on meanwhile), then
// orders compute_stream() after a receive: its consumers are kernels enqueued from here on. The
// host has seen the event complete, so the wait costs nothing; it states the dependency and
// keeps it should this wait stop blocking the host.
void NcclCommunicator::wait(Request &request) {
  if (auto *h = dynamic_cast<HostRequest *>(&request); h && &h->owner == this)
    return host_->wait(*h->inner);
  if (auto *c = dynamic_cast<CollectiveRequest *>(&request); c && &c->owner == this)
    return wait_overlapped(*c);
  auto *r = dynamic_cast<DeviceRequest *>(&request);
  if (!r)
    return Communicator::wait(request); // the completed request of a summed host buffer
  if (&r->owner != this)
    throw Error("wait over the " + axis_text() + " on a request of another communicator");
  P2pOp &op = *r->op;
  Poll poll(timeout());
  while (!r->test()) {
    if (poll.expired()) {
      const auto it = channels_.find(std::make_tuple(op.peer, op.tag, !op.receive));
      if (it != channels_.end() && it->second->state != Channel::State::kReady)
        timed_out(p2p_what(op), "no NCCL connection for tag " + std::to_string(op.tag) +
                                    " yet: the other rank has not made the matching " +
                                    (op.receive ? "send" : "receive") +
                                    " (it may have died or hung, or the two ranks' schedules do "
                                    "not match)");
      timed_out(p2p_what(op), "the other rank may have died or hung, or the two ranks' schedules "
                              "do not match");
    }
    poll.pause();
  }
  if (op.receive && op.done)
    check(cudaStreamWaitEvent(compute_stream(), op.done, 0), "cudaStreamWaitEvent (p2p receive)");
}

} // namespace megart::cuda::nccl
