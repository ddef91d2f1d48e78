// Collective communication along one axis of the process grid (tp, dp or pp). Generated
// programs and the training loop talk only to this interface; the MPI (CPU) and, later, NCCL
// (GPU) implementations live in their own files, the only ones that include mpi.h / nccl.h.
#pragma once

#include "megart/half.h"

#include <cstdint>
#include <memory>
#include <string>

namespace megart {

// Point-to-point tags, one range per user, so that messages of different users never match.
namespace p2p_tag {
constexpr int kPipelineActivation = 7100; // pipeline executor: forward activations
constexpr int kPipelineGrad = 7101;       // pipeline executor: activation gradients
constexpr int kCheckpointTensor = 7200;   // pipeline stages -> the checkpoint writer
constexpr int kRing = 7300;               // MpiCommunicator's ring all-reduce
constexpr int kNcclChannelSetup = 7400;   // NCCL communicator: its point-to-point channels' ids
constexpr int kNcclRulesChannel = 7500;   // NcclRulesCommunicator: every message, whatever its tag
} // namespace p2p_tag

// A point-to-point transfer in flight (Communicator::isend / irecv). A send's buffer must not
// change, a receive's must not be read, until it is complete. Destroying one that is still in
// flight abandons it (error paths only: the job is about to stop).
class Request {
public:
  virtual ~Request() = default;
  // Whether the transfer is complete; never blocks (it lets transfers progress).
  virtual bool test() = 0;
};

// What this process is doing, named by communication timeouts so that a hung job says where
// each rank stopped: "iteration 3, schedule step 7 (RecvGrad chunk 0 microbatch 1)". The
// training loop sets iteration and phase, the pipeline executor the schedule step. Plain fields
// (string literals, numbers): set on every step, formatted only when something fails.
struct CommActivity {
  int64_t iteration = 0;        // 0: not in the training loop
  const char *phase = nullptr;  // "data-parallel gradient sync", ...; null: none
  int64_t step = -1;            // schedule step (with op, chunk, microbatch); -1: none
  const char *op = nullptr;
  int64_t chunk = -1, microbatch = -1;
  // "iteration 3, data-parallel gradient sync", or with a step "iteration 3, schedule step 7
  // (RecvGrad chunk 0 microbatch 1)"; "" when nothing is set.
  std::string describe() const;
};
// This process's activity (only the main thread communicates).
CommActivity &comm_activity();

// Megatron's --distributed-timeout-minutes default.
constexpr double kDefaultCommTimeoutSeconds = 600;

class Communicator {
public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // In place: every rank ends with the elementwise sum (max) over the ranks.
  virtual void all_reduce_sum(float *data, int64_t n) = 0;
  virtual void all_reduce_max(float *data, int64_t n) = 0;
  virtual void all_reduce_sum(double *data, int64_t n) = 0;
  // out (size() * n elements) = the n elements of every rank, in rank order: rank r's `in`
  // lands at out + r * n. In place when in == out + rank() * n.
  virtual void all_gather(float *out, const float *in, int64_t n) = 0;
  // in has size() * n elements, chunk c = in[c * n, (c + 1) * n); out (n elements) = the sum
  // over ranks of their chunk rank(). In place when out == in (the result fills the first n).
  virtual void reduce_scatter_sum(float *out, const float *in, int64_t n) = 0;
  // Every rank ends with root's n elements.
  virtual void broadcast(float *data, int64_t n, int root) = 0;
  virtual void barrier() = 0;

  // Starts an in-place sum over the ranks of n floats and returns it in flight: `data` must not
  // be used until the request is complete (test(), or wait()). The base class sums at once and
  // returns a completed request; NCCL's runs on a side stream while later kernels go on.
  virtual std::unique_ptr<Request> iall_reduce_sum(float *data, int64_t n);
  // The same for reduce_scatter_sum and all_gather (the base class runs them at once and returns
  // a completed request).
  virtual std::unique_ptr<Request> ireduce_scatter_sum(float *out, const float *in, int64_t n);
  virtual std::unique_ptr<Request> iall_gather(float *out, const float *in, int64_t n);

  // The same sums of n bf16 values (megart/bf16.h; --grad-reduce-in-bf16): every partial sum is
  // rounded to bf16, as NCCL's ncclBfloat16 sum does, and every rank ends with the same bits.
  // The base class's blocking form throws (the MPI, NCCL and self communicators have one); its
  // iall_reduce_sum_bf16 sums at once and returns a completed request.
  virtual void all_reduce_sum_bf16(uint16_t *data, int64_t n);
  virtual std::unique_ptr<Request> iall_reduce_sum_bf16(uint16_t *data, int64_t n);

