// megart-calibrate: measures this machine's speeds the way OUT/train uses it and prints a megac
// cluster file (docs/simulate.md). Run it as OUT/train runs: `mpirun -np R` with the same
// OMP_NUM_THREADS, so every rank measures while the others load the machine too; `megac
// calibrate --target cpu` does that. Rank 0 reports.
#include "megart/comm_mpi.h"
#include "megart/kernels.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include <unistd.h>

namespace {

using Clock = std::chrono::steady_clock;

/// Seconds per call of `work`: the median of `calls` calls after a warm-up one. A fixed count, so
/// that ranks calling collectives make the same number of calls.
double seconds_per_call(const std::function<void()> &work, int calls) {
  work();
  std::vector<double> times;
  for (int i = 0; i < calls; ++i) {
    const auto t0 = Clock::now();
    work();
    times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
  return times[times.size() / 2];
}

/// FLOP/s of an n x n x n GEMM with the operand types the 16-bit programs use or all fp32.
double gemm_rate(int64_t n, bool sixteen_bit) {
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n);
  std::vector<megart::bf16_t> a16(n * n, megart::from_float<megart::bf16_t>(0.5f)), c16(n * n);
  megart::cpu::set_gemm_precision(sixteen_bit ? megart::Precision::Bf16 : megart::Precision::Fp32);
  const int calls = n >= 512 ? 5 : 50;
  const double t = seconds_per_call([&] {
    if (sixteen_bit) // a 16-bit activation times an fp32 weight into a 16-bit result
      megart::cpu::gemm(c16.data(), a16.data(), b.data(), n, n, n, false, false);
    else
      megart::cpu::gemm(c.data(), a.data(), b.data(), n, n, n, false, false);
  }, calls);
  megart::cpu::set_gemm_precision(megart::Precision::Fp32);
  return 2.0 * double(n) * n * n / t;
}

/// FLOP/s of causal attention forward + backward on [1, s, heads, d], counted as the simulator
/// counts it: (2 + 5) GEMMs of 2 x heads x s^2 x d, halved by the causal mask.
double attention_rate(int64_t s, int64_t heads, int64_t d) {
  const int64_t n = s * heads * d;
  std::vector<float> q(n, 0.1f), k(n, 0.2f), v(n, 0.3f), out(n), dout(n, 0.01f), dq(n), dk(n), dv(n);
  const float scale = 1.0f / 8.0f;
  const double t = seconds_per_call([&] {
    megart::cpu::attention_forward(out.data(), q.data(), k.data(), v.data(), 1, s, heads, heads, d, scale, true);
    megart::cpu::attention_backward(dq.data(), dk.data(), dv.data(), dout.data(), q.data(), k.data(), v.data(), 1, s,
                                    heads, heads, d, scale, true);
  }, 5);
  return 7.0 * 2.0 * double(heads) * s * s * d * 0.5 / t;
}

} // namespace

