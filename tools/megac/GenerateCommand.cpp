// megac generate: text from a model: a megac checkpoint, a Hugging Face folder, or LoRA adapters
// merged into their base (GenerateSource.h). Encodes the prompt with the model's tokenizer
// (megac_tokenizer.py) and checks it fits seq_length, then takes the spec's program compiled for
// one rank in fp32 (over at most the positions it needs, GenerateWindow.h) from the cache
// (compiling it the first time, ProgramCache.h), runs
// `OUT/train generate` and decodes what it drew.
#include "Commands.h"
#include "GenerateSource.h"
#include "GenerateWindow.h"
#include "MegacPaths.h"
#include "ProgramCache.h"
#include "RepeatedFlags.h"
#include "RunCommand.h"
#include "SpecSource.h"
#include "TextFile.h"
#include "TokenizerProcess.h"

#include "megac/Frontend/HuggingFaceConfig.h"
#include "megac/Frontend/ModelSpec.h"
#include "megac/NumberText.h"
#include "megart/checkpoint_match.h"
#include "megart/error.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>

using namespace llvm;
namespace cl = llvm::cl;

namespace megac::cli {
extern cl::SubCommand generate;
} // namespace megac::cli

namespace {
using megac::cli::generate;

cl::opt<std::string> checkpoint(cl::Positional,
                                cl::desc("CHECKPOINT (a megac checkpoint, a Hugging Face folder or LoRA adapters)"),
                                cl::sub(generate));
cl::opt<std::string> pretrained("pretrained-checkpoint",
                                cl::desc("the base model of LoRA adapters (default: the one they name)"),
                                cl::sub(generate), megac::recordValues<std::string>("--pretrained-checkpoint"));
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


// What the steps print is small: the prompt's ids, the drawn ids, the completion.
constexpr uint64_t kMaxRead = uint64_t(1) << 26;

Expected<std::string> readAll(StringRef path) { return megac::readTextFile(path, kMaxRead, "file"); }

/// The JSON object a step wrote to `path`; fails naming the step.
Expected<json::Object> readObject(StringRef path, StringRef step) {
  return megac::readJsonObject(path, kMaxRead, step + "'s output");
}

/// "1,2,3": the ids as the programs' flags take them.
std::string commaJoined(const json::Array &ids) {
  std::string list;
  for (const json::Value &id : ids)
    list += (list.empty() ? "" : ",") + std::to_string(id.getAsInteger().value_or(-1));
  return list;
}

/// Fails, before anything is compiled, when the prompt and the tokens asked for do not fit the
/// model's positions; returns how many to generate (--max-new-tokens, or by default 32 or what
/// seq_length leaves, as OUT/train generate).
Expected<int64_t> tokensToGenerate(int64_t promptTokens, int64_t seqLength) {
  auto fail = [](const Twine &m) { return createStringError(inconvertibleErrorCode(), m); };
  const int64_t left = seqLength - promptTokens;
  if (maxNewTokens == 0) {
    if (left < 1)
      return fail("the prompt is " + Twine(promptTokens) + " tokens, and the model's seq_length " + Twine(seqLength) +
                  " leaves none to generate; shorten the prompt to at most " + Twine(seqLength - 1) + " tokens");
    return std::min<int64_t>(32, left);
  }
  if (promptTokens + int64_t(maxNewTokens) <= seqLength)
    return int64_t(maxNewTokens);
  return fail("the prompt (" + Twine(promptTokens) + " tokens) + --max-new-tokens (" + Twine(maxNewTokens) +
              ") exceed the model's seq_length " + Twine(seqLength) + "; " +
              (left >= 1 ? "give --max-new-tokens " + Twine(left) + " or fewer, or shorten the prompt"
                         : "shorten the prompt to at most " + Twine(seqLength - 1) + " tokens"));
}

} // namespace

