#include "megart/checkpoint_match.h"
#include "megart/peft_adapter.h"

#include "expect_error.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

namespace fs = std::filesystem;

namespace {

// A GPT-2 LoRA program's adapter_config.json (megac compile --lora-rank 4 --lora-alpha 8
// --lora-target-modules c_attn,c_proj), as the compiler writes it.
const char *const kProgram = R"({
  "base_model_name_or_path": null, "bias": "none", "fan_in_fan_out": true, "inference_mode": true,
  "init_lora_weights": true, "lora_alpha": 8, "lora_dropout": 0, "modules_to_save": null, "peft_type": "LORA",
  "r": 4, "target_modules": ["attn.c_attn", "attn.c_proj", "mlp.c_proj"], "task_type": "CAUSAL_LM",
  "use_dora": false, "use_rslora": false})";

// What PEFT 0.13's save_pretrained writes for LoraConfig(r=4, lora_alpha=8, target_modules=["c_attn", "c_proj"]).
std::string peft_config(const std::string &change_key = "", const std::string &change_value = "") {
  std::string fields[][2] = {
      {"alpha_pattern", "{}"}, {"auto_mapping", "null"}, {"base_model_name_or_path", "\"/models/gpt2\""},
      {"bias", "\"none\""}, {"fan_in_fan_out", "true"}, {"inference_mode", "true"}, {"init_lora_weights", "true"},
      {"layer_replication", "null"}, {"layers_pattern", "null"}, {"layers_to_transform", "null"},
      {"loftq_config", "{}"}, {"lora_alpha", "8"}, {"lora_dropout", "0.0"}, {"megatron_config", "null"},
      {"megatron_core", "\"megatron.core\""}, {"modules_to_save", "null"}, {"peft_type", "\"LORA\""}, {"r", "4"},
      {"rank_pattern", "{}"}, {"revision", "null"}, {"target_modules", "[\"c_proj\", \"c_attn\"]"},
      {"task_type", "\"CAUSAL_LM\""}, {"use_dora", "false"}, {"use_rslora", "false"}};
  std::string text = "{";
  bool replaced = false;
  for (auto &f : fields) {
    if (f[0] == change_key) {
      f[1] = change_value;
      replaced = true;
    }
    text += (text.size() > 1 ? ", \"" : "\"") + f[0] + "\": " + f[1];
  }
  if (!replaced && !change_key.empty())
    text += ", \"" + change_key + "\": " + change_value;
  return text + "}";
}

const std::vector<std::string> kAdapted = {"attn.c_attn", "attn.c_proj", "mlp.c_proj"};

void check(const std::string &config, const std::vector<std::string> &adapted = kAdapted) {
  megart::check_adapter_config(config, "peft/adapter_config.json", kProgram, "this program's LoRA settings", adapted,
                               /*against_program=*/true);
}

} // namespace

// The modules a file adapts, from PEFT's tensor names, whatever the family's layer prefix.
TEST(PeftAdapter, AdaptedModulesAreThePathsInsideALayer) {
  EXPECT_EQ(megart::adapted_modules({"base_model.model.transformer.h.0.attn.c_attn.lora_A.weight",
                                     "base_model.model.transformer.h.0.attn.c_attn.lora_B.weight",
                                     "base_model.model.transformer.h.1.mlp.c_proj.lora_B.weight",
                                     "base_model.model.transformer.h.11.attn.c_attn.lora_A.weight"}),
            (std::vector<std::string>{"attn.c_attn", "mlp.c_proj"}));
  EXPECT_EQ(megart::adapted_modules({"base_model.model.model.layers.3.self_attn.q_proj.lora_A.weight",
                                     "base_model.model.lm_head.lora_A.weight",
                                     "base_model.model.model.norm.weight"}),
            (std::vector<std::string>{"lm_head", "self_attn.q_proj"}));
}

// PEFT's own file for the program's settings: target_modules as it was given, fields megac does
// not write, documentary ones (a base path, the Megatron defaults) all pass.
TEST(PeftAdapter, PeftsFileOfTheSameSettingsMatches) {
  EXPECT_EQ(error_of([] { check(peft_config()); }), "");
  EXPECT_EQ(error_of([] { check(peft_config("target_modules", "\".*\\\\.(c_attn|c_proj)\"")); }), "");
  EXPECT_EQ(error_of([] { check(peft_config("init_lora_weights", "\"gaussian\"")); }), "");
  EXPECT_EQ(error_of([] { check(peft_config("peft_version", "\"0.17.0\"")); }), "");
  // It only narrows the targets: the tensors say what is adapted (merge-lora reads the same list).
  EXPECT_EQ(error_of([] { check(peft_config("exclude_modules", "[\"lm_head\"]")); }), "");
}

