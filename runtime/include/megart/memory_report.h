// What a training run reports about its device memory after the first iteration (which has
// allocated everything the run holds): the high-water marks of memory_accounting.h per
// category, one line per class of ranks. The ranks of one pp stage hold buffers of the same
// sizes (tp and dp ranks differ in contents only), so without pipeline parallelism global
// rank 0 reports its own, and with it every stage's, gathered over pp.
#pragma once

#include "megart/comm.h"
#include "megart/memory_accounting.h"

#include <cstdint>
#include <string>
#include <vector>

namespace megart {

// "0 B", "512 B", "1.50 KiB", "1.23 MiB", "2.00 GiB": binary units, two decimals.
std::string format_bytes(int64_t bytes);

// "memory (pp stage 0): parameters 1.23 MiB, gradients ..., master weights 0 B, ...,
// peak total 9.87 MiB": each category's high-water mark, then the total's.
std::string describe_memory(const MemoryUsage &usage, const std::string &ranks);

// Every pp rank's usage, in pp rank order. Collective over pp.
std::vector<MemoryUsage> gather_memory_usage(const MemoryUsage &mine, Communicator &pp);

} // namespace megart
