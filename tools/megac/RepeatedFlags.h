// A flag given twice, under its name or an alias (--tp and --tensor-model-parallel-size), with
// different values is an error: LLVM's parser would silently keep the last one. Each option
// records its values through a callback; the command checks them after parsing.
#pragma once

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"

#include <type_traits>

#include <optional>
#include <string>

namespace megac {

/// Records one value of flag `name` ("--tensor-model-parallel-size (--tp)").
void recordFlagValue(llvm::StringRef name, std::string value);

/// A cl::callback that records every value the option is given.
template <typename T> auto recordValues(llvm::StringRef name) {
  return llvm::cl::callback([name = name.str()](const T &value) {
    if constexpr (std::is_same_v<T, std::string>)
      recordFlagValue(name, value);
    else if constexpr (std::is_same_v<T, bool>)
      recordFlagValue(name, value ? "true" : "false");
    else if constexpr (std::is_floating_point_v<T>)
      recordFlagValue(name, llvm::formatv("{0:e16}", value).str()); // every digit: 1.001 != 1.002
    else
      recordFlagValue(name, llvm::formatv("{0}", value).str());
  });
}

/// The first flag given different values, as an error message naming it and the values.
std::optional<std::string> conflictingFlagValues();

} // namespace megac
