// Prints the dataset of each of the first N samples of a blend, one per line, for
// test/e2e/data_blend.py to hold against megatron-core's build_blending_indices.
//   megart-blend-order N W1 W2 ...   (weights as given; normalised as parse_blend does)
#include "megart/data_blend.h"
#include "megart/error.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

int main(int argc, char **argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: megart-blend-order N W1 W2 ...\n");
    return 2;
  }
  try {
    std::vector<std::string> values;
    for (int i = 2; i < argc; ++i)
      values.insert(values.end(), {argv[i], "dataset" + std::to_string(i - 2)});
    std::vector<double> weights;
    for (const megart::BlendEntry &e : megart::parse_blend(values, "weights"))
      weights.push_back(e.weight);
    megart::BlendOrder order(weights);
    const long long n = std::atoll(argv[1]);
    for (long long i = 0; i < n; ++i)
      std::printf("%d\n", order.at(i).first);
  } catch (const megart::Error &e) {
    std::fprintf(stderr, "megart-blend-order: %s\n", e.what());
    return 1;
  }
  return 0;
}
