// Stands in for comm_mpi.cpp when the runtime is built without MPI (runtime/CMakeLists.txt:
// -DMEGART_MPI=OFF, or no MPI found, as on the lent GPU machine). Same declarations
// (megart/comm_mpi.h), no mpi.h: MPI never runs, so a process is always a grid of one.
// ProcessGrid::launch reaches MpiSession only under an MPI launcher, so single-process runs
// never get here; everything that would need MPI says why it cannot work.
#include "megart/comm_mpi.h"

#include "megart/error.h"

#include <cstdlib>

namespace megart {

namespace {

[[noreturn]] void no_mpi() {
  throw Error("this runtime was built without MPI (no MPI found at build time): it runs one "
              "process only; rebuild with OpenMPI installed to use mpirun");
}

} // namespace

bool mpi_running() { return false; }

MpiSession::MpiSession() { no_mpi(); }

MpiSession::~MpiSession() = default;

// As comm_mpi.cpp's when MPI is not running: there is no job to stop beyond this process.
void mpi_abort(int code) { std::exit(code); }

// No MpiCommunicator can exist (world() is the only way to make a first one), so the methods
// below are unreachable; they are defined for the class's vtable (comm_nccl.cpp's dynamic_cast).
struct MpiCommunicator::Handle {};

MpiCommunicator::MpiCommunicator(std::unique_ptr<Handle> handle, std::string axis)
    : handle_(std::move(handle)), axis_(std::move(axis)) {
  no_mpi();
}

MpiCommunicator::~MpiCommunicator() = default;

std::unique_ptr<MpiCommunicator> MpiCommunicator::world() { no_mpi(); }

std::unique_ptr<MpiCommunicator> MpiCommunicator::split(int, int, const std::string &) const {
  no_mpi();
}

void MpiCommunicator::all_reduce_sum(float *, int64_t) { no_mpi(); }
void MpiCommunicator::all_reduce_max(float *, int64_t) { no_mpi(); }
void MpiCommunicator::all_reduce_sum(double *, int64_t) { no_mpi(); }
void MpiCommunicator::all_reduce_sum_bf16(uint16_t *, int64_t) { no_mpi(); }
void MpiCommunicator::all_gather(float *, const float *, int64_t) { no_mpi(); }
void MpiCommunicator::reduce_scatter_sum(float *, const float *, int64_t) { no_mpi(); }
void MpiCommunicator::all_reduce_sum(bf16_t *, int64_t) { no_mpi(); }
void MpiCommunicator::all_reduce_sum(fp16_t *, int64_t) { no_mpi(); }
void MpiCommunicator::all_gather(bf16_t *, const bf16_t *, int64_t) { no_mpi(); }
void MpiCommunicator::all_gather(fp16_t *, const fp16_t *, int64_t) { no_mpi(); }
void MpiCommunicator::reduce_scatter_sum(bf16_t *, const bf16_t *, int64_t) { no_mpi(); }
void MpiCommunicator::reduce_scatter_sum(fp16_t *, const fp16_t *, int64_t) { no_mpi(); }
std::unique_ptr<Request> MpiCommunicator::ireduce_scatter_sum(float *, const float *, int64_t) { no_mpi(); }
std::unique_ptr<Request> MpiCommunicator::iall_gather(float *, const float *, int64_t) { no_mpi(); }
void MpiCommunicator::broadcast(float *, int64_t, int) { no_mpi(); }
void MpiCommunicator::all_to_all_v(const float *, const int64_t *, float *, const int64_t *) { no_mpi(); }
void MpiCommunicator::all_to_all(const int32_t *, int32_t *, int64_t) { no_mpi(); }
void MpiCommunicator::barrier() { no_mpi(); }
std::unique_ptr<Request> MpiCommunicator::isend(const float *, int64_t, int, int) { no_mpi(); }
std::unique_ptr<Request> MpiCommunicator::irecv(float *, int64_t, int, int) { no_mpi(); }
void MpiCommunicator::wait(Request &) { no_mpi(); }

} // namespace megart
