// megac data's progress on stderr: documents, bytes of the input read, documents/s, MB/s and an
// ETA from the bytes left, once a second for runs that last; and one closing line with the
// totals. Bytes are the input's (what the ETA divides), never tokens.
#pragma once

#include "EverySecond.h"

#include <cstdint>

namespace megac {

class DataProgress {
public:
  explicit DataProgress(uint64_t totalBytes);
  // After each document: the documents so far and the input bytes read so far.
  void update(int64_t documents, uint64_t bytesRead);
  // The closing line: "megac data: read 1234 bytes (100% of the input), 5 documents in 0.1 s".
  void finish(int64_t documents, uint64_t bytesRead) const;

private:
  uint64_t total_;
  EverySecond pace_;
};

} // namespace megac
