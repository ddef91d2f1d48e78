#include "megart/lora_merge.h"

#include "megart/checkpoint_match.h"
#include "megart/error.h"
#include "megart/file_checks.h"
#include "megart/json.h"
#include "megart/safetensors.h"
#include "megart/train_checkpoint.h"

#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <unistd.h>

namespace megart {

namespace fs = std::filesystem;

namespace {

constexpr const char *kPeftPrefix = "base_model.model.";
// What a LoRA checkpoint holds besides the files a merged model takes along (README.md: PEFT's
// model card of the adapters).
const std::set<std::string> kNotCopied = {"adapter_model.safetensors", "adapter_config.json", "optimizer.safetensors",
                                          "train_state.json", "model.safetensors", "README.md"};
// The files of a Hugging Face model folder besides its weights, taken from the base's folder for
// the adapters of a folder PEFT saved (it holds no config.json).
const char *const kModelFolderFiles[] = {"config.json",      "generation_config.json", "tokenizer.json",
                                         "tokenizer_config.json", "special_tokens_map.json", "vocab.json",
                                         "merges.txt",       "tokenizer.model"};

std::string read_text(const std::string &path) {
  return read_small_file(path, "PEFT's adapter_config.json",
                         "--merge-lora needs a LoRA checkpoint folder (adapter_config.json, adapter_model.safetensors)");
}

struct AdapterConfig {
  int64_t rank = 0;
  double alpha = 0;
  bool rslora = false, fan_in_fan_out = false;
  double scaling() const { return rslora ? alpha / std::sqrt(double(rank)) : alpha / double(rank); }
};

// A value that says "not used": null, false, 0, "", [] or {}.
bool unused(const JsonValue &v) {
  using K = JsonValue::Kind;
  return v.kind == K::Null || (v.kind == K::Bool && !v.boolean) ||
         ((v.kind == K::Integer || v.kind == K::Number) && v.number == 0) || (v.kind == K::String && v.string.empty()) ||
         (v.kind == K::Array && v.array.empty()) || (v.kind == K::Object && v.object.empty());
}

// adapter_config.json's keys the merge reads (the rest of what it may hold must be documentary,
// checkpoint_match.h's one list): the merge is W + scaling x (B A) and nothing else, whichever
// program runs it (a program without LoRA, such as megac generate's, has no settings to check a
// folder PEFT saved against).
const std::set<std::string> kMergeReads = {"peft_type",      "r",              "lora_alpha", "use_rslora",
                                           "fan_in_fan_out", "target_modules", "lora_dropout", "bias"};

// Every setting of `root` that would make the adapters add something else than B A x scaling.
void check_plain_lora(const JsonValue &root, const std::string &path) {
  std::vector<std::string> other;
  for (const auto &[key, value] : root.object)
    if (!kMergeReads.count(key) && !documentary_adapter_fields().count(key) && !unused(value))
      other.push_back(key + " " + value.brief());
  if (const JsonValue *bias = root.get("bias"); bias && !unused(*bias) && !(bias->is_string() && bias->string == "none"))
    other.push_back("bias " + bias->brief());
  if (const JsonValue *init = root.get("init_lora_weights");
      init && init->kind != JsonValue::Kind::Bool && !(init->is_string() && (init->string == "gaussian" || init->string == "eva")))
    other.push_back("init_lora_weights " + init->brief() + " (adapters that belong with base weights PEFT rewrote)");
  if (other.empty())
    return;
  std::string list;
  for (const std::string &o : other)
    list += "\n  " + o;
  throw Error(path + ": settings merge-lora does not compute (it adds B A x lora_alpha / r, or / sqrt(r) with "
              "use_rslora, to each adapted weight, and nothing else):" + list +
              "\nmegac does not implement them (yet); merge these adapters with PEFT's merge_and_unload");
}

AdapterConfig read_config(const std::string &path) {
  const JsonValue root = parse_json(read_text(path), path);
  auto field = [&](const char *key) -> const JsonValue & {
    const JsonValue *v = root.get(key);
    if (!v)
      throw Error(path + ": no \"" + key + "\"; is this PEFT's adapter_config.json?");
    return *v;
  };
  AdapterConfig c;
  if (!root.is_object())
    throw Error(path + ": holds " + root.brief() + ", not PEFT's adapter_config.json object");
  if (field("peft_type").string != "LORA")
    throw Error(path + ": peft_type is " + field("peft_type").brief() + "; --merge-lora merges LORA adapters");
  const JsonValue &r = field("r"), &alpha = field("lora_alpha");
  if (!r.is_integer() || r.integer < 1 || (alpha.kind != JsonValue::Kind::Integer && alpha.kind != JsonValue::Kind::Number) ||
      !(alpha.number > 0))
    throw Error(path + ": r " + r.brief() + " and lora_alpha " + alpha.brief() + " must be positive numbers");
  c.rank = r.integer;
  c.alpha = alpha.number;
  if (const JsonValue *v = root.get("use_rslora"))
    c.rslora = v->boolean;
  if (const JsonValue *v = root.get("fan_in_fan_out"))
    c.fan_in_fan_out = v->boolean;
  check_plain_lora(root, path);
  return c;
}

} // namespace

MergeReport merge_lora(const std::string &adapter_folder, const std::vector<std::string> &base_files,
                       const std::string &out_dir) {
  const fs::path folder(adapter_folder);
  const AdapterConfig config = read_config((folder / "adapter_config.json").string());
  // The settings the adapters were trained with, as the run recorded them: an edited
  // adapter_config.json would merge them with another scale.
  if (fs::exists(folder / "train_state.json")) {
    const TrainState state = read_train_state((folder / "train_state.json").string());
    if (!state.adapter_config_json.empty())
      check_adapter_config(read_text((folder / "adapter_config.json").string()),
                           (folder / "adapter_config.json").string(), state.adapter_config_json,
                           "the settings train_state.json records of the run that trained them");
  }
  const SafetensorsFile adapters = SafetensorsFile::open((folder / "adapter_model.safetensors").string());
  std::error_code ec;
  if (fs::exists(out_dir, ec) && !fs::is_empty(out_dir, ec))
    throw Error("--merge-lora " + out_dir + ": the folder is not empty; give a new one (nothing was written)");
  // module path -> its A and B tensors' names
  std::map<std::string, std::pair<std::string, std::string>> modules;
  for (const std::string &name : adapters.names()) {
    const std::string a = ".lora_A.weight", b = ".lora_B.weight";
    const bool is_a = name.size() > a.size() && name.compare(name.size() - a.size(), a.size(), a) == 0;
    const bool is_b = name.size() > b.size() && name.compare(name.size() - b.size(), b.size(), b) == 0;
    if (name.rfind(kPeftPrefix, 0) != 0 || (!is_a && !is_b))
      throw Error(adapters.path() + ": tensor '" + name + "' is not a LoRA adapter in PEFT's names "
                  "(base_model.model.<module>.lora_A.weight / .lora_B.weight)");
    const std::string module = name.substr(std::string(kPeftPrefix).size(), name.size() - a.size() -
                                                                                std::string(kPeftPrefix).size());
    (is_a ? modules[module].first : modules[module].second) = name;
  }
  std::vector<SafetensorsFile> bases;
  for (const std::string &f : base_files)
    bases.push_back(SafetensorsFile::open(f));
  std::vector<std::vector<float>> storage;
  std::vector<NamedTensor> named;
  std::set<std::string> merged;
  MergeReport report;
  for (const SafetensorsFile &base : bases)
    for (const std::string &name : base.names()) {
      const TensorInfo &info = base.get(name);
      storage.push_back(base.read_f32(name, info.shape));
      std::vector<float> &w = storage.back();
      const std::string suffix = ".weight";
      const std::string module =
          name.size() > suffix.size() ? name.substr(0, name.size() - suffix.size()) : std::string();
      auto adapter = modules.find(module);
      if (adapter != modules.end() && name.compare(module.size(), suffix.size(), suffix) == 0) {
        const auto &[a_name, b_name] = adapter->second;
        if (a_name.empty() || b_name.empty())
          throw Error(adapters.path() + ": module " + module + " has " + (a_name.empty() ? "no lora_A" : "no lora_B"));
        const TensorInfo &ai = adapters.get(a_name), &bi = adapters.get(b_name);
        if (info.shape.size() != 2 || ai.shape.size() != 2 || bi.shape.size() != 2 || ai.shape[0] != config.rank ||
            bi.shape[1] != config.rank)
          throw Error(adapters.path() + ": " + a_name + " " + shape_string(ai.shape) + " and " + b_name + " " +
                      shape_string(bi.shape) + " are not rank-" + std::to_string(config.rank) + " adapters of " +
                      name + " " + shape_string(info.shape));
        const int64_t in = ai.shape[1], out = bi.shape[0], r = config.rank;
        const std::vector<int64_t> expected =
            config.fan_in_fan_out ? std::vector<int64_t>{in, out} : std::vector<int64_t>{out, in};
        if (info.shape != expected)
          throw Error(name + " " + shape_string(info.shape) + " in " + base.path() + " does not fit its adapters (" +
                      shape_string(expected) + " with fan_in_fan_out " + (config.fan_in_fan_out ? "true" : "false") + ")");
        const std::vector<float> A = adapters.read_f32(a_name, ai.shape), B = adapters.read_f32(b_name, bi.shape);
        const double s = config.scaling();
        for (int64_t o = 0; o < out; ++o)
          for (int64_t i = 0; i < in; ++i) {
            double delta = 0;
            for (int64_t k = 0; k < r; ++k)
              delta += double(B[o * r + k]) * double(A[k * in + i]);
            float &target = config.fan_in_fan_out ? w[i * out + o] : w[o * in + i];
            target = static_cast<float>(double(target) + s * delta);
          }
        merged.insert(module);
        ++report.merged;
      }
      named.push_back({name, info.shape, nullptr});
    }
  for (size_t i = 0; i < named.size(); ++i)
    named[i].data = storage[i].data();
  for (const auto &[module, names] : modules)
    if (!merged.count(module))
      throw Error(adapters.path() + ": the base model has no " + module + ".weight for its adapters (is " +
                  "it the model these adapters were trained on?)");
  // Everything goes into a staging folder beside OUT, renamed into place when complete: a full
  // disk or a kill leaves no half-written model where OUT should be.
  const fs::path out = fs::absolute(out_dir).lexically_normal();
  const fs::path staging = out.parent_path() / (out.filename().string() + ".tmp." + std::to_string(::getpid()));
  struct Cleanup {
    fs::path path;
    ~Cleanup() {
      std::error_code ignored;
      if (!path.empty())
        fs::remove_all(path, ignored);
    }
  } cleanup{staging};
  fs::remove_all(staging, ec);
  fs::create_directories(staging, ec);
  if (ec)
    throw Error("--merge-lora " + out_dir + ": cannot create " + staging.string() + ": " + ec.message());
  write_safetensors((staging / "model.safetensors").string(), named, {{"format", "pt"}});
  for (const fs::directory_entry &e : fs::directory_iterator(folder)) {
    if (!e.is_regular_file() || kNotCopied.count(e.path().filename().string()))
      continue;
    fs::copy_file(e.path(), staging / e.path().filename(), fs::copy_options::overwrite_existing, ec);
    if (ec)
      throw Error("--merge-lora " + out_dir + ": cannot copy " + e.path().string() + ": " + ec.message() +
                  " (nothing was written)");
  }
  // A folder PEFT saved (no config.json): the base's folder completes the model's files.
  const bool peft_folder = !fs::exists(folder / "config.json", ec);
  const fs::path base_folder =
      base_files.empty() || !peft_folder ? fs::path() : fs::path(base_files.front()).parent_path();
  for (const char *name : kModelFolderFiles) {
    if (base_folder.empty() || fs::exists(staging / name, ec) || !fs::is_regular_file(base_folder / name, ec))
      continue;
    fs::copy_file(base_folder / name, staging / name, ec);
    if (ec)
      throw Error("--merge-lora " + out_dir + ": cannot copy " + (base_folder / name).string() + ": " + ec.message() +
                  " (nothing was written)");
  }
  if (fs::exists(out, ec)) // an empty folder (checked above) that the rename replaces
    fs::remove(out, ec);
  fs::rename(staging, out, ec);
  if (ec)
    throw Error("--merge-lora " + out_dir + ": cannot move " + staging.string() + " into place: " + ec.message());
  cleanup.path.clear();
  report.tensors = static_cast<int64_t>(named.size());
  return report;
}

} // namespace megart