int megac::runGenerate() {
  if (std::optional<std::string> conflict = conflictingFlagValues())
    return fail(*conflict);
  if (checkpoint.empty())
    return fail("say which model: megac generate CHECKPOINT --prompt TEXT");
  if (prompt.empty())
    return fail("--prompt TEXT is required (the text to continue)");
  if (!std::isfinite(temperature) || temperature < 0 || temperature > 1e6)
    return fail("--temperature is " + megac::shortestExactText(temperature) + "; it must be a finite number in [0, 1e6] (0: greedy)");
  if (!(topP > 0 && topP <= 1)) // NaN fails too
    return fail("--top-p is " + megac::shortestExactText(topP) + "; it must be > 0 and <= 1 (1: every token)");
  Expected<GenerateSource> source = findGenerateSource(checkpoint, pretrained);
  if (!source)
    return fail(toString(source.takeError()));
  if (!pretrained.empty() && !source->adapters)
    return fail("--pretrained-checkpoint names the base model of LoRA adapters, but " + checkpoint + " is " +
                source->kind + "; leave the flag out");
  Expected<ModelSpec> spec = parseModelSpec(source->specText, source->specOrigin);
  if (!spec)
    return fail(toString(spec.takeError()));
  if (spec->isEncoder())
    return fail(checkpoint + " is a masked language model (family " + spec->family +
                "): it predicts masked tokens from both sides and does not continue a text; megac generate takes a "
                "causal LM (gpt2, llama, qwen2, mistral, gemma)");
  // Every field of a Hugging Face config.json the spec does not carry must be one megac computes:
  // the runtime's own check, before a compile.
  if (!source->hfConfig.empty()) {
    try {
      megart::check_hf_config(source->hfConfig, huggingFaceConfig(*spec).json, "megac generate " + checkpoint,
                              "megac generate read the model's spec from this config.json, and a model with the "
                              "fields above is not one megac computes (yet): it cannot generate from it");
    } catch (const megart::Error &e) {
      return fail(e.what());
    }
  }

  // Everything temporary lives in one folder, removed at the end, also when a signal stops the
  // command (and its child) midway; the staging folder of a compile too (ProgramCache.cpp).
  megac::StopSignals stop;
  SmallString<128> work;
  if (std::error_code ec = sys::fs::createUniqueDirectory("megac-generate", work))
    return fail("cannot make a temporary folder: " + ec.message());
  auto path = [&](StringRef name) { return joinPath(work, name); };
  auto result = [&]() -> Error {
    std::string python = tokenizerPython();
    if (Error e = runCommand({python, megacPaths().tokenizerScript, "encode", "--checkpoint", source->tokenizerFolder,
                              "--text", prompt},
                             "encoding the prompt", StringRef(path("prompt.json"))))
      return e;
    Expected<json::Object> encoded = readObject(path("prompt.json"), "megac_tokenizer.py encode");
    if (!encoded)
      return encoded.takeError();
    const json::Array *promptIds = encoded->getArray("ids");
    const json::Array *eodIds = encoded->getArray("eod_ids");
    if (!promptIds || promptIds->empty())
      return createStringError(inconvertibleErrorCode(), "the prompt encodes to no tokens");
    Expected<int64_t> newTokens = tokensToGenerate(int64_t(promptIds->size()), spec->seqLength);
    if (!newTokens)
      return newTokens.takeError();

    // A model made for many positions (Llama 3: 131072) is compiled for fewer (GenerateWindow.h).
    const int64_t window = generateWindow(spec->seqLength, int64_t(promptIds->size()) + *newTokens);
    std::string specText = source->specText;
    if (window < spec->seqLength) {
      Expected<std::string> windowed =
          specWithSeqLength(specText, window, spec->maxPositionEmbeddings, source->specOrigin);
      if (!windowed)
        return windowed.takeError();
      specText = std::move(*windowed);
      errs() << "megac generate: the program reads " << window << " of the model's " << spec->seqLength
             << " positions (the prompt and the tokens to generate fit)\n";
    }
    std::string self = sys::fs::getMainExecutable(nullptr, (void *)&runGenerate);
    Expected<CachedProgram> program = cachedProgram(specText, {"--micro-batch-size", "1"}, self);
    if (!program)
      return program.takeError();
    if (program->compiled)
      errs() << "megac generate: compiled the program for this model in " << format("%.1f", program->seconds)
             << " s, kept in " << program->dir << " (the next call reuses it)\n";
    else
      errs() << "megac generate: reused the program compiled for this model (" << program->dir << ")\n";
    const std::string train = joinPath(program->dir, "train");

    std::string load = source->folder;
    if (source->adapters) { // merged as OUT/train merge-lora does, into the temporary folder
      std::vector<std::string> merge = {train, "merge-lora", "--load", load, "--save", path("merged")};
      if (!pretrained.empty())
        merge.insert(merge.end(), {"--pretrained-checkpoint", pretrained});
      if (Error e = runCommand(merge, "merging the adapters into their base model", StringRef(path("merge.log"))))
        return e;
      load = path("merged");
    }
    const std::string list = commaJoined(*promptIds);
    // The numbers as they read back (std::to_string would print --top-p 1e-9 as 0.000000).
    std::vector<std::string> run = {train, "generate", "--load", load, "--prompt-ids", list,
                                    "--max-new-tokens", std::to_string(*newTokens), "--temperature",
                                    megac::shortestExactText(temperature), "--top-k", std::to_string(topK), "--top-p",
                                    megac::shortestExactText(topP), "--seed", std::to_string(seed)};
    if (eodIds && !eodIds->empty())
      run.insert(run.end(), {"--eod", commaJoined(*eodIds)});
    if (Error e = runCommand(run, "generating", StringRef(path("generated.json"))))
      return e;
    Expected<json::Object> generated = readObject(path("generated.json"), "OUT/train generate");
    if (!generated)
      return generated.takeError();
    const json::Array *newIds = generated->getArray("ids");
    if (!newIds)
      return createStringError(inconvertibleErrorCode(), "OUT/train generate printed no ids");
    const std::string newList = commaJoined(*newIds);
    if (Error e = runCommand({python, megacPaths().tokenizerScript, "decode", "--checkpoint", source->tokenizerFolder,
                              "--ids", newList},
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
