// The NCCL communicator in one process: a size-1 axis (device copies, no NCCL), host buffers
// handed to the host communicator, timeouts passed on; and the parallel-axis kernels' layouts
// against their CPU twins through a communicator that simulates several ranks. Real ranks:
// test/mpi/nccl_collectives_main.cpp.
#include "megart/cuda/comm_nccl.h"
#include "megart/error.h"
#include "megart/parallel_kernels.h"

#include "cuda_test_util.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace megart::cuda::test {
namespace {

class NcclCommTest : public CudaTest {};

bool is_device(const void *p) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return a.type == cudaMemoryTypeDevice;
}

// Host or device memory, read or written in stream order.
std::vector<float> read(const float *p, int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  if (is_device(p))
    device().copy_to_host(v.data(), p, sizeof(float) * n);
  else
    std::copy(p, p + n, v.begin());
  return v;
}

void write(float *p, const std::vector<float> &v) {
  if (is_device(p))
    device().copy_from_host(p, v.data(), sizeof(float) * v.size());
  else
    std::copy(v.begin(), v.end(), p);
}

// The message of the megart::Error that `f` throws ("" when it throws none).
std::string error_of(const std::function<void()> &f) {
  try {
    f();
  } catch (const Error &e) {
    return e.what();
  }
  return "";
}

// A size-1 host communicator that counts the calls it gets.
class CountingHost final : public Communicator {
public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void all_reduce_sum(float *, int64_t) override { ++calls; }
  void all_reduce_max(float *, int64_t) override { ++calls; }
  void all_reduce_sum(double *, int64_t) override { ++calls; }
  void all_gather(float *out, const float *in, int64_t n) override {
    ++calls;
    std::copy(in, in + n, out);
  }
  void reduce_scatter_sum(float *out, const float *in, int64_t n) override {
    ++calls;
    std::copy(in, in + n, out);
  }
  void broadcast(float *, int64_t, int) override { ++calls; }
  void barrier() override { ++calls; }
  int calls = 0;
};

