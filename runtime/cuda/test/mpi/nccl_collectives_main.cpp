// Two MPI ranks with a GPU each: the NCCL communicator's collectives, point-to-point messages
// and parallel-axis kernels on device buffers, against the same calls on host buffers (which it
// hands to the MPI communicator it wraps) and the CPU kernels. Its own main, started by
// mpirun -np 2. Without a usable GPU for every rank it says why and exits 0 (ctest: skipped):
// NCCL cannot put two ranks of one communicator on one GPU.
#include "megart/comm_mpi.h"
#include "megart/cuda/comm_nccl.h"
#include "megart/cuda/device.h"
#include "megart/cuda/kernels.h"
#include "megart/error.h"
#include "megart/parallel_kernels.h"

// The C API only: OpenMPI's mpi.h otherwise pulls in its C++ bindings (libmpi_cxx).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

using megart::Communicator;
using megart::Request;
namespace cuda = megart::cuda;
namespace tag = megart::p2p_tag;

int g_rank = 0;
int g_failures = 0;

void expect(bool ok, const std::string &what) {
  if (!ok) {
    ++g_failures;
    std::fprintf(stderr, "[rank %d] FAILED: %s\n", g_rank, what.c_str());
  }
}

void expect_near(const std::vector<float> &got, const std::vector<float> &want, float rtol,
                 const std::string &what) {
  if (got.size() != want.size())
    return expect(false, what + ": " + std::to_string(got.size()) + " elements, want " +
                             std::to_string(want.size()));
  int reported = 0;
  for (size_t i = 0; i < got.size() && reported < 5; ++i)
    if (!(std::fabs(got[i] - want[i]) <= rtol * std::fabs(want[i]) + 1e-7f)) {
      expect(false, what + "[" + std::to_string(i) + "]: got " + std::to_string(got[i]) + ", want " +
                        std::to_string(want[i]));
      ++reported;
    }
}

std::vector<float> random_floats(int64_t n, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float &x : v)
    x = dist(gen);
  return v;
}

// A device copy of a host vector (or n zeroed elements); get() downloads it in stream order.
template <typename T> class DeviceVector {
public:
  explicit DeviceVector(const std::vector<T> &host) : DeviceVector(static_cast<int64_t>(host.size())) {
    cuda::device().copy_from_host(buffer_.data(), host.data(), sizeof(T) * host.size());
  }
  explicit DeviceVector(int64_t n)
      : buffer_(cuda::device(), sizeof(T) * n, megart::MemoryCategory::Communication), n_(n) {}
  T *data() const { return buffer_.as<T>(); }
  std::vector<T> get() const {
    std::vector<T> host(static_cast<size_t>(n_));
    cuda::device().copy_to_host(host.data(), buffer_.data(), sizeof(T) * n_);
    return host;
  }

private:
  megart::DeviceBuffer buffer_;
  int64_t n_;
};

// A fresh NCCL communicator over both ranks, on its own MPI communicator (split from the
// world), so that no message of one check can reach another's.
std::unique_ptr<Communicator> pair(const std::string &axis) {
  auto world = megart::MpiCommunicator::world();
  return cuda::nccl_communicator(world->split(0, world->rank(), axis));
}

