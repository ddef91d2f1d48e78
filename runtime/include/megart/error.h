// One error type for everything the runtime rejects: bad flags, data files, checkpoints.
// Messages name the thing, the value found and the fix, so the training program can print
// them as they are and exit.
#pragma once

#include <stdexcept>
#include <string>

namespace megart {

class Error : public std::runtime_error {
public:
  explicit Error(const std::string &message) : std::runtime_error(message) {}
};

} // namespace megart
