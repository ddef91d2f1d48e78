#include "SpecSource.h"
#include "TextFile.h"

#include "megac/Frontend/HuggingFaceConfig.h"
#include "megac/Frontend/ModelSpec.h"
#include "megac/Frontend/SpecFromHuggingFace.h"
#include "megac/Limits.h"
#include "megac/NumberText.h"
#include "megart/checkpoint_match.h"
#include "megart/error.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/FileSystem.h"

#include <tuple>

using namespace llvm;

namespace megac {

namespace {

/// A spec or a config.json is a few lines; a bigger file is a mistake (a wrong path, a device).
constexpr uint64_t kMaxSpecBytes = 1 << 20;

Error fail(const Twine &message) { return createStringError(inconvertibleErrorCode(), message); }

/// The spec of the Hugging Face model whose config.json is `configPath` (`path` as the user gave it).
Expected<SpecSource> huggingFaceSpec(StringRef path, const std::string &configPath) {
  Expected<std::string> config = readTextFile(configPath, kMaxSpecBytes, "the model's config");
  if (!config)
    return config.takeError();
  Expected<std::string> text = specFromHuggingFaceConfig(*config, configPath, SpecUse::Train);
  if (!text)
    return text.takeError();
  Expected<ModelSpec> spec = parseModelSpec(*text, configPath);
  if (!spec)
    return spec.takeError();
  // Every field the spec does not carry must be one megac computes: OUT/train --load's own check,
  // before anything is compiled.
  try {
    megart::check_hf_config(configPath, huggingFaceConfig(*spec).json, "megac compile " + path.str(),
                            "megac compiles the model this config.json describes, and a model with the fields above "
                            "is not one megac computes (yet)");
  } catch (const megart::Error &e) {
    return fail(e.what());
  }
  return SpecSource{std::move(*text), configPath, configPath};
}

/// `specText` with `key: value` (replacing the key's line, or added), read back to check that
/// exactly `check` came of it (a spec in YAML's flow style would not).
Expected<std::string> specWithKey(StringRef specText, StringRef key, const std::string &value, StringRef origin,
                                  function_ref<bool(const ModelSpec &)> check) {
  SmallVector<StringRef> lines;
  specText.rtrim('\n').split(lines, '\n');
  std::string out;
  bool found = false;
  for (StringRef line : lines) {
    if (line.starts_with((key + ":").str())) {
      out += (key + ": " + value + "\n").str();
      found = true;
    } else {
      out += line.str() + "\n";
    }
  }
  if (!found)
    out += (key + ": " + value + "\n").str();
  Expected<ModelSpec> edited = parseModelSpec(out, origin);
  if (!edited)
    return edited.takeError();
  if (check(*edited))
    return out;
  return fail(origin + ": megac cannot set the spec's " + key + " to " + value + " (it is not one '" + key +
              ": VALUE' line); write the spec one key a line");
}

} // namespace

Expected<SpecSource> readSpecSource(StringRef path, const SpecOverrides &overrides) {
  Expected<SpecSource> source = [&]() -> Expected<SpecSource> {
    if (sys::fs::is_directory(path)) {
      const std::string configPath = joinPath(path, "config.json");
      if (!sys::fs::exists(configPath))
        return fail(path + " is a folder without a config.json; give a spec YAML or a Hugging Face model folder "
                           "(config.json, and model.safetensors for OUT/train --load)");
      return huggingFaceSpec(path, configPath);
    }
    if (path.ends_with(".json"))
      return huggingFaceSpec(path, path.str());
    Expected<std::string> text = readTextFile(path, kMaxSpecBytes, "spec");
    if (!text)
      return text.takeError();
    return SpecSource{std::move(*text), path.str(), ""};
  }();
  if (!source)
    return source;
  for (auto [flag, key, rate] : {std::tuple{"--hidden-dropout", "hidden_dropout", overrides.hiddenDropout},
                                 std::tuple{"--attention-dropout", "attention_dropout", overrides.attentionDropout}}) {
    if (!rate)
      continue;
    if (!(*rate >= 0 && *rate < 1)) // NaN fails too
      return fail(Twine(flag) + " is " + shortestExactText(*rate) + "; a dropout rate is a number in [0, 1)");
    const bool hidden = StringRef(key) == "hidden_dropout";
    const double want = *rate;
    Expected<std::string> text = specWithKey(source->text, key, shortestExactText(want), source->origin,
                                             [&](const ModelSpec &s) {
                                               return (hidden ? s.hiddenDropout : s.attentionDropout) == want;
                                             });
    if (!text)
      return text.takeError();
    source->text = std::move(*text);
  }
  const std::optional<int64_t> seqLength = overrides.seqLength;
  if (!seqLength)
    return source;
  if (*seqLength < 1 || *seqLength > limits::kSeqLength)
    return fail("--seq-length is " + Twine(*seqLength) + "; give the tokens of one sample, 1 to " +
                Twine(limits::kSeqLength));
  Expected<ModelSpec> spec = parseModelSpec(source->text, source->origin);
  if (!spec)
    return spec.takeError();
  if (spec->positionEmbeddingType == "learned" && *seqLength > spec->maxPositionEmbeddings)
    return fail("--seq-length is " + Twine(*seqLength) + ", but " + source->origin + " has learned positions for " +
                Twine(spec->maxPositionEmbeddings) + " tokens (max_position_embeddings); give at most " +
                Twine(spec->maxPositionEmbeddings));
  Expected<std::string> text = specWithSeqLength(source->text, *seqLength, spec->maxPositionEmbeddings, source->origin);
  if (!text)
    return text.takeError();
  source->text = std::move(*text);
  return source;
}

Expected<std::string> specWithSeqLength(StringRef specText, int64_t seqLength, int64_t maxPositions,
                                        StringRef origin) {
  // A learned position table keeps the model's rows: the spec's own, or `maxPositions`.
  std::string text = specText.str();
  if (!StringRef(text).contains("max_position_embeddings:")) {
    Expected<std::string> kept =
        specWithKey(text, "max_position_embeddings", std::to_string(maxPositions), origin,
                    [&](const ModelSpec &s) { return s.maxPositionEmbeddings == maxPositions; });
    if (!kept)
      return kept.takeError();
    text = std::move(*kept);
  }
  return specWithKey(text, "seq_length", std::to_string(seqLength), origin,
                     [&](const ModelSpec &s) { return s.seqLength == seqLength; });
}

} // namespace megac
