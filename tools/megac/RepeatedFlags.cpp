#include "RepeatedFlags.h"

#include <map>
#include <vector>

namespace {

/// Flag -> its values in command-line order. Function-local: options register their callbacks
/// during static initialisation, in any order.
std::map<std::string, std::vector<std::string>> &valuesByFlag() {
  static std::map<std::string, std::vector<std::string>> values;
  return values;
}

} // namespace

void megac::recordFlagValue(llvm::StringRef name, std::string value) {
  valuesByFlag()[name.str()].push_back(std::move(value));
}

std::optional<std::string> megac::conflictingFlagValues() {
  for (const auto &[name, values] : valuesByFlag())
    for (const std::string &value : values)
      if (value != values.front())
        return name + " is given " + std::to_string(values.size()) + " times with different values (" +
               values.front() + " and " + value + "); give it once";
  return std::nullopt;
}
