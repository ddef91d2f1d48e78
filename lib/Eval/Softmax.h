// A row's softmax, shared by the reference kernels that need one (the loss, the router).
#pragma once

#include <cstdint>
#include <vector>

namespace megac::eval {

/// probs = softmax(row[0, n)); returns the row's logsumexp.
double softmaxRow(const double *row, int64_t n, std::vector<double> &probs);

} // namespace megac::eval
