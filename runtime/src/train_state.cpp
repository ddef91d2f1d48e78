#include "megart/train_state.h"

#include "megart/checked_math.h"
#include "megart/error.h"
#include "megart/json.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <tuple>

namespace megart {

namespace {

// %.17g reads back as the same double; "inf"/"nan" never reach here (the flags are checked).
std::string number(double x) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", x);
  return buf;
}

// Writes `"key": value` lines of one JSON object, comma-separated, at one indent.
class ObjectWriter {
public:
  explicit ObjectWriter(std::string indent) : indent_(std::move(indent)) {}
  ObjectWriter &raw(const std::string &key, const std::string &value) {
    text_ += (text_.empty() ? "" : ",\n") + indent_ + json_quote(key) + ": " + value;
    return *this;
  }
  ObjectWriter &integer(const std::string &key, int64_t v) { return raw(key, std::to_string(v)); }
  ObjectWriter &real(const std::string &key, double v) { return raw(key, number(v)); }
  ObjectWriter &boolean(const std::string &key, bool v) { return raw(key, v ? "true" : "false"); }
  ObjectWriter &string(const std::string &key, const std::string &v) {
    return raw(key, json_quote(v));
  }
  std::string close(const std::string &outer_indent) const {
    return "{\n" + text_ + "\n" + outer_indent + "}";
  }

private:
  std::string indent_;
  std::string text_;
};

// Reads typed members of one object, naming the file and the key path in every error.
class ObjectReader {
public:
  ObjectReader(const JsonValue &object, std::string path, std::string where)
      : object_(object), path_(std::move(path)), where_(std::move(where)) {
    if (!object.is_object())
      fail(where_.empty() ? "the file" : where_, "is not an object");
  }
  const JsonValue &member(const std::string &key) const {
    const JsonValue *v = object_.get(key);
    if (!v)
      fail(name(key), "is missing");
    return *v;
  }
  int64_t integer(const std::string &key, int64_t min) const {
    const JsonValue &v = member(key);
    if (!v.is_integer())
      fail(name(key), "is " + v.brief() + ", not an integer");
    if (v.integer < min)
      fail(name(key), "is " + std::to_string(v.integer) + "; it must be >= " + std::to_string(min));
    return v.integer;
  }
  double real(const std::string &key) const {
    const JsonValue &v = member(key);
    if (v.kind != JsonValue::Kind::Number && v.kind != JsonValue::Kind::Integer)
      fail(name(key), "is " + v.brief() + ", not a number");
    return v.number;
  }
  bool boolean(const std::string &key) const {
    const JsonValue &v = member(key);
    if (v.kind != JsonValue::Kind::Bool)
      fail(name(key), "is " + v.brief() + ", not true or false");
    return v.boolean;
  }
  std::string string(const std::string &key) const {
    const JsonValue &v = member(key);
    if (!v.is_string())
      fail(name(key), "is " + v.brief() + ", not a string");
    return v.string;
  }
  bool has(const std::string &key) const { return object_.get(key) != nullptr; }
  [[noreturn]] void fail_value(const std::string &key, double value, const std::string &rule) const {
    char text[32];
    std::snprintf(text, sizeof text, "%g", value);
    fail(name(key), std::string("is ") + text + "; " + rule);
  }
  ObjectReader object(const std::string &key) const {
    return ObjectReader(member(key), path_, name(key));
  }

private:
  std::string name(const std::string &key) const { return where_.empty() ? key : where_ + "." + key; }
  [[noreturn]] void fail(const std::string &what, const std::string &why) const {
    throw Error(path_ + ": " + what + " " + why +
                "; the file is not a training state megac wrote (resume from a complete "
                "checkpoint folder, or load weights only with --finetune)");
  }

