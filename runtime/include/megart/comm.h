// Collective communication along one axis of the process grid (tp, dp or pp). Generated
// programs and the training loop talk only to this interface; the MPI (CPU) and, later, NCCL
// (GPU) implementations live in their own files, the only ones that include mpi.h / nccl.h.
#pragma once

#include <cstdint>

namespace megart {

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
};

// The communicator of an axis of size 1: every collective is a copy or nothing.
class SelfCommunicator final : public Communicator {
public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void all_reduce_sum(float *, int64_t) override {}
  void all_reduce_max(float *, int64_t) override {}
  void all_reduce_sum(double *, int64_t) override {}
  void all_gather(float *out, const float *in, int64_t n) override;
  void reduce_scatter_sum(float *out, const float *in, int64_t n) override;
  void broadcast(float *, int64_t, int) override {}
  void barrier() override {}
};

} // namespace megart