int main() {
  megart::MpiSession mpi;
  auto world = megart::MpiCommunicator::world();
  const int ranks = world->size();
  const char *threads = std::getenv("OMP_NUM_THREADS");

  // GEMMs: the largest size is the peak; smaller ones fall off as efficiency = side / saturation.
  const std::vector<int64_t> sides = {64, 128, 256, 512, 1024};
  std::vector<double> rates;
  for (int64_t n : sides) {
    world->barrier();
    rates.push_back(gemm_rate(n, false));
  }
  const double peak32 = *std::max_element(rates.begin(), rates.end());
  std::vector<double> saturations; // side / (rate / peak) where a GEMM is clearly below peak
  for (size_t i = 0; i < sides.size(); ++i)
    if (rates[i] < 0.95 * peak32)
      saturations.push_back(double(sides[i]) * peak32 / rates[i]);
  std::sort(saturations.begin(), saturations.end());
  const double saturation = saturations.empty() ? 0.0 : saturations[saturations.size() / 2];
  world->barrier();
  const double peak16 = gemm_rate(1024, true);
  world->barrier();
  const double attention = attention_rate(512, 8, 64);

  // Memory-bound: out = a + b over 16 Mi floats (3 x 4 bytes per element), and a one-element
  // kernel for the fixed cost of a call.
  const int64_t n = int64_t(1) << 24;
  std::vector<float> x(n, 1.0f), y(n, 2.0f), z(n);
  world->barrier();
  const double stream = 12.0 * double(n) / seconds_per_call([&] { megart::cpu::add(z.data(), x.data(), y.data(), 1, n); }, 10);
  const double launch = seconds_per_call([&] {
    for (int i = 0; i < 1000; ++i)
      megart::cpu::add(z.data(), x.data(), y.data(), 1, 1);
  }, 10) / 1000;

  // Collectives between the ranks: bus bandwidth of a 16 MiB all-reduce, and a one-float one's
  // time per ring step for the latency.
  double bus = 0, latency = 0;
  if (ranks > 1) {
    const int64_t count = int64_t(1) << 22;
    std::vector<float> data(count, 1.0f);
    const double t = seconds_per_call([&] { world->all_reduce_sum(data.data(), count); }, 10);
    bus = 2.0 * (ranks - 1) / ranks * 4.0 * double(count) / t;
    latency = seconds_per_call([&] { world->all_reduce_sum(data.data(), 1); }, 200) / (2.0 * (ranks - 1));
  }
  if (world->rank() != 0)
    return 0;
  std::printf("# Written by megart-calibrate on %d rank(s) x OMP_NUM_THREADS=%s, all ranks measuring at once.\n",
              ranks, threads ? threads : "(unset)");
  std::printf("name: calibrated-cpu\ndevice: \"one rank: %s thread(s) of this CPU\"\n", threads ? threads : "all");
  std::printf("devices_per_node: %d  # the ranks of one machine\n", ranks);
  std::printf("peak_tflops_16bit: %.6g  # bf16 activation x fp32 weight GEMM, 1024^3 (converted to fp32 for OpenBLAS)\n",
              peak16 / 1e12);
  std::printf("peak_tflops_fp32: %.6g  # the fastest of OpenBLAS sgemm at 64..1024 cubed\n", peak32 / 1e12);
  std::printf("gemm_efficiency: 1  # the peak is what a large GEMM measured\n");
  std::printf("gemm_saturation_rows: %.0f  # median of side x peak / rate over the GEMMs below 95%% of peak\n",
              saturation);
  std::printf("gemm_tile_rows: 1\ngemm_tile_cols: 1\ngemm_tiles_at_once: 0  # a CPU: no tile or wave quantization\n");
  std::printf("attention_efficiency: %.6g  # causal attention fwd + bwd, s 512, 8 heads of 64, / the fp32 peak\n",
              std::min(1.0, attention / peak32));
  std::printf("memory_bandwidth_gbps: %.6g  # out = a + b over 16 Mi floats, 12 bytes per element\n", stream / 1e9);
  const double memory = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGE_SIZE)) / ranks;
  std::printf("memory_gib: %.6g  # the machine's physical memory / the ranks sharing it\n", memory / (1 << 30));
  std::printf("kernel_launch_us: %.6g  # a one-element kernel call\n", launch * 1e6);
  std::printf("intra_node_bus_bandwidth_gbps: %.6g  # a 16 MiB MPI all-reduce, 2(n-1)/n x bytes / time\n",
              ranks > 1 ? bus / 1e9 : 1.0);
  std::printf("intra_node_latency_us: %.6g  # a one-float all-reduce / its 2(n-1) ring steps\n", latency * 1e6);
  std::printf("inter_node_bus_bandwidth_gbps: %.6g  # one machine: the same link\n", ranks > 1 ? bus / 1e9 : 1.0);
  std::printf("inter_node_latency_us: %.6g\n", latency * 1e6);
  return 0;
}