// Each setting that changes the adapters is named with both values and the compile flag that fits.
TEST(PeftAdapter, OtherSettingsAreNamedWithTheFix) {
  expect_error([] { check(peft_config("r", "8")); },
               {"r 8 in peft/adapter_config.json, 4 in this program's LoRA settings: compile with --lora-rank 8"});
  expect_error([] { check(peft_config("lora_alpha", "16")); }, {"lora_alpha 16 in", "compile with --lora-alpha 16"});
  expect_error([] { check(peft_config("lora_dropout", "0.05")); },
               {"lora_dropout 0.05 in", ", 0 in this program", "compile with --lora-dropout 0.05"});
  expect_error([] { check(peft_config("use_rslora", "true")); }, {"use_rslora true in", "compile with --use-rslora"});
  expect_error([] { check(peft_config("target_modules", "[\"c_attn\"]"), {"attn.c_attn"}); },
               {"target_modules [\"c_attn\"] in peft/adapter_config.json (its tensors adapt attn.c_attn), "
                "[\"attn.c_attn\",\"attn.c_proj\",\"mlp.c_proj\"] in this program's LoRA settings: compile with "
                "--lora-target-modules attn.c_attn"});
  expect_error([] { check(peft_config("use_dora", "true")); }, {"use_dora true in", "megac does not implement use_dora"});
  expect_error([] { check(peft_config("bias", "\"lora_only\"")); }, {"bias \"lora_only\" in", "does not implement"});
  expect_error([] { check(peft_config("init_lora_weights", "\"olora\"")); },
               {"init_lora_weights \"olora\" in", "base weights PEFT rewrote"});
  expect_error([] { check(peft_config("lora_bias", "true")); },
               {"lora_bias true in peft/adapter_config.json is a setting megac does not implement (yet)"});
  // Targets that name none of the modules its tensors adapt: the file contradicts itself.
  expect_error([] { check(peft_config("target_modules", "[\"c_fc\"]")); },
               {"its target_modules name other modules than its tensors adapt"});
}

// A checkpoint names its base as transformers loads it: the folder when it has a config.json.
TEST(PeftAdapter, BaseModelPathIsTheLoadableFolder) {
  const fs::path dir = fs::temp_directory_path() / ("megart-peft-base-" + std::to_string(::getpid()));
  fs::create_directories(dir / "hf");
  fs::create_directories(dir / "bare");
  std::ofstream(dir / "hf" / "config.json") << "{}";
  EXPECT_EQ(megart::peft_base_model_path({(dir / "hf" / "model.safetensors").string()}), (dir / "hf").string());
  EXPECT_EQ(megart::peft_base_model_path({(dir / "bare" / "w.safetensors").string()}),
            (dir / "bare" / "w.safetensors").string());
  EXPECT_EQ(megart::peft_base_model_path({}), "");
  const std::string with_base = megart::adapter_config_with_base(kProgram, (dir / "hf").string());
  EXPECT_NE(with_base.find("\"base_model_name_or_path\": \"" + (dir / "hf").string() + "\""), std::string::npos);
  EXPECT_NE(megart::adapter_config_with_base(kProgram, "").find("\"base_model_name_or_path\": null"),
            std::string::npos);
  // The base a PEFT folder names: a local folder, else the fix.
  std::ofstream(dir / "adapter_config.json") << "{\"base_model_name_or_path\": \"" << (dir / "hf").string() << "\"}";
  EXPECT_EQ(megart::peft_named_base((dir / "adapter_config.json").string()), (dir / "hf").string());
  std::ofstream(dir / "adapter_config.json") << "{\"base_model_name_or_path\": \"meta-llama/Llama-3.2-1B\"}";
  expect_error([&] { megart::peft_named_base((dir / "adapter_config.json").string()); },
               {"base_model_name_or_path \"meta-llama/Llama-3.2-1B\" is no local file or folder",
                "--pretrained-checkpoint DIR"});
  std::ofstream(dir / "adapter_config.json") << "{\"base_model_name_or_path\": null}";
  expect_error([&] { megart::peft_named_base((dir / "adapter_config.json").string()); },
               {"base_model_name_or_path is null", "--pretrained-checkpoint BASE"});
  // A huge file is refused by its size before it is read (a sparse 64 GiB: no memory, no wait).
  fs::resize_file(dir / "adapter_config.json", std::uintmax_t(64) << 30);
  expect_error([&] { megart::peft_named_base((dir / "adapter_config.json").string()); },
               {"adapter_config.json: 68719476736 bytes; PEFT's adapter_config.json is far smaller (megac reads at "
                "most 16 MiB of it): is this the right file?"});
  fs::remove_all(dir);
}
