// The process's resident memory (the pages it has touched that are in RAM), from Linux's
// /proc/self/statm: what the memory plan's prediction is compared with outside the tracked
// device buffers (host copies, libraries' buffers, the allocator's own).
#pragma once

#include <cstdint>

namespace megart {

// Resident bytes now, or -1 where the system does not say (not Linux).
int64_t resident_bytes();

} // namespace megart