  const JsonValue &object_;
  std::string path_;
  std::string where_;
};

// The flags a state records are read back only in part (the schedule, the precision), but each
// must still be what format_train_args writes: an edited one is a damaged file, not a setting.
void check_args(const ObjectReader &args) {
  for (const char *key : {"data_path", "lr_decay_style", "lr_wsd_decay_style", "load", "save"})
    if (args.has(key))
      args.string(key);
  for (const char *key : {"shuffle", "bf16", "fp16", "grad_reduce_in_bf16"})
    if (args.has(key))
      args.boolean(key);
  const std::pair<const char *, int64_t> integers[] = {
      {"train_iters", 1},  {"micro_batch_size", 1}, {"global_batch_size", 1}, {"lr_warmup_iters", 0},
      {"lr_decay_iters", 1}, {"lr_wsd_decay_iters", 0}, {"seed", 0}, {"save_interval", 0},
      {"loss_scale_window", 1}, {"hysteresis", 1}};
  for (const auto &[key, min] : integers)
    if (args.has(key))
      args.integer(key, min);
  // Reals: finite, and at least `min` (`above`: strictly).
  const std::tuple<const char *, double, bool> reals[] = {
      {"lr", 0, true}, {"min_lr", 0, false}, {"lr_warmup_fraction", -1, false}, {"lr_warmup_init", 0, false},
      {"weight_decay", 0, false}, {"adam_beta1", 0, false}, {"adam_beta2", 0, false}, {"adam_eps", 0, true},
      {"clip_grad", 0, false}, {"loss_scale", 0, false}, {"initial_loss_scale", 0, true},
      {"min_loss_scale", 0, true}};
  for (const auto &[key, min, above] : reals) {
    if (!args.has(key))
      continue;
    const double v = args.real(key);
    if (!std::isfinite(v) || v < min || (above && v == min))
      args.fail_value(key, v, std::string("it must be a finite number ") + (above ? "above " : "at least ") +
                                  std::to_string(min).substr(0, std::to_string(min).find('.')));
  }
}

constexpr const char *kFormat = "megac-train-state";
constexpr int64_t kVersion = 1;

} // namespace

std::string format_train_state(const TrainState &s) {
  ObjectWriter data("    ");
  data.integer("seed", static_cast<int64_t>(s.seed))
      .boolean("shuffle", s.shuffle)
      .integer("num_samples", s.data_num_samples);
  ObjectWriter top("  ");
  top.string("format", kFormat)
      .integer("version", kVersion)
      .integer("iteration", s.iteration)
      .integer("consumed_samples", s.consumed_samples)
      .integer("optimizer_steps", s.optimizer_steps)
      .integer("skipped_iterations", s.skipped_iterations)
      .raw("data", data.close("  "));
  if (s.loss_scaler) {
    ObjectWriter scaler("    ");
    scaler.real("scale", s.loss_scaler->scale)
        .integer("growth_tracker", s.loss_scaler->growth_tracker)
        .integer("hysteresis_tracker", s.loss_scaler->hysteresis_tracker);
    top.raw("loss_scaler", scaler.close("  "));
  } else {
    top.raw("loss_scaler", "null");
  }
  if (!s.base_weights.empty()) {
    std::string files;
    for (const std::string &f : s.base_weights)
      files += (files.empty() ? "[" : ", ") + json_quote(f);
    top.raw("base_weights", files + "]");
  }
  if (!s.base_weights_checksums.empty()) {
    std::string sums;
    for (const std::string &c : s.base_weights_checksums)
      sums += (sums.empty() ? "[" : ", ") + json_quote(c);
    top.raw("base_weights_checksums", sums + "]");
  }
  if (!s.adapter_config_json.empty())
    top.string("adapter_config", s.adapter_config_json);
  top.string("program", s.program_summary)
      .raw("plan", s.plan_json)
      .string("spec", s.spec_yaml)
      .raw("args", s.args_json);
  return top.close("") + "\n";
}

