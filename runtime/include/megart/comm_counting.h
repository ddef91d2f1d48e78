// What each rank sends per parallel axis, counted as the ring algorithms move it (the convention
// of NCCL's bus bandwidth): an all-reduce of b bytes over p ranks sends 2 (p - 1) / p x b; a
// reduce-scatter or all-gather of b bytes in all (p - 1) / p x b; a broadcast (p - 1) / p x b; a
// point-to-point send its b bytes (a receive nothing); an all-to-all what goes to the other ranks. megac's communication plan
// (OUT/rank-communication.json) predicts the same numbers per iteration; the training loop
// reports them per iteration (metrics "communication_bytes").
#pragma once

#include "megart/comm.h"

#include <cstdint>
#include <memory>

namespace megart {

// Bytes a rank sent over each axis (the tied-weight groups count as pp: they are pp ranks).
// Expert parallelism's all-to-all exchanges count as ep (the experts' gradient sums as dp).
struct CommunicationBytes {
  double tp = 0, dp = 0, pp = 0, ep = 0;
};

// Bytes one rank sends for an all-reduce of `bytes` over `ranks` ranks (ring).
inline double all_reduce_bytes(double bytes, int64_t ranks) {
  return ranks > 1 ? 2.0 * static_cast<double>(ranks - 1) / static_cast<double>(ranks) * bytes : 0.0;
}
// ... for a reduce-scatter or all-gather of `bytes` in all (every rank's part together), or a
// broadcast of `bytes`.
inline double gather_bytes(double bytes, int64_t ranks) {
  return ranks > 1 ? static_cast<double>(ranks - 1) / static_cast<double>(ranks) * bytes : 0.0;
}

// Passes every call to `inner` and adds what this rank sends to *counter.
class CountingCommunicator final : public Communicator {
public:
  CountingCommunicator(std::unique_ptr<Communicator> inner, double *counter);
  // The communicator it wraps, handed back (this one then counts and forwards nothing).
  std::unique_ptr<Communicator> release() { return std::move(inner_); }
  double *counter() const { return counter_; }

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  void all_reduce_sum(float *data, int64_t n) override;
  void all_reduce_max(float *data, int64_t n) override;
  void all_reduce_sum(double *data, int64_t n) override;
  void all_gather(float *out, const float *in, int64_t n) override;
  void reduce_scatter_sum(float *out, const float *in, int64_t n) override;
  void broadcast(float *data, int64_t n, int root) override;
  void all_to_all_v(const float *in, const int64_t *send_counts, float *out, const int64_t *recv_counts) override;
  void all_to_all(const int32_t *in, int32_t *out, int64_t n) override;
  void barrier() override { inner_->barrier(); }
  std::unique_ptr<Request> iall_reduce_sum(float *data, int64_t n) override;
  std::unique_ptr<Request> ireduce_scatter_sum(float *out, const float *in, int64_t n) override;
  std::unique_ptr<Request> iall_gather(float *out, const float *in, int64_t n) override;
  void all_reduce_sum_bf16(uint16_t *data, int64_t n) override;
  std::unique_ptr<Request> iall_reduce_sum_bf16(uint16_t *data, int64_t n) override;
  // 16-bit activations: 2 bytes per element.
  void all_reduce_sum(bf16_t *data, int64_t n) override;
  void all_reduce_sum(fp16_t *data, int64_t n) override;
  void all_gather(bf16_t *out, const bf16_t *in, int64_t n) override;
  void all_gather(fp16_t *out, const fp16_t *in, int64_t n) override;
  void reduce_scatter_sum(bf16_t *out, const bf16_t *in, int64_t n) override;
  void reduce_scatter_sum(fp16_t *out, const fp16_t *in, int64_t n) override;
  std::unique_ptr<Request> isend(const float *data, int64_t n, int peer, int tag) override;
  std::unique_ptr<Request> irecv(float *data, int64_t n, int peer, int tag) override;
  void wait(Request &request) override { inner_->wait(request); }
  void set_timeout(double seconds) override;

private:
  void count_all_reduce(int64_t n, int64_t element_bytes) {
    *counter_ += all_reduce_bytes(static_cast<double>(n * element_bytes), inner_->size());
  }
  void count_gather(int64_t total_elements, int64_t element_bytes = sizeof(float)) {
    *counter_ += gather_bytes(static_cast<double>(total_elements * element_bytes), inner_->size());
  }
  std::unique_ptr<Communicator> inner_;
  double *counter_;
};

} // namespace megart
