// The Device's multi-tensor work: sum of squares (gradient norm), scaling, AdamW, against the
// CPU (megart::grad_sum_of_squares, scale_grads, adamw_update).
//
// Tolerances. AdamW and scaling: exact. The GPU applies adamw_update's float32 operations in
// the same order with explicitly rounded intrinsics (no FMA), and the CPU turns contraction off,
// so every param / exp_avg / exp_avg_sq bit must match, over several steps. Sum of squares:
// both accumulate in double, in different orders; for n <= 3e5 positive terms each side is
// within n * 1.1e-16 = 3.3e-11 relative of the exact sum, so 1e-10 relative.
#include "cuda_test_util.h"

#include "megart/optimizer.h"

#include <cmath>
#include <memory>
#include <string>
#include <utility>

namespace megart::cuda::test {
namespace {

using CudaOptimizer = CudaTest;

// Sizes around the tiles (4096) and norm chunks (65536), an empty tensor, and enough small
// tensors (50 more) that the list needs several launches (40 AdamW / 128 norm tensors each).
std::vector<int64_t> tensor_sizes() {
  std::vector<int64_t> sizes = {1, 31, 4096, 4097, 0, 65536, 65537, 200001, 7};
  for (int i = 0; i < 130; ++i)
    sizes.push_back(1 + (i * 37) % 300);
  return sizes;
}

struct HostAndDevice {
  std::vector<std::vector<float>> host;
  std::vector<std::unique_ptr<DeviceArray<float>>> device;
};

HostAndDevice make_tensors(const std::vector<int64_t> &sizes, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  HostAndDevice t;
  for (size_t i = 0; i < sizes.size(); ++i) {
    t.host.push_back(random_floats(sizes[i], seed + i, lo, hi));
    t.device.push_back(std::make_unique<DeviceArray<float>>(t.host.back()));
  }
  return t;
}

TEST_F(CudaOptimizer, SumOfSquaresMatchesCpuAndIsDeterministic) {
  const auto sizes = tensor_sizes();
  const auto t = make_tensors(sizes, 100, -3.0f, 2.0f);
  std::vector<std::pair<const float *, int64_t>> host_list;
  std::vector<const float *> ptrs;
  for (size_t i = 0; i < sizes.size(); ++i) {
    host_list.emplace_back(t.host[i].data(), sizes[i]);
    ptrs.push_back(t.device[i]->data());
  }
  const double want = megart::grad_sum_of_squares(host_list);
  const double got = sum_of_squares(ptrs.data(), sizes.data(), static_cast<int64_t>(sizes.size()));
  EXPECT_NEAR(got, want, 1e-10 * want);
  EXPECT_EQ(sum_of_squares(ptrs.data(), sizes.data(), static_cast<int64_t>(sizes.size())), got) << "second run";
  EXPECT_EQ(sum_of_squares(ptrs.data(), sizes.data(), 0), 0.0) << "no tensors";
  // The Device interface routes here too.
  TensorList list;
  for (size_t i = 0; i < sizes.size(); ++i)
    list.emplace_back(ptrs[i], sizes[i]);
  EXPECT_EQ(device().sum_of_squares(list), got);
}

TEST_F(CudaOptimizer, ScaleTensorsMatchesCpu) {
  const auto sizes = tensor_sizes();
  auto t = make_tensors(sizes, 300);
  std::vector<std::pair<float *, int64_t>> host_list;
  std::vector<float *> ptrs;
  for (size_t i = 0; i < sizes.size(); ++i) {
    host_list.emplace_back(t.host[i].data(), sizes[i]);
    ptrs.push_back(t.device[i]->data());
  }
  megart::scale_grads(host_list, 0.37f);
  scale_tensors(ptrs.data(), sizes.data(), static_cast<int64_t>(sizes.size()), 0.37f);
  for (size_t i = 0; i < sizes.size(); ++i)
    expect_near_all(t.device[i]->get(), t.host[i], 0.0f, 0.0f, "scaled tensor " + std::to_string(i));
}

TEST_F(CudaOptimizer, AdamWMatchesCpuBitwiseOverSteps) {
  const auto sizes = tensor_sizes();
  auto param = make_tensors(sizes, 500);
  // Moments start at zero like a fresh optimizer; the steps make them nonzero.
  std::vector<std::vector<float>> m(sizes.size()), v(sizes.size());
  std::vector<std::unique_ptr<DeviceArray<float>>> dm, dv;
  for (size_t i = 0; i < sizes.size(); ++i) {
    m[i].assign(sizes[i], 0.0f);
    v[i].assign(sizes[i], 0.0f);
    dm.push_back(std::make_unique<DeviceArray<float>>(m[i]));
    dv.push_back(std::make_unique<DeviceArray<float>>(v[i]));
  }
  const AdamWConfig decay{0.9, 0.95, 1e-8, 0.1}, no_decay{0.9, 0.95, 1e-8, 0.0};
  for (int64_t step = 1; step <= 4; ++step) {
    const double lr = 3e-3 / static_cast<double>(step); // a schedule: the factors change each step
    const AdamWScalars with = adamw_scalars(lr, decay, step), without = adamw_scalars(lr, no_decay, step);
    // Fresh gradients each step, of a spread of magnitudes.
    const auto grad = make_tensors(sizes, 1000 * step, -2.0f, 2.0f);
    std::vector<AdamWTensor> list;
    for (size_t i = 0; i < sizes.size(); ++i) {
      const bool wd = i % 3 != 1; // both kinds, interleaved within one launch
      megart::adamw_update(wd ? with : without, param.host[i].data(), grad.host[i].data(), m[i].data(), v[i].data(),
                           sizes[i]);
      list.push_back({param.device[i]->data(), grad.device[i]->data(), dm[i]->data(), dv[i]->data(), sizes[i], wd});
    }
    adamw_tensors(list.data(), static_cast<int64_t>(list.size()), with, without);
    for (size_t i = 0; i < sizes.size(); ++i) {
      const std::string what = "step " + std::to_string(step) + " tensor " + std::to_string(i) + " (" +
                               std::to_string(sizes[i]) + " elements)";
      expect_near_all(param.device[i]->get(), param.host[i], 0.0f, 0.0f, "param, " + what);
      expect_near_all(dm[i]->get(), m[i], 0.0f, 0.0f, "exp_avg, " + what);
      expect_near_all(dv[i]->get(), v[i], 0.0f, 0.0f, "exp_avg_sq, " + what);
    }
  }
}

} // namespace
} // namespace megart::cuda::test
