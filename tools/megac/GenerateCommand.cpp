// megac generate: text from a checkpoint. Compiles the spec the checkpoint records for one rank
// in fp32 (a temporary OUT), encodes the prompt with the tokenizer the checkpoint carries
// (megac_tokenizer.py), runs `OUT/train generate` and decodes what it drew.
#include "Commands.h"
#include "MegacPaths.h"
#include "RepeatedFlags.h"
#include "RunCommand.h"
#include "TextFile.h"
#include "TokenizerProcess.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

using namespace llvm;
namespace cl = llvm::cl;

namespace megac::cli {
extern cl::SubCommand generate;
} // namespace megac::cli

namespace {
using megac::cli::generate;

cl::opt<std::string> checkpoint(cl::Positional, cl::desc("CHECKPOINT (a --save folder or one iteration's folder)"),
                                cl::sub(generate));
cl::opt<std::string> prompt("prompt", cl::desc("the text to continue"), cl::sub(generate),
                            megac::recordValues<std::string>("--prompt"));
cl::opt<unsigned> maxNewTokens("max-new-tokens", cl::init(0),
                               cl::desc("tokens to generate (default: 32, or as many as the model's seq_length leaves "
                                        "after the prompt)"),
                               cl::sub(generate), megac::recordValues<unsigned>("--max-new-tokens"));
cl::opt<double> temperature("temperature", cl::init(1.0), cl::desc("logits / temperature; 0: greedy"),
                            cl::sub(generate), megac::recordValues<double>("--temperature"));
cl::opt<unsigned> topK("top-k", cl::init(0), cl::desc("draw among the k likeliest (0: all; 1: greedy)"),
                       cl::sub(generate), megac::recordValues<unsigned>("--top-k"));
cl::opt<double> topP("top-p", cl::init(1.0), cl::desc("draw among the likeliest whose probability reaches p"),
                     cl::sub(generate), megac::recordValues<double>("--top-p"));
cl::opt<unsigned> seed("seed", cl::init(1234), cl::desc("seed of the draws"), cl::sub(generate),
                       megac::recordValues<unsigned>("--seed"));

int fail(const Twine &message) {
  errs() << "megac generate: error: " << message << "\n";
  return 1;
}

/// A double as the shortest text that reads back as the same number ("nan", "1e-09", "0.7").
std::string exactText(double x) {
  char buf[32];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, x);
    if (std::strtod(buf, nullptr) == x)
      break;
  }
  return buf;
}

// What the steps print is small; a checkpoint's train_state.json holds the flags and the spec.
constexpr uint64_t kMaxRead = uint64_t(1) << 26;

Expected<std::string> readAll(StringRef path) { return megac::readTextFile(path, kMaxRead, "file"); }

/// The JSON object a step wrote to `path`; fails naming the step.
Expected<json::Object> readObject(StringRef path, StringRef step) {
  Expected<std::string> text = readAll(path);
  if (!text)
    return text.takeError();
  Expected<json::Value> value = json::parse(*text);
  if (!value)
    return createStringError(inconvertibleErrorCode(), step + " printed no JSON: " + toString(value.takeError()));
  if (json::Object *object = value->getAsObject())
    return std::move(*object);
  return createStringError(inconvertibleErrorCode(), step + " printed no JSON object");
}

/// "1,2,3": the ids as the programs' flags take them.
std::string commaJoined(const json::Array &ids) {
  std::string list;
  for (const json::Value &id : ids)
    list += (list.empty() ? "" : ",") + std::to_string(id.getAsInteger().value_or(-1));
  return list;
}

/// The iteration folder: CHECKPOINT itself, or the one its tracker names.
Expected<std::string> iterationFolder(StringRef dir) {
  SmallString<256> state(dir);
  sys::path::append(state, "train_state.json");
  if (sys::fs::exists(state))
    return dir.str();
  SmallString<256> tracker(dir);
  sys::path::append(tracker, "latest_checkpointed_iteration.txt");
  Expected<std::string> latest = readAll(tracker);
  if (!latest)
    return createStringError(inconvertibleErrorCode(),
                             dir + ": neither an iteration folder (train_state.json) nor a --save folder "
                                   "(latest_checkpointed_iteration.txt); give OUT/train's --save folder");
  std::string name = "iter_" + std::string(7 - std::min<size_t>(7, StringRef(*latest).trim().size()), '0') +
                     StringRef(*latest).trim().str();
  SmallString<256> folder(dir);
  sys::path::append(folder, name);
  return std::string(folder);
}

} // namespace

