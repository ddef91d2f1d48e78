#include "GenerateWindow.h"

#include <algorithm>

namespace megac {

int64_t generateWindow(int64_t modelPositions, int64_t tokens) {
  if (modelPositions <= kGenerateWindow)
    return modelPositions;
  int64_t window = kGenerateWindow;
  while (window < tokens) // tokens <= modelPositions <= limits::kSeqLength: no overflow
    window *= 2;
  return std::min(window, modelPositions);
}

} // namespace megac
