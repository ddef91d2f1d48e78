#include "Help.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace cl = llvm::cl;

namespace megac {

namespace {

constexpr size_t kWidth = 100, kIndent = 6;

bool isHelpFlag(llvm::StringRef arg) { return arg == "--help" || arg == "-help" || arg == "-h"; }

template <typename T> std::string text(const T &value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

// The option's initial value as a user would type it, when it says more than "off".
std::optional<std::string> defaultOf(cl::Option *o) {
  if (auto *x = dynamic_cast<cl::opt<bool> *>(o))
    return x->getDefault().hasValue() && x->getDefault().getValue() ? std::optional<std::string>("true")
                                                                    : std::nullopt;
  if (auto *x = dynamic_cast<cl::opt<std::string> *>(o))
    return x->getDefault().hasValue() && !x->getDefault().getValue().empty()
               ? std::optional<std::string>(x->getDefault().getValue())
               : std::nullopt;
  if (auto *x = dynamic_cast<cl::opt<int64_t> *>(o))
    return x->getDefault().hasValue() ? std::optional<std::string>(text(x->getDefault().getValue())) : std::nullopt;
  if (auto *x = dynamic_cast<cl::opt<int> *>(o))
    return x->getDefault().hasValue() ? std::optional<std::string>(text(x->getDefault().getValue())) : std::nullopt;
  if (auto *x = dynamic_cast<cl::opt<unsigned> *>(o))
    return x->getDefault().hasValue() ? std::optional<std::string>(text(x->getDefault().getValue())) : std::nullopt;
  if (auto *x = dynamic_cast<cl::opt<double> *>(o))
    return x->getDefault().hasValue() ? std::optional<std::string>(text(x->getDefault().getValue())) : std::nullopt;
  return std::nullopt;
}

// "<N>", "<OUT>": the value an option takes, empty for a flag.
std::string valueOf(cl::Option *o) {
  if (dynamic_cast<cl::opt<bool> *>(o))
    return "";
  if (!o->ValueStr.empty())
    return " <" + o->ValueStr.str() + ">";
  if (dynamic_cast<cl::opt<int64_t> *>(o) || dynamic_cast<cl::opt<int> *>(o) ||
      dynamic_cast<cl::opt<unsigned> *>(o))
    return " <N>";
  if (dynamic_cast<cl::opt<double> *>(o))
    return " <X>";
  return " <TEXT>";
}

// Whether a description already gives its default ("default: the rank", "default 0").
bool saysDefault(const std::string &desc, const std::string &value) {
  return desc.find("default:") != std::string::npos || desc.find("(default") != std::string::npos ||
         desc.find("default " + value) != std::string::npos;
}

// Whether `arg` is an option (of any subcommand) that reads the next argument as its value.
bool takesValue(llvm::StringRef arg) {
  if (!arg.starts_with("-") || arg.contains('='))
    return false;
  const llvm::StringRef name = arg.ltrim('-');
  for (cl::SubCommand *sub : cl::getRegisteredSubcommands())
    if (cl::Option *o = sub->OptionsMap.lookup(name))
      return o->getValueExpectedFlag() == cl::ValueRequired;
  return false;
}

std::string dashes(llvm::StringRef name) { return (name.size() == 1 ? "-" : "--") + name.str(); }

// `text` in lines of at most kWidth, each indented by `indent`.
void printWrapped(llvm::raw_ostream &out, const std::string &text, size_t indent) {
  std::istringstream words(text);
  std::string word, line;
  auto flush = [&] {
    if (!line.empty())
      out << std::string(indent, ' ') << line << "\n";
    line.clear();
  };
  while (words >> word) {
    if (!line.empty() && indent + line.size() + 1 + word.size() > kWidth)
      flush();
    line += (line.empty() ? "" : " ") + word;
  }
  flush();
}

// A subcommand's own options (not --help and the other options of every subcommand, not hidden),
// each with the names that reach it.
std::map<std::string, std::pair<cl::Option *, std::vector<std::string>>> optionsOf(cl::SubCommand &sub) {
  std::map<cl::Option *, std::vector<std::string>> names;
  for (auto &entry : sub.OptionsMap) {
    cl::Option *o = entry.second;
    std::string name = entry.first.str();
    // cl::alias keeps its option private; ours say "alias for --NAME".
    if (dynamic_cast<cl::alias *>(o) && o->HelpStr.starts_with("alias for --"))
      if (cl::Option *target = sub.OptionsMap.lookup(o->HelpStr.drop_front(strlen("alias for --"))))
        o = target;
    if (o->getOptionHiddenFlag() != cl::NotHidden || o->Subs.contains(&cl::SubCommand::getAll()))
      continue;
    names[o].push_back(std::move(name));
  }
  std::map<std::string, std::pair<cl::Option *, std::vector<std::string>>> byName;
  for (auto &[o, list] : names) {
    // The long name first, then the short ones.
    llvm::sort(list, [o](const std::string &a, const std::string &b) {
      if ((a == o->ArgStr) != (b == o->ArgStr))
        return a == o->ArgStr;
      return a < b;
    });
    byName[o->ArgStr.str()] = {o, list};
  }
  return byName;
}

void printSubcommand(llvm::raw_ostream &out, cl::SubCommand &sub) {
  out << sub.getDescription() << "\n\nUSAGE: megac " << sub.getName();
  for (cl::Option *positional : sub.PositionalOpts)
    out << " " << (positional->HelpStr.empty() ? positional->ValueStr : positional->HelpStr);
  if (sub.ConsumeAfterOpt)
    out << " " << sub.ConsumeAfterOpt->HelpStr;
  out << " [flags]\n\nFLAGS:\n";
  for (auto &[name, entry] : optionsOf(sub)) {
    auto &[o, names] = entry;
    std::string head;
    for (const std::string &n : names)
      head += (head.empty() ? "" : ", ") + dashes(n);
    out << "  " << head << valueOf(o) << "\n";
    std::string desc = o->HelpStr.str();
    if (std::optional<std::string> value = defaultOf(o); value && !saysDefault(desc, *value))
      desc += " (default " + *value + ")";
    if (dynamic_cast<cl::list<std::string> *>(o))
      desc += " (repeatable)";
    printWrapped(out, desc, kIndent);
  }
  out << "  --help\n      this text\n";
}

} // namespace

bool printHelpIfAsked(llvm::ArrayRef<const char *> args, llvm::StringRef overview) {
  bool asked = false;
  for (size_t i = 1; i < args.size(); ++i)
    asked |= isHelpFlag(args[i]) && !(i > 1 && takesValue(args[i - 1])); // not `--prompt -h`
  if (!asked)
    return false;
  cl::SubCommand *chosen = nullptr;
  for (const char *arg : args.drop_front()) {
    if (arg[0] == '-')
      continue;
    for (cl::SubCommand *sub : cl::getRegisteredSubcommands())
      if (sub->getName() == arg)
        chosen = sub;
    break; // the subcommand comes first
  }
  llvm::raw_ostream &out = llvm::outs();
  if (chosen) {
    printSubcommand(out, *chosen);
    return true;
  }
  out << overview << "\nSUBCOMMANDS:\n";
  std::map<std::string, std::string> subs;
  for (cl::SubCommand *sub : cl::getRegisteredSubcommands())
    if (!sub->getName().empty())
      subs[sub->getName().str()] = sub->getDescription().str();
  for (auto &[name, description] : subs)
    out << "  " << name << std::string(name.size() < 11 ? 11 - name.size() : 1, ' ') << description << "\n";
  out << "\n`megac SUBCOMMAND --help` lists a subcommand's flags with their defaults.\n"
         "`megac --help-hidden` adds the options of the LLVM libraries megac is built on.\n"
         "Docs: README.md, docs/ (plans, checkpoints, simulate, testing).\n";
  return true;
}

} // namespace megac
