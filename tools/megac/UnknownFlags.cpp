#include "UnknownFlags.h"

#include "megac/Frontend/ModelSpec.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CommandLine.h"

#include <algorithm>

using namespace llvm;

namespace {

/// LLVM's own flags, which it registers only while parsing.
constexpr StringRef kGenericFlags[] = {"h",       "help",          "help-list",        "help-hidden",
                                       "version", "print-options", "print-all-options", "help-list-hidden"};

} // namespace

std::optional<std::string> megac::findUnknownFlag(ArrayRef<const char *> argv) {
  cl::SubCommand *sub = &cl::SubCommand::getTopLevel();
  size_t first = 1;
  if (argv.size() > 1)
    for (cl::SubCommand *s : cl::getRegisteredSubcommands())
      if (!s->getName().empty() && s->getName() == argv[1])
        sub = s, first = 2;
  auto &options = cl::getRegisteredOptions(*sub);
  for (size_t i = first; i < argv.size(); ++i) {
    StringRef arg(argv[i]);
    if (arg == "--") // the rest are positional
      break;
    StringRef name = arg;
    if (!name.consume_front("-") || name.empty())
      continue;
    name.consume_front("-");
    auto [flag, value] = name.split('=');
    // Not a flag: a negative number, or a path such as -./x.
    if (flag.empty() || !isAlpha(flag.front()))
      continue;
    if (is_contained(kGenericFlags, flag))
      continue;
    if (auto it = options.find(flag); it != options.end()) {
      if (it->second->getValueExpectedFlag() == cl::ValueRequired && !name.contains('='))
        ++i; // its value, even if it starts with '-'
      continue;
    }
    std::string message = "unknown flag " + arg.str() + "; `megac " +
                          (sub->getName().empty() ? std::string("--help") : sub->getName().str() + " --help") +
                          "` lists the flags";
    std::string key = flag.str();
    std::replace(key.begin(), key.end(), '-', '_');
    if (is_contained(specKeys(), key))
      message += "; " + key + " is a key of the model spec, not a flag: set it in SPEC.yaml (" + key + ": VALUE)";
    return message;
  }
  return std::nullopt;
}