  // 16-bit activations (--bf16 / --fp16): the same collectives on bf16_t / fp16_t
  // (megart/half.h), with the layouts and in-place rules of the float ones. Sums add in fp32 and
  // round each partial sum to the 16-bit type (as NCCL's 16-bit sums do); every rank ends with
  // the same bits. The base class's bf16 all_reduce_sum is all_reduce_sum_bf16; the others throw
  // megart::Error (MpiCommunicator and SelfCommunicator have all of them).
  virtual void all_reduce_sum(bf16_t *data, int64_t n);
  virtual void all_reduce_sum(fp16_t *data, int64_t n);
  virtual void all_gather(bf16_t *out, const bf16_t *in, int64_t n);
  virtual void all_gather(fp16_t *out, const fp16_t *in, int64_t n);
  virtual void reduce_scatter_sum(bf16_t *out, const bf16_t *in, int64_t n);
  virtual void reduce_scatter_sum(fp16_t *out, const fp16_t *in, int64_t n);

  // Expert parallelism's exchange: rank r gets send_counts[r] elements of `in` (every rank's part
  // in rank order, this rank's own included) and this rank receives recv_counts[r] elements from
  // rank r into `out`, likewise in rank order; in and out must not overlap. The base class throws
  // (the MPI and self communicators have it).
  virtual void all_to_all_v(const float *in, const int64_t *send_counts, float *out, const int64_t *recv_counts);
  // The same with n int32 values for every rank: in[r n, (r + 1) n) to rank r, out[r n, ...) from it.
  virtual void all_to_all(const int32_t *in, int32_t *out, int64_t n);

  // Non-blocking point-to-point of n floats to / from rank `peer` of this communicator. Between
  // two ranks, messages with the same tag arrive in the order they were sent. The base class
  // (and SelfCommunicator, which has no peers) throws.
  virtual std::unique_ptr<Request> isend(const float *data, int64_t n, int peer, int tag);
  virtual std::unique_ptr<Request> irecv(float *data, int64_t n, int peer, int tag);
  // Blocks until `request` (from this communicator) is complete, or throws megart::Error after
  // timeout() seconds. A request that is already complete returns at once.
  virtual void wait(Request &request);

  // How long one call may wait for the other ranks before it throws megart::Error naming the
  // axis, the operation, the ranks and comm_activity() (the MPI and NCCL communicators; the
  // others never wait). Communicators split from this one inherit it. Throws unless seconds > 0.
  // Virtual so that a communicator wrapping another (NCCL's keeps its host one) passes it on.
  virtual void set_timeout(double seconds);
  double timeout() const { return timeout_seconds_; }

private:
  double timeout_seconds_ = kDefaultCommTimeoutSeconds;
};

// The communicator of an axis of size 1: every collective is a copy or nothing, and it never
// waits (so it has no timeout to honour).
class SelfCommunicator final : public Communicator {
public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void all_reduce_sum(float *, int64_t) override {}
  void all_reduce_max(float *, int64_t) override {}
  void all_reduce_sum(double *, int64_t) override {}
  void all_reduce_sum_bf16(uint16_t *, int64_t) override {}
  void all_reduce_sum(bf16_t *, int64_t) override {}
  void all_reduce_sum(fp16_t *, int64_t) override {}
  void all_gather(float *out, const float *in, int64_t n) override;
  void all_gather(bf16_t *out, const bf16_t *in, int64_t n) override;
  void all_gather(fp16_t *out, const fp16_t *in, int64_t n) override;
  void reduce_scatter_sum(float *out, const float *in, int64_t n) override;
  void reduce_scatter_sum(bf16_t *out, const bf16_t *in, int64_t n) override;
  void reduce_scatter_sum(fp16_t *out, const fp16_t *in, int64_t n) override;
  void broadcast(float *, int64_t, int) override {}
  void barrier() override {}
  void all_to_all_v(const float *in, const int64_t *send_counts, float *out, const int64_t *) override;
  void all_to_all(const int32_t *in, int32_t *out, int64_t n) override;
  // isend / irecv throw (the base class's): there are no peers.
};

} // namespace megart