TrainState parse_train_state(const std::string &text, const std::string &path) {
  const JsonValue root = parse_json(text, path);
  const ObjectReader top(root, path, "");
  if (top.string("format") != kFormat)
    throw Error(path + ": format is \"" + top.string("format") + "\", not \"" + kFormat + "\"");
  const int64_t version = top.integer("version", 1);
  if (version != kVersion)
    throw Error(path + ": version " + std::to_string(version) + " is newer than this program reads (" +
                std::to_string(kVersion) + "); train with the megac that wrote it");
  TrainState s;
  s.iteration = top.integer("iteration", 0);
  s.consumed_samples = top.integer("consumed_samples", 0);
  s.optimizer_steps = top.integer("optimizer_steps", 0);
  s.skipped_iterations = top.integer("skipped_iterations", 0);
  // Fewer updates than iterations when some were skipped, or when a run resumed with
  // --no-load-optim restarted the count; never more.
  const std::optional<int64_t> counted = checked_add(s.optimizer_steps, s.skipped_iterations);
  if (!counted || *counted > s.iteration)
    throw Error(path + ": optimizer_steps (" + std::to_string(s.optimizer_steps) +
                ") + skipped_iterations (" + std::to_string(s.skipped_iterations) +
                ") is more than iteration (" + std::to_string(s.iteration) + "); the file is damaged");
  const ObjectReader data = top.object("data");
  s.seed = static_cast<uint64_t>(data.integer("seed", 0));
  s.shuffle = data.boolean("shuffle");
  s.data_num_samples = data.integer("num_samples", 0);
  if (top.member("loss_scaler").kind != JsonValue::Kind::Null) {
    const ObjectReader scaler = top.object("loss_scaler");
    LossScalerState ls;
    ls.scale = scaler.real("scale");
    ls.growth_tracker = scaler.integer("growth_tracker", 0);
    ls.hysteresis_tracker = scaler.integer("hysteresis_tracker", INT64_MIN);
    s.loss_scaler = ls;
  }
  if (top.has("base_weights")) {
    const JsonValue &files = top.member("base_weights");
    if (files.kind != JsonValue::Kind::Array || files.array.empty())
      throw Error(path + ": base_weights must be a non-empty list of the base model's weight files");
    for (const JsonValue &f : files.array) {
      if (f.kind != JsonValue::Kind::String || f.string.empty())
        throw Error(path + ": base_weights holds " + f.brief() + "; it must list file paths");
      s.base_weights.push_back(f.string);
    }
  }
  if (top.has("base_weights_checksums")) {
    const JsonValue &sums = top.member("base_weights_checksums");
    if (sums.kind != JsonValue::Kind::Array || sums.array.size() != s.base_weights.size())
      throw Error(path + ": base_weights_checksums must list one checksum per base_weights file");
    for (const JsonValue &c : sums.array) {
      if (c.kind != JsonValue::Kind::String || c.string.empty())
        throw Error(path + ": base_weights_checksums holds " + c.brief() + "; it must list checksums");
      s.base_weights_checksums.push_back(c.string);
    }
  }
  if (top.has("adapter_config"))
    s.adapter_config_json = top.string("adapter_config");
  s.program_summary = top.string("program");
  // The plan: any plan may resume any other's checkpoint, but what it says must be a plan.
  const ObjectReader plan = top.object("plan");
  for (const char *size : {"tensor_model_parallel_size", "pipeline_model_parallel_size", "data_parallel_size",
                           "expert_model_parallel_size", "virtual_pipeline_model_parallel_size", "micro_batch_size"})
    if (plan.has(size))
      plan.integer(size, 1);
  if (plan.has("qlora_block_size"))
    s.qlora_block_size = plan.integer("qlora_block_size", 1);
  if (top.has("spec"))
    s.spec_yaml = top.string("spec");
  const ObjectReader args = top.object("args");
  check_args(args);
  s.schedule.lr = args.real("lr");
  s.schedule.min_lr = args.real("min_lr");
  s.schedule.lr_decay_style = args.string("lr_decay_style");
  s.schedule.lr_warmup_iters = args.integer("lr_warmup_iters", 0);
  s.schedule.lr_decay_iters = args.integer("lr_decay_iters", 1);
  s.schedule.weight_decay = args.real("weight_decay");
  // Written since the WSD schedule and the warmup fraction (a state without them had neither).
  // An fp16 run saves its loss scaler's state with every checkpoint; no other run has one.
  if (args.has("fp16") && args.boolean("fp16") != s.loss_scaler.has_value())
    throw Error(path + ": " +
                (s.loss_scaler ? std::string("holds a loss scaler's state, but its run was not fp16 (args: fp16 false)")
                               : std::string("holds no loss scaler's state, but its run was fp16 (args: fp16 true)")) +
                "; the file is damaged");
  if (args.has("lr_warmup_fraction")) {
    s.schedule.lr_warmup_fraction = args.real("lr_warmup_fraction");
    s.schedule.lr_warmup_init = args.real("lr_warmup_init");
    s.schedule.lr_wsd_decay_style = args.string("lr_wsd_decay_style");
    s.schedule.lr_wsd_decay_iters = args.integer("lr_wsd_decay_iters", 0);
  }
  return s;
}

