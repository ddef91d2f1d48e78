#include "SpecSource.h"
#include "TextFile.h"

#include "megac/Frontend/HuggingFaceConfig.h"
#include "megac/Frontend/ModelSpec.h"
#include "megac/Frontend/SpecFromHuggingFace.h"
#include "megac/Limits.h"
#include "megart/checkpoint_match.h"
#include "megart/error.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/FileSystem.h"

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

} // namespace

Expected<SpecSource> readSpecSource(StringRef path, std::optional<int64_t> seqLength) {
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
  if (!source || !seqLength)
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
  SmallVector<StringRef> lines;
  specText.split(lines, '\n');
  std::string out;
  bool hasMaxPositions = false;
  for (StringRef line : lines) {
    if (line.starts_with("max_position_embeddings:"))
      hasMaxPositions = true;
    out += line.starts_with("seq_length:") ? ("seq_length: " + Twine(seqLength)).str() : line.str();
    out += "\n";
  }
  if (!hasMaxPositions)
    out += ("max_position_embeddings: " + Twine(maxPositions) + "\n").str();
  // Read back: the edit must have given exactly these sizes (a spec in YAML's flow style would not).
  Expected<ModelSpec> edited = parseModelSpec(out, origin);
  if (edited && edited->seqLength == seqLength && edited->maxPositionEmbeddings == maxPositions)
    return out;
  if (!edited)
    consumeError(edited.takeError());
  return fail(origin + ": megac compiles this model for " + Twine(seqLength) + " of its " + Twine(maxPositions) +
              " positions, but cannot set the spec's seq_length (it is not one 'seq_length: N' line); write the "
              "spec one key a line");
}

} // namespace megac