void check_collectives() {
  auto comm = pair("tp");
  const int r = comm->rank(), peer = 1 - r;
  expect(comm->size() == 2, "size");
  const int64_t n = 100003; // odd, and above NCCL's small-message protocols
  const std::vector<float> mine = random_floats(n, 100 + r), theirs = random_floats(n, 100 + peer);
  const std::vector<float> &r0 = r == 0 ? mine : theirs, &r1 = r == 0 ? theirs : mine;
  std::vector<float> sum(n), max(n);
  for (int64_t i = 0; i < n; ++i) {
    sum[i] = r0[i] + r1[i];
    max[i] = std::max(r0[i], r1[i]);
  }
  {
    DeviceVector<float> a(mine), b(mine);
    comm->all_reduce_sum(a.data(), n);
    comm->all_reduce_max(b.data(), n);
    expect_near(a.get(), sum, 1e-6f, "all_reduce_sum");
    expect(b.get() == max, "all_reduce_max");
  }
  {
    const std::vector<double> d = {r + 0.25, -1.5 * r, 3.0};
    DeviceVector<double> dd(d);
    comm->all_reduce_sum(dd.data(), 3);
    expect(dd.get() == std::vector<double>{1.5, -1.5, 6.0}, "all_reduce_sum(double)");
  }
  std::vector<float> both(r0);
  both.insert(both.end(), r1.begin(), r1.end());
  {
    DeviceVector<float> in(mine), out(2 * n);
    comm->all_gather(out.data(), in.data(), n);
    expect(out.get() == both, "all_gather");
    std::vector<float> place(2 * n, 0.0f);
    std::copy(mine.begin(), mine.end(), place.begin() + r * n);
    DeviceVector<float> inplace(place);
    comm->all_gather(inplace.data(), inplace.data() + r * n, n);
    expect(inplace.get() == both, "all_gather in place");
  }
  {
    // Each rank's 2n input: chunk c of rank q is random_floats(seed 200 + 2q + c).
    auto chunk = [&](int q, int c) { return random_floats(n, 200 + 2 * q + c); };
    std::vector<float> input = chunk(r, 0), want(n);
    const std::vector<float> c1 = chunk(r, 1), a = chunk(0, r), b = chunk(1, r);
    input.insert(input.end(), c1.begin(), c1.end());
    for (int64_t i = 0; i < n; ++i)
      want[i] = a[i] + b[i];
    DeviceVector<float> in(input), out(n);
    comm->reduce_scatter_sum(out.data(), in.data(), n);
    expect_near(out.get(), want, 1e-6f, "reduce_scatter_sum");
    DeviceVector<float> same(input); // ours: out == in, the result at the start
    comm->reduce_scatter_sum(same.data(), same.data(), n);
    std::vector<float> first = same.get();
    first.resize(n);
    expect_near(first, want, 1e-6f, "reduce_scatter_sum in place");
    DeviceVector<float> chunk_in(input); // NCCL's: out == in + rank * n
    comm->reduce_scatter_sum(chunk_in.data() + r * n, chunk_in.data(), n);
    const std::vector<float> got = chunk_in.get();
    expect_near(std::vector<float>(got.begin() + r * n, got.begin() + (r + 1) * n), want, 1e-6f,
                "reduce_scatter_sum into this rank's chunk");
  }
  for (int root : {1, 0}) {
    DeviceVector<float> a(mine);
    comm->broadcast(a.data(), n, root);
    expect(a.get() == (root == 0 ? r0 : r1), "broadcast from " + std::to_string(root));
  }
  { // host buffers go to MPI
    std::vector<float> h = mine;
    comm->all_reduce_sum(h.data(), n);
    expect_near(h, sum, 1e-6f, "all_reduce_sum of a host buffer");
  }
  comm->barrier();
}

// iall_reduce_sum (--overlap-grad-reduce's buckets): two sums in flight on the side stream, each
// of a buffer a kernel on compute_stream() has just written, waited in the other order; then a
// collective on compute_stream() issued while one is in flight (the communicator's calls must
// not overlap, nor change order).
void check_overlapped_all_reduce() {
  auto comm = pair("dp");
  const int r = comm->rank(), peer = 1 - r;
  const int64_t n = 100003, m = 4099;
  auto sum_of = [&](uint64_t seed, int64_t len, float s) {
    const std::vector<float> a = random_floats(len, seed + r), b = random_floats(len, seed + peer);
    std::vector<float> sum(static_cast<size_t>(len));
    for (int64_t i = 0; i < len; ++i)
      sum[i] = s * a[i] + s * b[i];
    return sum;
  };
  {
    DeviceVector<float> src_a(random_floats(n, 500 + r)), src_b(random_floats(m, 600 + r)), a(n), b(m);
    cuda::scale(a.data(), src_a.data(), 2.0f, n);
    auto ra = comm->iall_reduce_sum(a.data(), n);
    cuda::scale(b.data(), src_b.data(), -0.5f, m); // powers of two: exact products
    auto rb = comm->iall_reduce_sum(b.data(), m);
    comm->wait(*rb);
    comm->wait(*ra);
    expect(ra->test() && rb->test(), "a complete overlapped all_reduce_sum stays complete");
    expect_near(a.get(), sum_of(500, n, 2.0f), 1e-6f, "overlapped all_reduce_sum a");
    expect_near(b.get(), sum_of(600, m, -0.5f), 1e-6f, "overlapped all_reduce_sum b");
  }
  {
    DeviceVector<float> src(random_floats(n, 700 + r)), d(n), e(random_floats(n, 800 + r));
    cuda::scale(d.data(), src.data(), 1.0f, n);
    auto rd = comm->iall_reduce_sum(d.data(), n);
    comm->all_reduce_sum(e.data(), n); // must wait for rd's turn on the GPU
    expect_near(e.get(), sum_of(800, n, 1.0f), 1e-6f, "all_reduce_sum after an overlapped one");
    comm->wait(*rd);
    expect_near(d.get(), sum_of(700, n, 1.0f), 1e-6f, "overlapped all_reduce_sum before a collective");
  }
  { // a host buffer is summed at once (by MPI)
    std::vector<float> h = random_floats(m, 900 + r);
    auto rh = comm->iall_reduce_sum(h.data(), m);
    expect(rh->test(), "overlapped all_reduce_sum of a host buffer is complete at once");
    expect_near(h, sum_of(900, m, 1.0f), 1e-6f, "overlapped all_reduce_sum of a host buffer");
  }
  comm->barrier();
}

