#include "megart/resident_memory.h"

#include <cstdio>
#include <unistd.h>

namespace megart {

int64_t resident_bytes() {
  std::FILE *f = std::fopen("/proc/self/statm", "r");
  if (!f)
    return -1;
  long long size = 0, resident = 0;
  const int read = std::fscanf(f, "%lld %lld", &size, &resident);
  std::fclose(f);
  const long page = sysconf(_SC_PAGESIZE);
  return read == 2 && page > 0 ? static_cast<int64_t>(resident) * page : -1;
}

} // namespace megart
