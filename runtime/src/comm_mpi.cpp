// The only runtime source that includes mpi.h.
#include "megart/comm_mpi.h"

#include "megart/error.h"

// The C API only: OpenMPI's mpi.h otherwise pulls in its C++ bindings (libmpi_cxx).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace megart {

namespace {

// MPI counts are int; longer all-reduces and broadcasts are sent in pieces of this size.
constexpr int64_t kMaxPiece = int64_t{1} << 30;

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS)
    return "MPI error code " + std::to_string(code);
  return std::string(text, static_cast<size_t>(len));
}

bool overlaps(const float *a, int64_t na, const float *b, int64_t nb) {
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
};

namespace {

void check(int rc, const char *call, const char *method, const std::string &axis) {
  if (rc == MPI_SUCCESS)
    return;
  throw Error(std::string(call) + " failed in " + method + " over the " + axis + " axis: " +
              mpi_error_text(rc) +
              " (every rank of the axis must make the same collective calls with the same "
              "sizes)");
}

int to_count(int64_t n, const char *method, const std::string &axis) {
  if (n < 0 || n > INT_MAX)
    throw Error(std::string(method) + " over the " + axis + " axis got " + std::to_string(n) +
                " elements per rank; MPI counts are limited to " + std::to_string(INT_MAX) +
                " (split the buffer into smaller calls)");
  return static_cast<int>(n);
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
  return std::unique_ptr<MpiCommunicator>(new MpiCommunicator(std::move(h), axis));
}

void MpiCommunicator::all_reduce_sum(float *data, int64_t n) {
  for (int64_t i = 0; i < n; i += kMaxPiece)
    check(MPI_Allreduce(MPI_IN_PLACE, data + i, static_cast<int>(std::min(kMaxPiece, n - i)),
                        MPI_FLOAT, MPI_SUM, handle_->comm),
          "MPI_Allreduce", "all_reduce_sum(float)", axis_);
}

void MpiCommunicator::all_reduce_max(float *data, int64_t n) {
  for (int64_t i = 0; i < n; i += kMaxPiece)
    check(MPI_Allreduce(MPI_IN_PLACE, data + i, static_cast<int>(std::min(kMaxPiece, n - i)),
                        MPI_FLOAT, MPI_MAX, handle_->comm),
          "MPI_Allreduce", "all_reduce_max(float)", axis_);
}

void MpiCommunicator::all_reduce_sum(double *data, int64_t n) {
  for (int64_t i = 0; i < n; i += kMaxPiece)
    check(MPI_Allreduce(MPI_IN_PLACE, data + i, static_cast<int>(std::min(kMaxPiece, n - i)),
                        MPI_DOUBLE, MPI_SUM, handle_->comm),
          "MPI_Allreduce", "all_reduce_sum(double)", axis_);
}

void MpiCommunicator::all_gather(float *out, const float *in, int64_t n) {
  const int count = to_count(n, "all_gather", axis_);
  if (in == out + static_cast<int64_t>(rank_) * n) { // this rank's chunk is already in place
    check(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, out, count, MPI_FLOAT,
                        handle_->comm),
          "MPI_Allgather", "all_gather", axis_);
    return;
  }
  std::vector<float> copy;
  if (overlaps(in, n, out, n * size_)) { // MPI forbids aliasing other than MPI_IN_PLACE
    copy.assign(in, in + n);
    in = copy.data();
  }
  check(MPI_Allgather(in, count, MPI_FLOAT, out, count, MPI_FLOAT, handle_->comm),
        "MPI_Allgather", "all_gather", axis_);
}

void MpiCommunicator::reduce_scatter_sum(float *out, const float *in, int64_t n) {
  const int count = to_count(n, "reduce_scatter_sum", axis_);
  if (out == in) { // MPI_IN_PLACE: input is the whole buffer, the result lands in its start
    check(MPI_Reduce_scatter_block(MPI_IN_PLACE, out, count, MPI_FLOAT, MPI_SUM, handle_->comm),
          "MPI_Reduce_scatter_block", "reduce_scatter_sum", axis_);
    return;
  }
  std::vector<float> copy;
  if (overlaps(out, n, in, n * size_)) {
    copy.assign(in, in + n * size_);
    in = copy.data();
  }
  check(MPI_Reduce_scatter_block(in, out, count, MPI_FLOAT, MPI_SUM, handle_->comm),
        "MPI_Reduce_scatter_block", "reduce_scatter_sum", axis_);
}

void MpiCommunicator::broadcast(float *data, int64_t n, int root) {
  if (root < 0 || root >= size_)
    throw Error("broadcast over the " + axis_ + " axis from root " + std::to_string(root) +
                ": the axis has ranks 0.." + std::to_string(size_ - 1));
  for (int64_t i = 0; i < n; i += kMaxPiece)
    check(MPI_Bcast(data + i, static_cast<int>(std::min(kMaxPiece, n - i)), MPI_FLOAT, root,
                    handle_->comm),
          "MPI_Bcast", "broadcast", axis_);
}

void MpiCommunicator::barrier() {
  check(MPI_Barrier(handle_->comm), "MPI_Barrier", "barrier", axis_);
}

} // namespace megart
