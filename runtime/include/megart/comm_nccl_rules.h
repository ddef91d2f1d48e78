// NCCL's rules, enforced on the CPU's MPI communicators (MEGART_NCCL_RULES=1; issue [21]). MPI
// forgives what NCCL does not: it sends small messages eagerly (a send completes before its
// receive is posted), matches point-to-point messages by tag, and lets ranks call different
// collectives as long as the bytes line up. A schedule that relies on any of these deadlocks or
// mixes up buffers under NCCL. This communicator wraps an MPI one and makes each a loud error on
// the CPU:
// - every collective first compares, over the communicator, what each rank calls (operation,
//   element count, root) and how many collectives it called before: NCCL needs every rank of a
//   communicator to call the same collectives in the same order;
// - no collective starts while a point-to-point transfer of the same communicator is in flight
//   (NCCL runs a communicator's operations one after another);
// - point-to-point messages travel on channels, each after a header naming its tag and size,
//   checked by the receiver: NCCL has no tags, so on a channel the i-th send to a peer must be
//   the i-th receive there. MEGART_NCCL_RULES=1 makes a channel per (peer, tag, direction), as
//   megart's NCCL communicator does (runtime/cuda/src/comm_nccl_p2p.cpp: a 2-rank communicator
//   each); MEGART_NCCL_RULES=one-channel one per (peer, direction): pipeline messages on one pp
//   communicator, whatever their tag;
// - sends are synchronous (MPI_Issend, set on the MPI communicator by ProcessGrid): a send
//   completes only once its receive is posted, as NCCL's rendezvous.
// Tests run every plan's schedule under it (test/e2e/plan_parity.py --nccl-rules). Costs a small
// all-reduce per collective and a header per message: a test tool, not a training mode.
#pragma once

#include "megart/comm.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>

namespace megart {

// What MEGART_NCCL_RULES asks ProcessGrid for: unset or 0 nothing, 1 the rules with a channel per
// (peer, tag), one-channel with one per peer; any other value is refused by name.
enum class NcclRules { Off, ChannelPerTag, OneChannel };
NcclRules nccl_rules_requested();

class NcclRulesCommunicator final : public Communicator {
public:
  // `inner` must already send synchronously (MpiCommunicator::set_synchronous_sends); `rules`
  // ChannelPerTag or OneChannel.
  NcclRulesCommunicator(std::unique_ptr<Communicator> inner, std::string axis, NcclRules rules);

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  void all_reduce_sum(float *data, int64_t n) override;
  void all_reduce_max(float *data, int64_t n) override;
  void all_reduce_sum(double *data, int64_t n) override;
  void all_gather(float *out, const float *in, int64_t n) override;
  void reduce_scatter_sum(float *out, const float *in, int64_t n) override;
  void broadcast(float *data, int64_t n, int root) override;
  void barrier() override;
  std::unique_ptr<Request> iall_reduce_sum(float *data, int64_t n) override;
  std::unique_ptr<Request> ireduce_scatter_sum(float *out, const float *in, int64_t n) override;
  std::unique_ptr<Request> iall_gather(float *out, const float *in, int64_t n) override;
  void all_reduce_sum_bf16(uint16_t *data, int64_t n) override;
  std::unique_ptr<Request> iall_reduce_sum_bf16(uint16_t *data, int64_t n) override;
  void all_reduce_sum(bf16_t *data, int64_t n) override;
  void all_reduce_sum(fp16_t *data, int64_t n) override;
  void all_gather(bf16_t *out, const bf16_t *in, int64_t n) override;
  void all_gather(fp16_t *out, const fp16_t *in, int64_t n) override;
  void reduce_scatter_sum(bf16_t *out, const bf16_t *in, int64_t n) override;
  void reduce_scatter_sum(fp16_t *out, const fp16_t *in, int64_t n) override;
  void all_to_all_v(const float *in, const int64_t *send_counts, float *out, const int64_t *recv_counts) override;
  void all_to_all(const int32_t *in, int32_t *out, int64_t n) override;
  std::unique_ptr<Request> isend(const float *data, int64_t n, int peer, int tag) override;
  std::unique_ptr<Request> irecv(float *data, int64_t n, int peer, int tag) override;
  void wait(Request &request) override;
  void set_timeout(double seconds) override;

  // Point-to-point transfers started and not yet seen complete (by wait or test).
  int64_t in_flight() const { return in_flight_; }

private:
  class Transfer; // a message and its header in flight
  // Collective: every rank's (operation, n, root, collectives before) against this rank's;
  // throws megart::Error naming both calls when they differ, or when transfers are in flight.
  void check_collective(const char *operation, int64_t n, int root = -1);

  std::unique_ptr<Communicator> inner_;
  std::string axis_;
  int64_t collectives_ = 0;
  int64_t in_flight_ = 0;
  NcclRules rules_;
  std::map<std::pair<int, int>, int64_t> sent_, received_; // messages per (peer, channel), in order
};

} // namespace megart
