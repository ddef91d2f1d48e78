// The CUDA tests' main: without a usable GPU it says so and exits 77, which ctest reports as
// "Skipped" (SKIP_RETURN_CODE), so a CI run without a GPU shows the tests did not run.
#include "megart/cuda/device.h"

#include <gtest/gtest.h>

#include <iostream>

int main(int argc, char **argv) {
  ::testing::InitGoogleTest(&argc, argv);
  std::string why;
  if (!megart::cuda::available(&why)) {
    std::cout << "runtime-cuda: SKIPPED " << ::testing::UnitTest::GetInstance()->total_test_count()
              << " GPU tests: no usable CUDA device (" << why << ")" << std::endl;
    return 77;
  }
  return RUN_ALL_TESTS();
}
