// The parts of the Communicator interface every implementation shares: the timeout, the
// activity named in timeout errors, and point-to-point for communicators that have none.
#include "megart/comm.h"

#include "megart/error.h"

#include <cmath>

namespace megart {

std::string CommActivity::describe() const {
  std::string s;
  if (iteration > 0)
    s = "iteration " + std::to_string(iteration);
  auto add = [&s](const std::string &part) { s += (s.empty() ? "" : ", ") + part; };
  if (phase && step < 0) // a schedule step says more than its phase
    add(phase);
  if (step >= 0)
    add("schedule step " + std::to_string(step) + " (" + (op ? op : "?") + " chunk " +
        std::to_string(chunk) + " microbatch " + std::to_string(microbatch) + ")");
  return s;
}

CommActivity &comm_activity() {
  static CommActivity activity;
  return activity;
}

void Communicator::set_timeout(double seconds) {
  if (!(std::isfinite(seconds) && seconds > 0))
    throw Error("communication timeout of " + std::to_string(seconds) +
                " s; it must be > 0 (--distributed-timeout-minutes)");
  timeout_seconds_ = seconds;
}

namespace {
class CompletedRequest final : public Request {
public:
  bool test() override { return true; }
};
} // namespace

std::unique_ptr<Request> Communicator::iall_reduce_sum(float *data, int64_t n) {
  all_reduce_sum(data, n);
  return std::make_unique<CompletedRequest>();
}

std::unique_ptr<Request> Communicator::ireduce_scatter_sum(float *out, const float *in, int64_t n) {
  reduce_scatter_sum(out, in, n);
  return std::make_unique<CompletedRequest>();
}

std::unique_ptr<Request> Communicator::iall_gather(float *out, const float *in, int64_t n) {
  all_gather(out, in, n);
  return std::make_unique<CompletedRequest>();
}

void Communicator::all_reduce_sum_bf16(uint16_t *, int64_t) {
  throw Error("this communicator cannot sum bf16 values (--grad-reduce-in-bf16 needs the MPI or "
              "NCCL communicator)");
}

std::unique_ptr<Request> Communicator::iall_reduce_sum_bf16(uint16_t *data, int64_t n) {
  all_reduce_sum_bf16(data, n);
  return std::make_unique<CompletedRequest>();
}

// bf16_t is its 16 bits: a communicator with a bf16 sum (NCCL's) serves both names.
void Communicator::all_reduce_sum(bf16_t *data, int64_t n) {
  all_reduce_sum_bf16(reinterpret_cast<uint16_t *>(data), n);
}

namespace {
[[noreturn]] void no_16bit(const char *what) {
  throw Error(std::string("this communicator has no 16-bit ") + what +
              " (programs with 16-bit activations, --bf16 / --fp16, need the MPI communicator "
              "or a size-1 axis)");
}
} // namespace

void Communicator::all_reduce_sum(fp16_t *, int64_t) { no_16bit("all_reduce_sum(fp16)"); }
void Communicator::all_gather(bf16_t *, const bf16_t *, int64_t) { no_16bit("all_gather(bf16)"); }
void Communicator::all_gather(fp16_t *, const fp16_t *, int64_t) { no_16bit("all_gather(fp16)"); }
void Communicator::reduce_scatter_sum(bf16_t *, const bf16_t *, int64_t) {
  no_16bit("reduce_scatter_sum(bf16)");
}
void Communicator::reduce_scatter_sum(fp16_t *, const fp16_t *, int64_t) {
  no_16bit("reduce_scatter_sum(fp16)");
}

namespace {
[[noreturn]] void no_p2p(const char *what, int peer, int size) {
  throw Error(std::string(what) + " with peer " + std::to_string(peer) +
              " on a communicator of size " + std::to_string(size) +
              " that has no point-to-point messages (a size-1 axis has no peers)");
}
} // namespace

void Communicator::all_to_all_v(const float *, const int64_t *, float *, const int64_t *) {
  throw Error("this communicator has no all-to-all (expert parallelism needs the MPI one; the CUDA "
              "backend has no mixture-of-experts kernels yet)");
}

void Communicator::all_to_all(const int32_t *, int32_t *, int64_t) {
  all_to_all_v(nullptr, nullptr, nullptr, nullptr);
}

std::unique_ptr<Request> Communicator::isend(const float *, int64_t, int peer, int) {
  no_p2p("isend", peer, size());
}

std::unique_ptr<Request> Communicator::irecv(float *, int64_t, int peer, int) {
  no_p2p("irecv", peer, size());
}

void Communicator::wait(Request &request) {
  if (!request.test()) // a completed one (the base class's collectives return those) is done
    throw Error("wait on a communicator that has no point-to-point messages");
}

} // namespace megart