std::string format_train_args(const TrainFlags &f) {
  ObjectWriter w("    ");
  std::string data_path; // as given: a prefix, or a blend's weights and prefixes
  for (const std::string &v : f.data_path.empty() ? f.train_data_path : f.data_path)
    data_path += (data_path.empty() ? "" : " ") + v;
  w.string("data_path", data_path)
      .integer("train_iters", f.train_iters)
      .integer("micro_batch_size", f.micro_batch_size)
      .integer("global_batch_size", f.global_batch_size)
      .real("lr", f.lr)
      .real("min_lr", f.min_lr)
      .string("lr_decay_style", f.lr_decay_style)
      .integer("lr_warmup_iters", f.lr_warmup_iters)
      .integer("lr_decay_iters", f.lr_decay_iters)
      .real("lr_warmup_fraction", f.lr_warmup_fraction)
      .real("lr_warmup_init", f.lr_warmup_init)
      .string("lr_wsd_decay_style", f.lr_wsd_decay_style)
      .integer("lr_wsd_decay_iters", f.lr_wsd_decay_iters)
      .real("weight_decay", f.weight_decay)
      .real("adam_beta1", f.adam_beta1)
      .real("adam_beta2", f.adam_beta2)
      .real("adam_eps", f.adam_eps)
      .real("clip_grad", f.clip_grad)
      .integer("seed", f.seed)
      .boolean("shuffle", f.shuffle)
      .string("load", f.load)
      .string("save", f.save)
      .integer("save_interval", f.save_interval)
      .boolean("bf16", f.bf16)
      .boolean("fp16", f.fp16)
      .real("loss_scale", f.loss_scale)
      .real("initial_loss_scale", f.initial_loss_scale)
      .real("min_loss_scale", f.min_loss_scale)
      .integer("loss_scale_window", f.loss_scale_window)
      .integer("hysteresis", f.hysteresis)
      .boolean("grad_reduce_in_bf16", f.grad_reduce_in_bf16);
  return w.close("  ");
}

int64_t program_qlora_block_size(const ProgramDesc &p) {
  auto largest = [](const ParamDesc *params, int64_t n) {
    int64_t block = 0;
    for (int64_t i = 0; params && i < n; ++i)
      block = std::max<int64_t>(block, params[i].nf4_block);
    return block;
  };
  int64_t block = 0;
  for (int64_t s = 0; p.stages && s < p.pipeline_parallel_size; ++s)
    block = std::max(block, largest(p.stages[s].frozen_params, p.stages[s].num_frozen_params));
  return block;
}

std::string format_program_plan(const ProgramDesc &p) {
  ObjectWriter w("    ");
  w.integer("tensor_model_parallel_size", p.tensor_parallel_size)
      .integer("pipeline_model_parallel_size", p.pipeline_parallel_size)
      .integer("data_parallel_size", p.data_parallel_size)
      .integer("expert_model_parallel_size", p.expert_parallel_size)
      .integer("virtual_pipeline_model_parallel_size", p.virtual_pipeline_size)
      .string("pipeline_schedule", p.pipeline_schedule ? p.pipeline_schedule : "")
      .integer("micro_batch_size", p.micro_batch_size)
      .boolean("overlap_grad_reduce", p.overlap_grad_reduce);
  if (const int64_t block = program_qlora_block_size(p))
    w.integer("qlora_block_size", block);
  return w.close("  ");
}

} // namespace megart
