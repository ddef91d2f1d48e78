#include "megart/comm_counting.h"

namespace megart {

CountingCommunicator::CountingCommunicator(std::unique_ptr<Communicator> inner, double *counter)
    : inner_(std::move(inner)), counter_(counter) {
  Communicator::set_timeout(inner_->timeout());
}

void CountingCommunicator::all_reduce_sum(float *data, int64_t n) {
  count_all_reduce(n, sizeof(float));
  inner_->all_reduce_sum(data, n);
}

void CountingCommunicator::all_reduce_max(float *data, int64_t n) {
  count_all_reduce(n, sizeof(float));
  inner_->all_reduce_max(data, n);
}

void CountingCommunicator::all_reduce_sum(double *data, int64_t n) {
  count_all_reduce(n, sizeof(double));
  inner_->all_reduce_sum(data, n);
}

void CountingCommunicator::all_gather(float *out, const float *in, int64_t n) {
  count_gather(n * inner_->size());
  inner_->all_gather(out, in, n);
}

void CountingCommunicator::reduce_scatter_sum(float *out, const float *in, int64_t n) {
  count_gather(n * inner_->size());
  inner_->reduce_scatter_sum(out, in, n);
}

void CountingCommunicator::broadcast(float *data, int64_t n, int root) {
  count_gather(n);
  inner_->broadcast(data, n, root);
}

// What goes to the other ranks (this rank's own part stays).
void CountingCommunicator::all_to_all_v(const float *in, const int64_t *send_counts, float *out,
                                        const int64_t *recv_counts) {
  for (int r = 0; r < inner_->size(); ++r)
    if (r != inner_->rank())
      *counter_ += static_cast<double>(send_counts[r]) * sizeof(float);
  inner_->all_to_all_v(in, send_counts, out, recv_counts);
}

void CountingCommunicator::all_to_all(const int32_t *in, int32_t *out, int64_t n) {
  *counter_ += static_cast<double>(n) * static_cast<double>(inner_->size() - 1) * sizeof(int32_t);
  inner_->all_to_all(in, out, n);
}

std::unique_ptr<Request> CountingCommunicator::iall_reduce_sum(float *data, int64_t n) {
  count_all_reduce(n, sizeof(float));
  return inner_->iall_reduce_sum(data, n);
}

std::unique_ptr<Request> CountingCommunicator::ireduce_scatter_sum(float *out, const float *in, int64_t n) {
  count_gather(n * inner_->size());
  return inner_->ireduce_scatter_sum(out, in, n);
}

std::unique_ptr<Request> CountingCommunicator::iall_gather(float *out, const float *in, int64_t n) {
  count_gather(n * inner_->size());
  return inner_->iall_gather(out, in, n);
}

void CountingCommunicator::all_reduce_sum_bf16(uint16_t *data, int64_t n) {
  count_all_reduce(n, sizeof(uint16_t));
  inner_->all_reduce_sum_bf16(data, n);
}

std::unique_ptr<Request> CountingCommunicator::iall_reduce_sum_bf16(uint16_t *data, int64_t n) {
  count_all_reduce(n, sizeof(uint16_t));
  return inner_->iall_reduce_sum_bf16(data, n);
}

void CountingCommunicator::all_reduce_sum(bf16_t *data, int64_t n) {
  count_all_reduce(n, sizeof(bf16_t));
  inner_->all_reduce_sum(data, n);
}

void CountingCommunicator::all_reduce_sum(fp16_t *data, int64_t n) {
  count_all_reduce(n, sizeof(fp16_t));
  inner_->all_reduce_sum(data, n);
}

void CountingCommunicator::all_gather(bf16_t *out, const bf16_t *in, int64_t n) {
  count_gather(n * inner_->size(), sizeof(bf16_t));
  inner_->all_gather(out, in, n);
}

void CountingCommunicator::all_gather(fp16_t *out, const fp16_t *in, int64_t n) {
  count_gather(n * inner_->size(), sizeof(fp16_t));
  inner_->all_gather(out, in, n);
}

void CountingCommunicator::reduce_scatter_sum(bf16_t *out, const bf16_t *in, int64_t n) {
  count_gather(n * inner_->size(), sizeof(bf16_t));
  inner_->reduce_scatter_sum(out, in, n);
}

void CountingCommunicator::reduce_scatter_sum(fp16_t *out, const fp16_t *in, int64_t n) {
  count_gather(n * inner_->size(), sizeof(fp16_t));
  inner_->reduce_scatter_sum(out, in, n);
}

std::unique_ptr<Request> CountingCommunicator::isend(const float *data, int64_t n, int peer, int tag) {
  *counter_ += static_cast<double>(n * static_cast<int64_t>(sizeof(float)));
  return inner_->isend(data, n, peer, tag);
}

std::unique_ptr<Request> CountingCommunicator::irecv(float *data, int64_t n, int peer, int tag) {
  return inner_->irecv(data, n, peer, tag);
}

void CountingCommunicator::set_timeout(double seconds) {
  Communicator::set_timeout(seconds);
  inner_->set_timeout(seconds);
}

} // namespace megart
