#include "megart/peft_adapter.h"

#include "megart/error.h"
#include "megart/file_checks.h"
#include "megart/json.h"

#include <algorithm>
#include <filesystem>
#include <set>

namespace megart {

namespace fs = std::filesystem;

namespace {

constexpr const char *kPeftPrefix = "base_model.model.";

bool ends_with(const std::string &s, const std::string &suffix) {
  return s.size() > suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string read_config(const std::string &path) {
  return read_small_file(path, "PEFT's adapter_config.json", "PEFT's adapter_config.json is a JSON file");
}

} // namespace

std::string peft_base_model_path(const std::vector<std::string> &base_weights) {
  if (base_weights.empty())
    return "";
  const fs::path folder = fs::path(base_weights.front()).parent_path();
  std::error_code ec;
  return fs::is_regular_file(folder / "config.json", ec) ? folder.string() : base_weights.front();
}

std::string adapter_config_with_base(const std::string &adapter_config_json, const std::string &base) {
  JsonValue config = parse_json(adapter_config_json, "the program's adapter_config.json");
  set_member(config, "base_model_name_or_path", base.empty() ? json_null() : json_string(base));
  return format_json(config) + "\n";
}

std::string peft_named_base(const std::string &adapter_config_path) {
  const JsonValue config = parse_json(read_config(adapter_config_path), adapter_config_path);
  const JsonValue *base = config.is_object() ? config.get("base_model_name_or_path") : nullptr;
  if (!base || !base->is_string() || base->string.empty())
    throw Error(adapter_config_path + ": base_model_name_or_path is " + (base ? base->brief() : "missing") +
                ", so the adapters name no base model; give the model they were made on with "
                "--pretrained-checkpoint BASE (a Hugging Face folder or a .safetensors file)");
  std::error_code ec;
  if (!fs::exists(base->string, ec))
    throw Error(adapter_config_path + ": base_model_name_or_path \"" + base->string + "\" is no local file or "
                "folder (seen from " + fs::current_path(ec).string() + "); megac downloads nothing from the Hugging "
                "Face Hub: download the model (huggingface-cli download " + base->string + " --local-dir DIR) and "
                "give it with --pretrained-checkpoint DIR");
  return base->string;
}

std::string peft_adapter_tensors(const std::string &dir, const std::string &what) {
  const fs::path tensors = fs::path(dir) / "adapter_model.safetensors";
  std::error_code ec;
  if (fs::is_regular_file(tensors, ec))
    return tensors.string();
  const bool pickled = fs::exists(fs::path(dir) / "adapter_model.bin", ec);
  throw Error(what + ": the folder has adapter_config.json but no adapter_model.safetensors" +
              (pickled ? "; its adapter_model.bin is PyTorch's pickle format, which megac does not read: save the "
                         "adapters with PEFT's save_pretrained(DIR, safe_serialization=True) (its default)"
                       : "; copy the adapters' tensors beside it as PEFT's save_pretrained writes them"));
}

std::vector<std::string> adapted_modules(const std::vector<std::string> &tensor_names) {
  std::set<std::string> modules;
  for (const std::string &name : tensor_names) {
    std::string path = name.rfind(kPeftPrefix, 0) == 0 ? name.substr(std::string(kPeftPrefix).size()) : name;
    bool adapter = false;
    for (const std::string suffix : {".lora_A.weight", ".lora_B.weight"})
      if (ends_with(path, suffix)) {
        path.resize(path.size() - suffix.size());
        adapter = true;
      }
    if (!adapter)
      continue;
    // transformer.h.0.attn.c_attn / model.layers.11.self_attn.q_proj: what follows the layer index.
    size_t start = 0;
    while (start < path.size()) {
      const size_t end = std::min(path.find('.', start), path.size());
      const std::string part = path.substr(start, end - start);
      if (!part.empty() && end < path.size() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        path = path.substr(end + 1);
        break;
      }
      start = end + 1;
    }
    modules.insert(path);
  }
  return {modules.begin(), modules.end()};
}

} // namespace megart
