#include "GenerateSource.h"
#include "TextFile.h"

#include "megac/Frontend/SpecFromHuggingFace.h"
#include "megart/checkpoint_folder.h"
#include "megart/error.h"
#include "megart/peft_adapter.h"

#include "llvm/ADT/Twine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"

using namespace llvm;

namespace megac {

namespace {

// train_state.json, config.json and adapter_config.json are far smaller.
constexpr uint64_t kMaxRead = uint64_t(1) << 26;

Error fail(const Twine &message) { return createStringError(inconvertibleErrorCode(), message); }

std::string in(StringRef dir, StringRef name) { return joinPath(dir, name); }

bool isFile(StringRef dir, StringRef name) { return sys::fs::is_regular_file(in(dir, name)); }

Expected<json::Object> readObject(StringRef path) { return readJsonObject(path, kMaxRead, path); }

/// A tokenizer megac_tokenizer.py reads (load_from_folder): megac's record or Hugging Face's files.
bool hasTokenizer(StringRef dir) {
  return isFile(dir, "megac_tokenizer.json") || isFile(dir, "tokenizer.json") || isFile(dir, "tokenizer.model") ||
         (isFile(dir, "vocab.json") && isFile(dir, "merges.txt"));
}

/// The iteration folder a --save folder's tracker names, read as OUT/train's --load reads it.
Expected<std::string> latestIteration(StringRef dir) {
  try {
    return megart::iteration_folder(dir.str(), megart::read_tracker(dir.str()));
  } catch (const megart::Error &e) {
    return fail(e.what());
  }
}

Expected<GenerateSource> megacCheckpoint(StringRef folder) {
  const std::string statePath = in(folder, "train_state.json");
  Expected<json::Object> state = readObject(statePath);
  if (!state)
    return state.takeError();
  std::optional<StringRef> spec = state->getString("spec");
  if (!spec || spec->empty())
    return fail(statePath + ": records no spec to compile the model from (an older checkpoint?); give its "
                            "model's Hugging Face folder (OUT/train merge-lora or a checkpoint's config.json) instead");
  GenerateSource s;
  s.folder = folder.str();
  s.specText = spec->str();
  s.specOrigin = statePath + " (\"spec\")";
  s.adapters = isFile(folder, "adapter_config.json");
  s.kind = s.adapters ? "a megac LoRA checkpoint" : "a megac checkpoint";
  s.tokenizerFolder = folder.str();
  // Adapters trained on data tokenized elsewhere: their base model's folder may carry it.
  const json::Array *base = state->getArray("base_weights");
  if (s.adapters && !hasTokenizer(folder) && base && !base->empty())
    if (std::optional<StringRef> first = (*base)[0].getAsString())
      s.tokenizerFolder = sys::path::parent_path(*first).str();
  return s;
}

Expected<GenerateSource> huggingFaceFolder(StringRef folder) {
  if (!isFile(folder, "model.safetensors") && !isFile(folder, "model.safetensors.index.json"))
    return fail(folder + " has a config.json but no model.safetensors (nor model.safetensors.index.json): megac "
                         "reads safetensors weights; save the model with transformers' save_pretrained "
                         "(safe_serialization=True)");
  const std::string configPath = in(folder, "config.json");
  Expected<std::string> config = readTextFile(configPath, kMaxRead, "the model's config");
  if (!config)
    return config.takeError();
  Expected<std::string> spec = specFromHuggingFaceConfig(*config, configPath);
  if (!spec)
    return spec.takeError();
  GenerateSource s;
  s.kind = "a Hugging Face model folder";
  s.folder = folder.str();
  s.specText = std::move(*spec);
  s.specOrigin = configPath;
  s.hfConfig = configPath;
  s.tokenizerFolder = folder.str();
  return s;
}

/// A model folder to merge adapters into: a megac checkpoint's or a Hugging Face folder.
Expected<GenerateSource> baseModel(StringRef path, StringRef namedBy) {
  if (!sys::fs::is_directory(path))
    return fail(namedBy + " " + path + " is no local folder; megac downloads nothing from the Hugging Face Hub: "
                          "download the base model (huggingface-cli download NAME --local-dir DIR) and give "
                          "--pretrained-checkpoint DIR");
  // Adapters naming adapters (themselves, or each other) would recurse without end: a base is
  // never an adapter folder.
  if (sys::fs::exists(in(path, "adapter_config.json")))
    return fail(namedBy + " " + path + " holds LoRA adapters, not a base model; give the model they were made on");
  Expected<GenerateSource> base = findGenerateSource(path);
  if (base && base->adapters)
    return fail(namedBy + " " + path + " holds LoRA adapters, not a base model; give the model they were made on");
  return base;
}

Expected<GenerateSource> peftFolder(StringRef folder, StringRef pretrained) {
  try { // OUT/train's refusal of a folder without its tensors, before anything is compiled
    megart::peft_adapter_tensors(folder.str(), folder.str());
  } catch (const megart::Error &e) {
    return fail(e.what());
  }
  const std::string configPath = in(folder, "adapter_config.json");
  std::string base = pretrained.str(), namedBy = "--pretrained-checkpoint";
  if (base.empty()) {
    Expected<json::Object> config = readObject(configPath);
    if (!config)
      return config.takeError();
    std::optional<StringRef> named = config->getString("base_model_name_or_path");
    if (!named || named->empty())
      return fail(configPath + ": base_model_name_or_path is missing or null, so the adapters name no base model; "
                               "give the model they were made on with --pretrained-checkpoint DIR");
    base = named->str();
    namedBy = configPath + ": base_model_name_or_path";
  }
  Expected<GenerateSource> model = baseModel(base, namedBy);
  if (!model)
    return model.takeError();
  GenerateSource s;
  s.kind = "LoRA adapters PEFT saved";
  s.folder = folder.str();
  s.specText = std::move(model->specText);
  s.specOrigin = model->specOrigin;
  s.hfConfig = std::move(model->hfConfig);
  s.tokenizerFolder = hasTokenizer(folder) ? folder.str() : model->tokenizerFolder;
  s.adapters = true;
  return s;
}

} // namespace

Expected<GenerateSource> findGenerateSource(StringRef path, StringRef pretrained) {
  if (!sys::fs::is_directory(path))
    return fail(path + (sys::fs::exists(path) ? " is a file" : " does not exist") +
                "; give a folder: a megac checkpoint (OUT/train's --save folder or an iteration folder), a Hugging "
                "Face model folder (config.json + model.safetensors) or LoRA adapters (adapter_config.json + "
                "adapter_model.safetensors)");
  if (isFile(path, "train_state.json"))
    return megacCheckpoint(path);
  if (isFile(path, megart::kTrackerFile)) {
    Expected<std::string> iteration = latestIteration(path);
    if (!iteration)
      return iteration.takeError();
    if (!isFile(*iteration, "train_state.json"))
      return fail(path + ": its tracker names " + *iteration + ", which holds no train_state.json; the checkpoint "
                         "is incomplete: give another iteration's folder");
    return megacCheckpoint(*iteration);
  }
  if (isFile(path, "adapter_config.json"))
    return peftFolder(path, pretrained);
  if (isFile(path, "config.json"))
    return huggingFaceFolder(path);
  return fail(path + " holds no model megac generate reads: neither a megac checkpoint (train_state.json, or a "
                     "--save folder's latest_checkpointed_iteration.txt), nor a Hugging Face model folder (config.json "
                     "+ model.safetensors), nor LoRA adapters (adapter_config.json + adapter_model.safetensors)");
}

} // namespace megac