int megac::runGenerate() {
  if (std::optional<std::string> conflict = conflictingFlagValues())
    return fail(*conflict);
  if (checkpoint.empty())
    return fail("say which checkpoint: megac generate CHECKPOINT --prompt TEXT");
  if (prompt.empty())
    return fail("--prompt TEXT is required (the text to continue)");
  if (!std::isfinite(temperature) || temperature < 0 || temperature > 1e6)
    return fail("--temperature is " + exactText(temperature) + "; it must be a finite number in [0, 1e6] (0: greedy)");
  if (!(topP > 0 && topP <= 1)) // NaN fails too
    return fail("--top-p is " + exactText(topP) + "; it must be > 0 and <= 1 (1: every token)");
  Expected<std::string> folder = iterationFolder(checkpoint);
  if (!folder)
    return fail(toString(folder.takeError()));
  SmallString<256> statePath(*folder), tokenizerPath(*folder);
  sys::path::append(statePath, "train_state.json");
  sys::path::append(tokenizerPath, "megac_tokenizer.json");
  if (!sys::fs::exists(tokenizerPath))
    return fail(*folder + " carries no tokenizer (megac_tokenizer.json: its data was not made by megac data); "
                          "give token ids to OUT/train generate --prompt-ids instead");
  Expected<json::Object> state = readObject(statePath, "the checkpoint");
  if (!state)
    return fail(toString(state.takeError()));
  std::optional<StringRef> spec = state->getString("spec");
  if (!spec || spec->empty())
    return fail(statePath + ": records no spec to compile the model from (an older checkpoint?)");

  // Everything temporary lives in one folder, removed at the end, also when a signal stops the
  // command (and its child) midway.
  megac::StopSignals stop;
  SmallString<128> work;
  if (std::error_code ec = sys::fs::createUniqueDirectory("megac-generate", work))
    return fail("cannot make a temporary folder: " + ec.message());
  auto path = [&](StringRef name) {
    SmallString<256> p(work);
    sys::path::append(p, name);
    return std::string(p);
  };
  auto result = [&]() -> Error {
    if (!writeTextFile(path("spec.yaml"), [&](raw_ostream &os) { os << *spec; }))
      return createStringError(inconvertibleErrorCode(), "cannot write the spec (the error is above)");
    std::string self = sys::fs::getMainExecutable(nullptr, (void *)&runGenerate);
    if (Error e = runCommand({self, "compile", path("spec.yaml"), "--micro-batch-size", "1", "-o", path("prog")},
                             "compiling the checkpoint's spec", StringRef(path("compile.log"))))
      return e;
    std::string python = tokenizerPython();
    if (Error e =
            runCommand({python, megacPaths().tokenizerScript, "encode", "--checkpoint", *folder, "--text", prompt},
                       "encoding the prompt", StringRef(path("prompt.json"))))
      return e;
    Expected<json::Object> encoded = readObject(path("prompt.json"), "megac_tokenizer.py encode");
    if (!encoded)
      return encoded.takeError();
    const json::Array *promptIds = encoded->getArray("ids");
    std::optional<int64_t> eod = encoded->getInteger("eod");
    if (!promptIds || promptIds->empty())
      return createStringError(inconvertibleErrorCode(), "the prompt encodes to no tokens");
    const std::string list = commaJoined(*promptIds);
    // The numbers as they read back (std::to_string would print --top-p 1e-9 as 0.000000).
    std::vector<std::string> run = {path("prog/train"), "generate", "--load", *folder, "--prompt-ids", list,
                                    "--temperature", exactText(temperature), "--top-k", std::to_string(topK),
                                    "--top-p", exactText(topP), "--seed", std::to_string(seed)};
    if (maxNewTokens > 0) // else OUT/train's default, which fits the model
      run.insert(run.end(), {"--max-new-tokens", std::to_string(maxNewTokens)});
    if (eod)
      run.insert(run.end(), {"--eod", std::to_string(*eod)});
    if (Error e = runCommand(run, "generating", StringRef(path("generated.json"))))
      return e;
    Expected<json::Object> generated = readObject(path("generated.json"), "OUT/train generate");
    if (!generated)
      return generated.takeError();
    const json::Array *newIds = generated->getArray("ids");
    if (!newIds)
      return createStringError(inconvertibleErrorCode(), "OUT/train generate printed no ids");
    const std::string newList = commaJoined(*newIds);
    if (Error e =
            runCommand({python, megacPaths().tokenizerScript, "decode", "--checkpoint", *folder, "--ids", newList},
                       "decoding the tokens", StringRef(path("completion.txt"))))
      return e;
    Expected<std::string> completion = readAll(path("completion.txt"));
    if (!completion)
      return completion.takeError();
    outs() << prompt << *completion << "\n";
    outs().flush();
    errs() << "megac generate: " << newIds->size() << " tokens (ids " << newList << ")\n";
    return Error::success();
  }();
  sys::fs::remove_directories(work);
  if (result)
    return fail(toString(std::move(result)));
  return 0;
}