void check_p2p() {
  auto comm = pair("pp");
  const int r = comm->rank(), peer = 1 - r;
  auto filled = [](int64_t n, float v) { return std::vector<float>(static_cast<size_t>(n), v); };
  // Rank 0 interleaves two tags; rank 1 takes every grad first: each tag keeps its order.
  if (r == 0) {
    std::vector<std::unique_ptr<DeviceVector<float>>> data;
    const float values[] = {1, 10, 2, 20, 3};
    const int tags[] = {tag::kPipelineActivation, tag::kPipelineGrad, tag::kPipelineActivation,
                        tag::kPipelineGrad, tag::kPipelineActivation};
    std::vector<std::unique_ptr<Request>> sends;
    for (int i = 0; i < 5; ++i) {
      const int64_t len = tags[i] == tag::kPipelineGrad ? 5 : 3;
      data.push_back(std::make_unique<DeviceVector<float>>(filled(len, values[i])));
      sends.push_back(comm->isend(data.back()->data(), len, peer, tags[i]));
    }
    for (auto &s : sends) {
      comm->wait(*s);
      expect(s->test(), "a complete send stays complete");
    }
  } else {
    DeviceVector<float> b1(5), b2(5), a1(3), a2(3), a3(3);
    auto rb1 = comm->irecv(b1.data(), 5, peer, tag::kPipelineGrad);
    auto rb2 = comm->irecv(b2.data(), 5, peer, tag::kPipelineGrad);
    comm->wait(*rb2); // out of posting order is fine
    comm->wait(*rb1);
    for (auto *a : {&a1, &a2, &a3}) {
      auto rq = comm->irecv(a->data(), 3, peer, tag::kPipelineActivation);
      comm->wait(*rq);
    }
    expect(b1.get() == filled(5, 10) && b2.get() == filled(5, 20), "grads in order");
    expect(a1.get() == filled(3, 1) && a2.get() == filled(3, 2) && a3.get() == filled(3, 3),
           "activations in order");
  }
  // Both ranks send first, messages far larger than NCCL's buffers: per-direction channels
  // must not block each other.
  {
    const int64_t big = int64_t{8} << 20; // 32 MiB
    DeviceVector<float> out(filled(big, static_cast<float>(r + 1))), in(big);
    auto s = comm->isend(out.data(), big, peer, tag::kPipelineActivation);
    auto rv = comm->irecv(in.data(), big, peer, tag::kPipelineActivation);
    comm->wait(*rv);
    comm->wait(*s);
    expect(in.get() == filled(big, static_cast<float>(peer + 1)), "both ways at once");
  }
  // Several sends in flight before the receiver posts anything.
  {
    const int64_t len = 1 << 20;
    std::vector<std::unique_ptr<DeviceVector<float>>> bufs;
    std::vector<std::unique_ptr<Request>> reqs;
    if (r == 0) {
      for (int i = 0; i < 4; ++i) {
        bufs.push_back(std::make_unique<DeviceVector<float>>(filled(len, 100.0f + i)));
        reqs.push_back(comm->isend(bufs.back()->data(), len, peer, tag::kPipelineGrad));
      }
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      for (int i = 0; i < 4; ++i) {
        bufs.push_back(std::make_unique<DeviceVector<float>>(len));
        reqs.push_back(comm->irecv(bufs.back()->data(), len, peer, tag::kPipelineGrad));
      }
    }
    for (auto &q : reqs)
      comm->wait(*q);
    if (r == 1)
      for (int i = 0; i < 4; ++i)
        expect(bufs[i]->get() == filled(len, 100.0f + i), "queued send " + std::to_string(i));
  }
  // Host buffers go to MPI.
  {
    std::vector<float> out = filled(7, static_cast<float>(r + 5)), in(7);
    auto s = comm->isend(out.data(), 7, peer, tag::kCheckpointTensor);
    auto rv = comm->irecv(in.data(), 7, peer, tag::kCheckpointTensor);
    comm->wait(*rv);
    comm->wait(*s);
    expect(in == filled(7, static_cast<float>(peer + 5)), "host buffers");
  }
}

