#include "megart/checkpoint_match.h"

#include "megart/error.h"
#include "megart/file_checks.h"
#include "megart/json.h"
#include "megart/number_text.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>
#include <vector>

namespace megart {

namespace {

bool same(const JsonValue &a, const JsonValue &b);

bool same_object(const JsonValue &a, const JsonValue &b) {
  if (a.object.size() != b.object.size())
    return false;
  for (const auto &[key, value] : a.object) {
    const JsonValue *other = b.get(key);
    if (!other || !same(value, *other))
      return false;
  }
  return true;
}

// JSON equality with numbers compared as numbers (10000 = 10000.0, 1e-05 = 0.00001).
bool same(const JsonValue &a, const JsonValue &b) {
  using K = JsonValue::Kind;
  const bool a_number = a.kind == K::Integer || a.kind == K::Number, b_number = b.kind == K::Integer || b.kind == K::Number;
  if (a_number || b_number)
    return a_number && b_number && a.number == b.number;
  if (a.kind != b.kind)
    return false;
  switch (a.kind) {
  case K::Null: return true;
  case K::Bool: return a.boolean == b.boolean;
  case K::String: return a.string == b.string;
  case K::Array:
    return a.array.size() == b.array.size() && std::equal(a.array.begin(), a.array.end(), b.array.begin(), same);
  case K::Object: return same_object(a, b);
  default: return false;
  }
}

// A value that says "not used": null, false, 0, "", [] or {}.
bool neutral(const JsonValue &v) {
  using K = JsonValue::Kind;
  return v.kind == K::Null || (v.kind == K::Bool && !v.boolean) ||
         ((v.kind == K::Integer || v.kind == K::Number) && v.number == 0) || (v.kind == K::String && v.string.empty()) ||
         (v.kind == K::Array && v.array.empty()) || (v.kind == K::Object && v.object.empty());
}

// A value as a message shows it: numbers in their shortest exact form (1e-05, not
// 1.0000000000000001e-05), anything else as JsonValue::brief does.
std::string show(const JsonValue &v) {
  if (v.kind != JsonValue::Kind::Number)
    return v.brief();
  return shortest_exact_text(v.number);
}

JsonValue parse_object(const std::string &text, const std::string &what) {
  JsonValue v = parse_json(text, what);
  if (!v.is_object())
    throw Error(what + ": holds " + v.brief() + ", not a JSON object");
  return v;
}

// Fields of a Hugging Face config that do not change what the model computes from its weights.
const std::set<std::string> &documentary_fields() {
  static const std::set<std::string> fields = {
      "transformers_version", "torch_dtype", "dtype", "_name_or_path", "name_or_path", "_commit_hash",
      "_attn_implementation", "_attn_implementation_autoset", "use_cache", "bos_token_id", "eos_token_id",
      "pad_token_id", "sep_token_id", "decoder_start_token_id", "initializer_range", "output_attentions",
      "output_hidden_states", "return_dict", "use_return_dict", "tokenizer_class", "task_specific_params",
      "id2label", "label2id", "problem_type", "finetuning_task", "prefix", "model_name", "pretraining_tp",
      "reorder_and_upcast_attn", "gradient_checkpointing", "max_length", "min_length", "do_sample",
      "early_stopping", "num_beams", "temperature", "top_k", "top_p", "repetition_penalty", "length_penalty",
      "no_repeat_ngram_size", "bad_words_ids", "num_return_sequences", "chunk_size_feed_forward",
      "summary_activation", "summary_first_dropout", "summary_proj_to_labels", "summary_type", "summary_use_proj",
      "torchscript", "tie_encoder_decoder", "is_encoder_decoder", "is_decoder", "add_cross_attention",
      "cross_attention_hidden_size", "pruned_heads"};
  return fields;
}

// Dropout rates: a training choice of the run, not part of the trained model.
bool dropout_field(const std::string &key) {
  return key.find("dropout") != std::string::npos || key.find("pdrop") != std::string::npos;
}

// Whether field `key` (its `value` in the file, null when the file leaves it out) says nothing about
// what this model type computes, as transformers 4.40 reads it: Qwen2's window sizes while its
// sliding window is off; Gemma's hidden_act (never read) and a hidden_activation of the tanh GELU
// megac computes (null reads as gelu_pytorch_tanh).
bool says_nothing(const std::string &model_type, const JsonValue &file, const std::string &key,
                  const JsonValue *value) {
  if ((model_type == "qwen2" || model_type == "qwen2_moe") && (key == "sliding_window" || key == "max_window_layers")) {
    const JsonValue *on = file.get("use_sliding_window");
    return !on || (on->kind == JsonValue::Kind::Bool && !on->boolean);
  }
  if (model_type == "gemma" && key == "hidden_act")
    return true;
  // transformers adds the load-balancing loss to the training loss only with output_router_logits.
  if ((model_type == "mixtral" || model_type == "qwen2_moe") && key == "router_aux_loss_coef") {
    const JsonValue *on = file.get("output_router_logits");
    return !on || (on->kind == JsonValue::Kind::Bool && !on->boolean);
  }
  if (model_type == "gemma" && key == "hidden_activation")
    return !value || value->kind == JsonValue::Kind::Null ||
           (value->is_string() && (value->string == "gelu_pytorch_tanh" || value->string == "gelu_new"));
  return false;
}

// transformers' defaults for fields a folder's config.json may leave out, per model type.
const JsonValue *hf_default(const std::string &model_type, const std::string &key) {
  static const std::map<std::string, std::map<std::string, std::string>> defaults = {
      {"llama",
       {{"attention_bias", "false"}, {"tie_word_embeddings", "false"}, {"rope_theta", "10000"},
        {"rms_norm_eps", "1e-06"}, {"hidden_act", "\"silu\""}, {"mlp_bias", "false"}, {"rope_scaling", "null"}}},
      {"qwen2",
       {{"tie_word_embeddings", "false"}, {"rope_theta", "10000"}, {"rms_norm_eps", "1e-06"},
        {"hidden_act", "\"silu\""}, {"use_sliding_window", "false"}, {"sliding_window", "4096"},
        {"max_window_layers", "28"}}},
      {"mistral",
       {{"tie_word_embeddings", "false"}, {"rope_theta", "10000"}, {"rms_norm_eps", "1e-06"},
        {"hidden_act", "\"silu\""}, {"sliding_window", "4096"}}},
      {"mixtral",
       {{"tie_word_embeddings", "false"}, {"rope_theta", "1000000.0"}, {"rms_norm_eps", "1e-05"},
        {"hidden_act", "\"silu\""}, {"sliding_window", "null"}, {"num_local_experts", "8"},
        {"num_experts_per_tok", "2"}, {"output_router_logits", "false"}, {"router_aux_loss_coef", "0.001"},
        {"router_jitter_noise", "0.0"}, {"max_position_embeddings", "131072"}, {"num_key_value_heads", "8"}}},
      {"qwen2_moe",
       {{"tie_word_embeddings", "false"}, {"rope_theta", "10000"}, {"rms_norm_eps", "1e-06"},
        {"hidden_act", "\"silu\""}, {"use_sliding_window", "false"}, {"sliding_window", "4096"},
        {"max_window_layers", "28"}, {"decoder_sparse_step", "1"}, {"moe_intermediate_size", "1408"},
        {"shared_expert_intermediate_size", "5632"}, {"num_experts_per_tok", "4"}, {"num_experts", "60"},
        {"norm_topk_prob", "false"}, {"output_router_logits", "false"}, {"router_aux_loss_coef", "0.001"},
        {"max_position_embeddings", "32768"}}},
      {"gemma",
       {{"tie_word_embeddings", "true"}, {"rope_theta", "10000"}, {"rms_norm_eps", "1e-06"}, {"head_dim", "256"},
        {"attention_bias", "false"}, {"hidden_activation", "null"}}},
      {"bert",
       {{"tie_word_embeddings", "true"}, {"hidden_act", "\"gelu\""}, {"layer_norm_eps", "1e-12"},
        {"type_vocab_size", "2"}, {"position_embedding_type", "\"absolute\""}}},
      {"megatron-bert",
       {{"tie_word_embeddings", "true"}, {"hidden_act", "\"gelu\""}, {"layer_norm_eps", "1e-12"},
        {"type_vocab_size", "2"}, {"position_embedding_type", "\"absolute\""}}},
      {"gpt2",
       {{"activation_function", "\"gelu_new\""}, {"layer_norm_epsilon", "1e-05"}, {"tie_word_embeddings", "true"},
        {"scale_attn_weights", "true"}}},
  };
  static std::map<std::string, JsonValue> parsed;
  const auto family = defaults.find(model_type);
  if (family == defaults.end())
    return nullptr;
  const auto found = family->second.find(key);
  if (found == family->second.end())
    return nullptr;
  auto [it, added] = parsed.emplace(model_type + "." + key, JsonValue());
  if (added)
    it->second = parse_json(found->second, "default");
  return &it->second;
}

// The spec key a config field comes from, for the fix.
std::string spec_key(const std::string &field) {
  static const std::map<std::string, std::string> keys = {
      {"rms_norm_eps", "norm_epsilon"}, {"layer_norm_epsilon", "norm_epsilon"}, {"rope_theta", "rotary_base"},
      {"num_attention_heads", "num_attention_heads"}, {"n_head", "num_attention_heads"},
      {"num_key_value_heads", "num_query_groups"}, {"hidden_act", "activation"},
      {"activation_function", "activation"}, {"tie_word_embeddings", "tie_embeddings"},
      {"intermediate_size", "ffn_hidden_size"}, {"n_inner", "ffn_hidden_size"}, {"num_hidden_layers", "num_layers"},
      {"n_layer", "num_layers"}, {"hidden_size", "hidden_size"}, {"n_embd", "hidden_size"},
      {"vocab_size", "vocab_size"}, {"max_position_embeddings", "seq_length"}, {"n_positions", "seq_length"},
      {"attention_bias", "add_bias_linear"}, {"model_type", "family"}, {"architectures", "family"},
      {"sliding_window", "sliding_window"}, {"use_sliding_window", "sliding_window"},
      {"num_local_experts", "num_experts"}, {"num_experts", "num_experts"}, {"num_experts_per_tok", "moe_router_topk"},
      {"moe_intermediate_size", "moe_ffn_hidden_size"}, {"router_aux_loss_coef", "moe_aux_loss_coeff"},
      {"shared_expert_intermediate_size", "moe_shared_expert_intermediate_size"},
      {"norm_topk_prob", "moe_router_pre_softmax"},
      {"output_router_logits", "moe_aux_loss_coeff"}};
  const auto found = keys.find(field);
  return found == keys.end() ? std::string() : found->second;
}

std::string field_line(const std::string &key, const std::string &there, const std::string &here) {
  const std::string from = spec_key(key);
  return key + " " + there + " in the file, " + here + " in this program" +
         (from.empty() ? std::string() : " (the spec's " + from + ")");
}

// Flat YAML "key: value" lines, comments and quotes stripped.
std::map<std::string, std::string> spec_fields(const std::string &text) {
  std::map<std::string, std::string> fields;
  std::string line;
  std::istringstream in(text);
  auto trim = [](std::string s) {
    const size_t b = s.find_first_not_of(" \t\r"), e = s.find_last_not_of(" \t\r");
    return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
  };
  while (std::getline(in, line)) {
    // A comment starts at '#' at the line's start or after a space (YAML).
    for (size_t i = 0; i < line.size(); ++i)
      if (line[i] == '#' && (i == 0 || line[i - 1] == ' ' || line[i - 1] == '\t')) {
        line.resize(i);
        break;
      }
    line = trim(line);
    const size_t colon = line.find(':');
    if (line.empty() || colon == std::string::npos)
      continue;
    std::string value = trim(line.substr(colon + 1));
    if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') && value.back() == value.front())
      value = value.substr(1, value.size() - 2);
    fields[trim(line.substr(0, colon))] = value;
  }
  return fields;
}

bool same_value(const std::string &a, const std::string &b) {
  if (a == b)
    return true;
  char *ea = nullptr, *eb = nullptr;
  const double x = std::strtod(a.c_str(), &ea), y = std::strtod(b.c_str(), &eb);
  return !a.empty() && !b.empty() && *ea == '\0' && *eb == '\0' && x == y;
}

std::string join(const std::vector<std::string> &lines) {
  std::string out;
  for (const std::string &l : lines)
    out += "\n  " + l;
  return out;
}

} // namespace

void check_hf_config(const std::string &config_path, const std::string &program_config, const std::string &what,
                     const std::string &fix) {
  const JsonValue file =
      parse_object(read_small_file(config_path, "a model's config", "a model's config is a JSON file"), config_path);
  const JsonValue program = parse_object(program_config, "the program's config");
  const JsonValue *type = program.get("model_type");
  const std::string model_type = type && type->is_string() ? type->string : "";
  std::vector<std::string> differ, unknown;
  for (const auto &[key, value] : file.object) {
    if (dropout_field(key)) { // not compared (a training choice), but it must be a rate
      const bool rate = (value.kind == JsonValue::Kind::Integer || value.kind == JsonValue::Kind::Number) &&
                        value.number >= 0 && value.number < 1;
      if (!rate && value.kind != JsonValue::Kind::Null)
        differ.push_back(key + " " + show(value) + " in the file is not a dropout rate (a number in [0, 1))");
      continue;
    }
    if (documentary_fields().count(key) || says_nothing(model_type, file, key, &value))
      continue;
    const JsonValue *ours = program.get(key);
    // Qwen2 windows the layers below max_window_layers: at least this program's layers is every layer.
    if (ours && key == "max_window_layers" && (model_type == "qwen2" || model_type == "qwen2_moe") &&
        value.kind == JsonValue::Kind::Integer &&
        ours->kind == JsonValue::Kind::Integer && value.number >= ours->number)
      continue;
    if (ours) {
      // Rotary positions have no table: a model made for more positions runs on fewer.
      if (key == "max_position_embeddings" && model_type != "gpt2" &&
          (value.kind == JsonValue::Kind::Integer || value.kind == JsonValue::Kind::Number) &&
          value.number >= ours->number)
        continue;
      // GPT2Config's n_inner null (what it saves by default) is transformers' 4 x n_embd.
      const JsonValue *embd = file.get("n_embd");
      if (key == "n_inner" && model_type == "gpt2" && value.kind == JsonValue::Kind::Null && embd &&
          embd->kind == JsonValue::Kind::Integer && ours->number == 4 * embd->number)
        continue;
      if (!same(value, *ours))
        differ.push_back(field_line(key, show(value), show(*ours)));
      continue;
    }
    // Fields this program's config leaves out: what they say must be what megac computes.
    if (key == "n_ctx" && program.get("n_positions") && same(value, *program.get("n_positions")))
      continue;
    if (key == "head_dim" && program.get("hidden_size") && program.get("num_attention_heads") &&
        value.number * program.get("num_attention_heads")->number == program.get("hidden_size")->number)
      continue;
    if (!neutral(value))
      unknown.push_back(key + " " + show(value));
  }
  for (const auto &[key, ours] : program.object) {
    if (file.get(key) || documentary_fields().count(key) || dropout_field(key) ||
        says_nothing(model_type, file, key, nullptr))
      continue;
    const JsonValue *fallback = hf_default(model_type, key);
    if (fallback && key == "max_window_layers" && fallback->number >= ours.number)
      continue;
    if (!fallback)
      differ.push_back(key + " missing from the file, " + show(ours) + " in this program");
    else if (!same(*fallback, ours))
      differ.push_back(field_line(key, show(*fallback) + " (transformers' default: the file leaves it out)",
                                  show(ours)));
  }
  if (differ.empty() && unknown.empty())
    return;
  std::string message = what + ": " + config_path + " describes another model than this program:";
  if (!differ.empty())
    message += join(differ);
  if (!unknown.empty())
    message += join(unknown) + (unknown.size() == 1 ? " is a setting" : " are settings") +
               " megac does not implement (yet), so it cannot compute this model";
  throw Error(message + "\n" +
              (fix.empty() ? "Compile a spec that matches the file (the fields above name the spec's keys), or load "
                             "a checkpoint of this model"
                           : fix));
}

void check_spec(const std::string &checkpoint_spec, const std::string &program_spec, const std::string &what) {
  const std::map<std::string, std::string> saved = spec_fields(checkpoint_spec), ours = spec_fields(program_spec);
  std::vector<std::string> differ;
  for (const auto &[key, value] : saved) {
    const auto found = ours.find(key);
    if (found == ours.end())
      differ.push_back(key + ": " + value + " in the checkpoint, not set in this program's spec");
    else if (!same_value(value, found->second))
      differ.push_back(key + ": " + value + " in the checkpoint, " + found->second + " in this program's spec");
  }
  for (const auto &[key, value] : ours)
    if (!saved.count(key))
      differ.push_back(key + ": not set in the checkpoint's spec, " + value + " in this program's");
  if (differ.empty())
    return;
  throw Error(what + ": the checkpoint was trained from another spec than this program's:" + join(differ) +
              "\nA resumed run continues the same model: compile the spec the checkpoint records (train_state.json's "
              "\"spec\"), or start a new run from its weights with --finetune");
}

namespace {

bool suffix_match(const std::string &module, const std::string &target) {
  return module == target || (module.size() > target.size() &&
                              module.compare(module.size() - target.size() - 1, std::string::npos, "." + target) == 0);
}

std::set<std::string> string_set(const JsonValue &list) {
  std::set<std::string> out;
  for (const JsonValue &v : list.array)
    out.insert(v.is_string() ? v.string : v.brief());
  return out;
}

// target_modules of the file against the program's (paths inside a layer). PEFT saves what it
// was given (["c_attn"], a regular expression, all-linear's names), so beyond equal lists the
// file's tensors decide: they must adapt the program's modules, and each target of a list must
// name some of them (a target naming none says the file and its tensors disagree).
bool same_targets(const JsonValue &file, const JsonValue &want, const std::vector<std::string> &adapted) {
  if (file.is_array() && want.is_array() && string_set(file) == string_set(want))
    return true;
  if (adapted.empty() || !want.is_array() || string_set(want) != std::set<std::string>(adapted.begin(), adapted.end()))
    return false;
  if (file.is_string())
    return true;
  if (!file.is_array())
    return false;
  const std::set<std::string> targets = string_set(file);
  auto matched = [&](const std::string &module) {
    return std::any_of(targets.begin(), targets.end(), [&](const std::string &t) { return suffix_match(module, t); });
  };
  auto names_some = [&](const std::string &target) {
    return std::any_of(adapted.begin(), adapted.end(), [&](const std::string &m) { return suffix_match(m, target); });
  };
  return std::all_of(adapted.begin(), adapted.end(), matched) && std::all_of(targets.begin(), targets.end(), names_some);
}

std::string joined(const std::vector<std::string> &items, const char *separator) {
  std::string out;
  for (const std::string &i : items)
    out += (out.empty() ? "" : separator) + i;
  return out;
}

// How a program is compiled for the file's value of a LoRA setting, or why none can be.
std::string lora_fix(const std::string &key, const JsonValue &value, const std::vector<std::string> &adapted) {
  if (key == "r")
    return "compile with --lora-rank " + show(value);
  if (key == "lora_alpha")
    return "compile with --lora-alpha " + show(value);
  if (key == "lora_dropout")
    return "compile with --lora-dropout " + show(value);
  if (key == "use_rslora")
    return value.boolean ? "compile with --use-rslora" : "compile without --use-rslora";
  if (key == "target_modules") {
    if (!adapted.empty())
      return "compile with --lora-target-modules " + joined(adapted, ",");
    std::vector<std::string> names;
    for (const JsonValue &v : value.array)
      names.push_back(v.is_string() ? v.string : v.brief());
    return value.is_array() ? "compile with --lora-target-modules " + joined(names, ",")
                            : "compile with --lora-target-modules naming the modules it adapts";
  }
  if (key == "peft_type")
    return "megac trains LoRA adapters only (peft_type \"LORA\")";
  if (key == "fan_in_fan_out")
    return "the model family fixes it (GPT-2's Conv1D stores its weights [in, out]): the adapters are of another "
           "architecture";
  return "megac does not implement " + key + " " + show(value) + " (yet)";
}

// init_lora_weights: how new adapters start, which the loaded tensors replace; but PiSSA, OLoRA,
// LoftQ and CorDA also rewrite the base weights, so their adapters need that residual base.
bool plain_initialisation(const JsonValue &v) {
  return v.kind == JsonValue::Kind::Bool || (v.is_string() && (v.string == "gaussian" || v.string == "eva"));
}

} // namespace

const std::set<std::string> &documentary_adapter_fields() {
  static const std::set<std::string> fields = {
      "base_model_name_or_path", "revision",        "task_type",       "inference_mode", "auto_mapping",
      "peft_version",            "layers_pattern",  "megatron_config", "megatron_core",  "runtime_config",
      "qalora_group_size",       "exclude_modules", "init_lora_weights"};
  return fields;
}

void check_adapter_config(const std::string &adapter_config, const std::string &path, const std::string &expected,
                          const std::string &expected_what, const std::vector<std::string> &adapted,
                          bool against_program) {
  const JsonValue file = parse_object(adapter_config, path);
  const JsonValue want = parse_object(expected, expected_what);
  // What PEFT's LoraConfig holds that changes the adapters' mathematics.
  static const char *const kFields[] = {"peft_type",       "r",           "lora_alpha",  "lora_dropout",
                                        "target_modules",  "use_rslora",  "use_dora",    "bias",
                                        "fan_in_fan_out",  "rank_pattern", "alpha_pattern", "layers_to_transform",
                                        "modules_to_save", "layer_replication"};
  std::vector<std::string> differ;
  std::set<std::string> compared;
  for (const char *key : kFields) {
    compared.insert(key);
    const JsonValue *a = file.get(key), *b = want.get(key);
    if (!a && !b)
      continue;
    JsonValue null;
    const JsonValue &x = a ? *a : null, &y = b ? *b : null;
    const bool equal = std::string(key) == "target_modules" ? same_targets(x, y, adapted)
                                                            : same(x, y) || (neutral(x) && neutral(y));
    if (equal)
      continue;
    std::string line = std::string(key) + " " + show(x) + " in " + path;
    if (std::string(key) == "target_modules" && !adapted.empty())
      line += " (its tensors adapt " + joined(adapted, ", ") + ")";
    line += ", " + show(y) + " in " + expected_what;
    // Tensors that adapt what the program adapts, under targets that name other modules.
    const bool self_contradicting = std::string(key) == "target_modules" && !adapted.empty() && y.is_array() &&
                                    string_set(y) == std::set<std::string>(adapted.begin(), adapted.end());
    if (self_contradicting)
      line += ": its target_modules name other modules than its tensors adapt; the folder is damaged (save the "
              "adapters again with PEFT's save_pretrained)";
    else if (against_program)
      line += ": " + lora_fix(key, x, adapted);
    differ.push_back(line);
  }
  for (const auto &[key, value] : file.object) {
    if (compared.count(key) || neutral(value))
      continue;
    if (key == "init_lora_weights" && !plain_initialisation(value))
      differ.push_back("init_lora_weights " + show(value) + " in " + path + ": adapters initialised so belong with "
                       "the base weights PEFT rewrote for them, which megac does not implement (yet); convert them "
                       "to plain LoRA with PEFT (save_pretrained's path_initial_model_for_weight_conversion)");
    else if (!documentary_adapter_fields().count(key))
      differ.push_back(key + " " + show(value) + " in " + path + " is a setting megac does not implement (yet), so "
                       "it cannot compute these adapters");
  }
  if (differ.empty())
    return;
  throw Error(path + " does not match " + expected_what + ":" + join(differ) +
              (against_program ? "\nCompile the program with the adapters' settings (as above), or load adapters "
                                 "made for this program"
                               : "\nThe adapters were trained with the settings of " + expected_what +
                                     ": compile the program with them (--lora-rank, --lora-alpha, --lora-dropout, "
                                     "--lora-target-modules, --use-rslora), or use an adapter folder made for this "
                                     "program"));
}

} // namespace megart