// Rank `rank` of `size` ranks where rank q's input is this rank's times (q + 1), on host or
// device buffers: one process checks the layouts of the axis kernels for any rank.
class SimulatedRanks final : public Communicator {
public:
  SimulatedRanks(int rank, int size) : rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void all_reduce_sum(float *, int64_t) override { FAIL() << "not simulated"; }
  void all_reduce_max(float *, int64_t) override { FAIL() << "not simulated"; }
  void all_reduce_sum(double *, int64_t) override { FAIL() << "not simulated"; }
  void all_gather(float *out, const float *in, int64_t n) override {
    const std::vector<float> mine = read(in, n);
    std::vector<float> all(static_cast<size_t>(n * size_));
    for (int q = 0; q < size_; ++q)
      for (int64_t i = 0; i < n; ++i)
        all[q * n + i] = mine[i] * static_cast<float>(q + 1);
    write(out, all);
  }
  void reduce_scatter_sum(float *out, const float *in, int64_t n) override {
    const std::vector<float> whole = read(in, n * size_);
    const float ranks_total = static_cast<float>(size_ * (size_ + 1) / 2);
    std::vector<float> sum(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      sum[i] = whole[rank_ * n + i] * ranks_total;
    write(out, sum);
  }
  void broadcast(float *, int64_t, int) override { FAIL() << "not simulated"; }
  void barrier() override {}

private:
  int rank_, size_;
};

struct Shape {
  int64_t outer, dim_local, inner;
};
const Shape kShapes[] = {{4, 5, 3}, {1, 6, 2}, {7, 3, 1}, {2, 4, 4}, {3, 8, 16}};

TEST_F(NcclCommTest, SizeOneCollectivesAreDeviceCopies) {
  auto comm = nccl_communicator(std::make_unique<SelfCommunicator>());
  EXPECT_EQ(comm->rank(), 0);
  EXPECT_EQ(comm->size(), 1);
  const int64_t n = 1000;
  const std::vector<float> x = random_floats(n, 1);
  DeviceArray<float> a(x);
  comm->all_reduce_sum(a.data(), n);
  comm->all_reduce_max(a.data(), n);
  comm->broadcast(a.data(), n, 0);
  EXPECT_EQ(a.get(), x);
  DeviceArray<float> gathered(n), scattered(n);
  comm->all_gather(gathered.data(), a.data(), n);
  comm->reduce_scatter_sum(scattered.data(), a.data(), n);
  EXPECT_EQ(gathered.get(), x);
  EXPECT_EQ(scattered.get(), x);
  comm->all_gather(a.data(), a.data(), n); // in place
  comm->reduce_scatter_sum(a.data(), a.data(), n);
  EXPECT_EQ(a.get(), x);
  const std::vector<double> d = {1.25, -3.5};
  DeviceArray<double> dd(d);
  comm->all_reduce_sum(dd.data(), 2);
  EXPECT_EQ(dd.get(), d);
  comm->barrier();
  EXPECT_NE(error_of([&] { comm->broadcast(a.data(), n, 1); }).find("root 1"), std::string::npos);
}

TEST_F(NcclCommTest, SizeOneOverlappingGatherMovesLikeMemmove) {
  auto comm = nccl_communicator(std::make_unique<SelfCommunicator>());
  const std::vector<float> x = random_floats(10, 2);
  DeviceArray<float> a(x);
  comm->all_gather(a.data(), a.data() + 3, 7);
  std::vector<float> want = x;
  std::copy(x.begin() + 3, x.end(), want.begin());
  EXPECT_EQ(a.get(), want);
}

TEST_F(NcclCommTest, HostBuffersGoToTheHostCommunicator) {
  auto counting = std::make_unique<CountingHost>();
  CountingHost *host = counting.get();
  auto comm = nccl_communicator(std::move(counting));
  std::vector<float> h(8, 1.0f), out(8);
  double hd = 2;
  comm->all_reduce_sum(h.data(), 8);
  comm->all_reduce_max(h.data(), 8);
  comm->all_reduce_sum(&hd, 1);
  comm->all_gather(out.data(), h.data(), 8);
  comm->reduce_scatter_sum(out.data(), h.data(), 8);
  comm->broadcast(h.data(), 8, 0);
  EXPECT_EQ(host->calls, 6);
  DeviceArray<float> d(h), d_out(8);
  comm->all_reduce_sum(d.data(), 8);
  comm->all_gather(d_out.data(), d.data(), 8);
  EXPECT_EQ(host->calls, 6) << "device buffers must not reach the host communicator";
  comm->barrier(); // the stream, then the host's barrier
  EXPECT_EQ(host->calls, 7);
  EXPECT_NE(error_of([&] { comm->all_gather(d_out.data(), h.data(), 8); }).find("same side"),
            std::string::npos);
}

TEST_F(NcclCommTest, TimeoutIsTheHostsAndReachesIt) {
  auto counting = std::make_unique<CountingHost>();
  CountingHost *host = counting.get();
  host->set_timeout(7);
  auto comm = nccl_communicator(std::move(counting));
  EXPECT_EQ(comm->timeout(), 7);
  comm->set_timeout(2.5);
  EXPECT_EQ(comm->timeout(), 2.5);
  EXPECT_EQ(host->timeout(), 2.5);
  EXPECT_THROW(comm->set_timeout(0), Error);
}

TEST_F(NcclCommTest, SizeOneHasNoPeers) {
  auto comm = nccl_communicator(std::make_unique<SelfCommunicator>());
  DeviceArray<float> d(4);
  EXPECT_NE(
      error_of([&] { comm->isend(d.data(), 4, 0, p2p_tag::kPipelineActivation); }).find("no point-to-point"),
      std::string::npos);
  EXPECT_NE(error_of([&] { comm->irecv(d.data(), 4, 0, p2p_tag::kPipelineGrad); }).find("no point-to-point"),
            std::string::npos);
}

TEST_F(NcclCommTest, AllSliceAxisMatchesCpu) {
  for (int rank = 0; rank < 3; ++rank)
    for (const Shape &s : kShapes) {
      SimulatedRanks comm(rank, 3);
      const int64_t whole = s.outer * s.dim_local * 3 * s.inner, part = s.outer * s.dim_local * s.inner;
      const std::vector<float> in = random_floats(whole, 10 + rank);
      std::vector<float> want(part);
      cpu::all_slice_axis(comm, want.data(), in.data(), s.outer, s.dim_local, s.inner);
      DeviceArray<float> d_in(in), d_out(part);
      all_slice_axis(comm, d_out.data(), d_in.data(), s.outer, s.dim_local, s.inner);
      EXPECT_EQ(d_out.get(), want) << "rank " << rank << " shape " << s.outer << "x" << s.dim_local << "x"
                                   << s.inner;
    }
}

TEST_F(NcclCommTest, AllGatherAxisMatchesCpu) {
  for (int rank = 0; rank < 3; ++rank)
    for (const Shape &s : kShapes) {
      SimulatedRanks comm(rank, 3);
      const int64_t part = s.outer * s.dim_local * s.inner, whole = part * 3;
      const std::vector<float> in = random_floats(part, 20 + rank);
      std::vector<float> want(whole);
      cpu::all_gather_axis(comm, want.data(), in.data(), s.outer, s.dim_local, s.inner);
      DeviceArray<float> d_in(in), d_out(whole);
      all_gather_axis(comm, d_out.data(), d_in.data(), s.outer, s.dim_local, s.inner);
      EXPECT_EQ(d_out.get(), want) << "rank " << rank << " shape " << s.outer << "x" << s.dim_local << "x"
                                   << s.inner;
    }
}

TEST_F(NcclCommTest, ReduceScatterAxisMatchesCpu) {
  for (int rank = 0; rank < 3; ++rank)
    for (const Shape &s : kShapes) {
      SimulatedRanks comm(rank, 3);
      const int64_t part = s.outer * s.dim_local * s.inner, whole = part * 3;
      const std::vector<float> in = random_floats(whole, 30 + rank);
      std::vector<float> want(part);
      cpu::reduce_scatter_axis(comm, want.data(), in.data(), s.outer, s.dim_local, s.inner);
      DeviceArray<float> d_in(in), d_out(part);
      reduce_scatter_axis(comm, d_out.data(), d_in.data(), s.outer, s.dim_local, s.inner);
      EXPECT_EQ(d_out.get(), want) << "rank " << rank << " shape " << s.outer << "x" << s.dim_local << "x"
                                   << s.inner;
    }
}

TEST_F(NcclCommTest, AxisKernelsOnOneRankCopy) {
  auto comm = nccl_communicator(std::make_unique<SelfCommunicator>());
  const std::vector<float> x = random_floats(4 * 5 * 3, 40);
  DeviceArray<float> in(x), gathered(x.size()), scattered(x.size()), sliced(x.size());
  all_gather_axis(*comm, gathered.data(), in.data(), 4, 5, 3);
  reduce_scatter_axis(*comm, scattered.data(), in.data(), 4, 5, 3);
  all_slice_axis(*comm, sliced.data(), in.data(), 4, 5, 3);
  EXPECT_EQ(gathered.get(), x);
  EXPECT_EQ(scattered.get(), x);
  EXPECT_EQ(sliced.get(), x);
}

} // namespace
} // namespace megart::cuda::test