void check_axis_kernels() {
  auto comm = pair("tp");
  const int r = comm->rank();
  struct Shape {
    int64_t outer, dim_local, inner;
  };
  for (const Shape &s : {Shape{4, 5, 3}, Shape{1, 64, 8}, Shape{33, 7, 1}, Shape{8, 16, 32}}) {
    const std::string name =
        std::to_string(s.outer) + "x" + std::to_string(s.dim_local) + "x" + std::to_string(s.inner);
    const int64_t part = s.outer * s.dim_local * s.inner, whole = 2 * part;
    // The CPU kernels through the same communicator, on host buffers: MPI.
    const std::vector<float> local = random_floats(part, 300 + r), full = random_floats(whole, 400 + r);
    std::vector<float> gathered(whole), scattered(part), sliced(part);
    megart::cpu::all_gather_axis(*comm, gathered.data(), local.data(), s.outer, s.dim_local, s.inner);
    megart::cpu::reduce_scatter_axis(*comm, scattered.data(), full.data(), s.outer, s.dim_local, s.inner);
    megart::cpu::all_slice_axis(*comm, sliced.data(), full.data(), s.outer, s.dim_local, s.inner);
    DeviceVector<float> d_local(local), d_full(full), d_gathered(whole), d_scattered(part), d_sliced(part);
    cuda::all_gather_axis(*comm, d_gathered.data(), d_local.data(), s.outer, s.dim_local, s.inner);
    cuda::reduce_scatter_axis(*comm, d_scattered.data(), d_full.data(), s.outer, s.dim_local, s.inner);
    cuda::all_slice_axis(*comm, d_sliced.data(), d_full.data(), s.outer, s.dim_local, s.inner);
    expect(d_gathered.get() == gathered, "all_gather_axis " + name);
    expect_near(d_scattered.get(), scattered, 1e-6f, "reduce_scatter_axis " + name);
    expect(d_sliced.get() == sliced, "all_slice_axis " + name);
  }
}

// A receive nobody sends: the timeout names the peer and that no connection was made.
void check_timeout() {
  auto comm = pair("pp");
  comm->set_timeout(1.0);
  if (comm->rank() == 1) {
    DeviceVector<float> in(16);
    std::string message;
    try {
      auto rv = comm->irecv(in.data(), 16, 0, tag::kPipelineGrad);
      comm->wait(*rv);
    } catch (const megart::Error &e) {
      message = e.what();
    }
    expect(message.find("(pp rank 1) timed out after 1 s in recv from pp rank 0") != std::string::npos &&
               message.find("no NCCL connection") != std::string::npos,
           "timeout message, got: " + message);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

void run(const char *name, const std::function<void()> &check) {
  try {
    check();
  } catch (const std::exception &e) {
    expect(false, std::string(name) + " threw: " + e.what());
  }
}

// Whether every rank has a GPU of its own; `why` says why not.
bool gpu_per_rank(std::string &why) {
  int ok = cuda::available(&why) ? 1 : 0;
  if (ok) {
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g_rank, MPI_INFO_NULL, &node);
    int local_ranks = 0, gpus = 0;
    MPI_Comm_size(node, &local_ranks);
    MPI_Comm_free(&node);
    cudaGetDeviceCount(&gpus);
    if (gpus < local_ranks) {
      ok = 0;
      why = std::to_string(local_ranks) + " ranks on this node but " + std::to_string(gpus) +
            " GPU(s); NCCL needs a GPU per rank";
    }
  }
  int all = 0;
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (all == 0 && ok)
    why = "another rank has no GPU of its own";
  return all != 0;
}

} // namespace

int main(int argc, char **argv) {
  int provided = 0, size = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::string why;
  if (size != 2) {
    if (g_rank == 0)
      std::printf("runtime-cuda-mpi: needs exactly 2 ranks (mpirun -np 2), got %d\n", size);
    MPI_Finalize();
    return 1;
  }
  if (!gpu_per_rank(why)) {
    if (g_rank == 0)
      std::printf("runtime-cuda-mpi: skipped: no usable CUDA device (%s)\n", why.c_str());
    MPI_Finalize();
    return 0;
  }
  run("collectives", check_collectives);
  run("overlapped all-reduce", check_overlapped_all_reduce);
  run("point-to-point", check_p2p);
  run("axis kernels", check_axis_kernels);
  run("timeout", check_timeout);
  int failed = g_failures, total = 0;
  MPI_Allreduce(&failed, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (g_rank == 0)
    std::printf("runtime-cuda-mpi: %s (%d failed checks)\n", total == 0 ? "passed" : "FAILED", total);
  MPI_Finalize();
  return total == 0 ? 0 : 1;
}
