// MPI (OpenMPI) behind the Communicator interface, and the MPI process lifetime. mpi.h is
// included only by comm_mpi.cpp: this header keeps the MPI handle opaque, so generated code and
// the rest of the runtime compile without MPI's include paths. A runtime built without MPI
// (runtime/CMakeLists.txt, MEGART_MPI) defines these in comm_mpi_stub.cpp instead: mpi_running()
// is false, and MpiSession and MpiCommunicator::world() throw megart::Error saying so.
#pragma once

#include "megart/comm.h"

#include <memory>
#include <string>

namespace megart {

// Starts MPI (MPI_Init_thread, MPI_THREAD_FUNNELED: only the main thread calls MPI; OpenMP
// threads never do) unless it is already running, and finalizes it when destroyed if this
// object started it. A test main that called MPI_Init itself keeps ownership of MPI.
class MpiSession {
public:
  MpiSession();
  ~MpiSession();
  MpiSession(const MpiSession &) = delete;
  MpiSession &operator=(const MpiSession &) = delete;

private:
  bool started_here_ = false;
};

// True between MPI_Init and MPI_Finalize.
bool mpi_running();

// Stops every process of the job (MPI_Abort on MPI_COMM_WORLD) so that ranks waiting in a
// collective for this one do not hang. Without MPI running it calls std::exit(code).
[[noreturn]] void mpi_abort(int code);

// One MPI communicator. Collectives report failures as megart::Error naming the MPI call, the
// Communicator method and the axis ("tp", "dp", "pp", "world"), because the communicators use
// MPI_ERRORS_RETURN instead of MPI's default of aborting the job silently. Every call honours
// timeout(): collectives run as their non-blocking MPI variants and the rank polls for
// completion (yielding the core between polls), so a rank whose peer died or hung throws
// instead of waiting forever.
class MpiCommunicator final : public Communicator {
public:
  // MPI_COMM_WORLD (not freed on destruction). MPI must be running.
  static std::unique_ptr<MpiCommunicator> world();
  // MPI_Comm_split: the ranks that pass the same `color` form one communicator, ordered by
  // `key`. Collective over this communicator. The new communicator is freed on destruction and
  // has this one's timeout.
  std::unique_ptr<MpiCommunicator> split(int color, int key, const std::string &axis) const;
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator &) = delete;
  MpiCommunicator &operator=(const MpiCommunicator &) = delete;

  const std::string &axis() const { return axis_; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void all_reduce_sum(float *data, int64_t n) override;
  void all_reduce_max(float *data, int64_t n) override;
  void all_reduce_sum(double *data, int64_t n) override;
  void all_reduce_sum_bf16(uint16_t *data, int64_t n) override;
  void all_gather(float *out, const float *in, int64_t n) override;
  void reduce_scatter_sum(float *out, const float *in, int64_t n) override;
  // 16-bit: sums run as a ring of point-to-point messages (MPI has no 16-bit float sum), adding
  // in fp32 and rounding at every hop; the gather moves the bits (MPI_UINT16_T).
  void all_reduce_sum(bf16_t *data, int64_t n) override;
  void all_reduce_sum(fp16_t *data, int64_t n) override;
  void all_gather(bf16_t *out, const bf16_t *in, int64_t n) override;
  void all_gather(fp16_t *out, const fp16_t *in, int64_t n) override;
  void reduce_scatter_sum(bf16_t *out, const bf16_t *in, int64_t n) override;
  void reduce_scatter_sum(fp16_t *out, const fp16_t *in, int64_t n) override;
  std::unique_ptr<Request> ireduce_scatter_sum(float *out, const float *in, int64_t n) override;
  std::unique_ptr<Request> iall_gather(float *out, const float *in, int64_t n) override;
  void broadcast(float *data, int64_t n, int root) override;
  void all_to_all_v(const float *in, const int64_t *send_counts, float *out, const int64_t *recv_counts) override;
  void all_to_all(const int32_t *in, int32_t *out, int64_t n) override;
  void barrier() override;
  std::unique_ptr<Request> isend(const float *data, int64_t n, int peer, int tag) override;
  std::unique_ptr<Request> irecv(float *data, int64_t n, int peer, int tag) override;
  void wait(Request &request) override;
  // isend as MPI_Issend: a send completes only once its receive is posted (NCCL's rendezvous;
  // comm_nccl_rules.h). Communicators split from this one inherit it.
  void set_synchronous_sends(bool on) { synchronous_sends_ = on; }

private:
  struct Handle; // holds the MPI_Comm
  MpiCommunicator(std::unique_ptr<Handle> handle, std::string axis);
  // T is float, bf16_t or fp16_t; defined and used in comm_mpi.cpp only.
  template <typename T>
  void ring_step(const T *send, int send_count, T *recv, int recv_count, const char *method);
  template <typename T> void ring_all_reduce_sum(T *data, int64_t n, const char *method);
  template <typename T> void all_reduce_sum_16(T *data, int64_t n, const char *method);
  template <typename T> void ring_reduce_scatter_sum(T *out, const T *in, int64_t n, const char *method);
  template <typename T> void gather(T *out, const T *in, int64_t n, const char *method);

  std::unique_ptr<Handle> handle_;
  std::string axis_;
  int rank_ = 0;
  int size_ = 1;
  bool synchronous_sends_ = false;
};

} // namespace megart
