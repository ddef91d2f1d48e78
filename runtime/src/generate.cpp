#include "megart/generate.h"

#include "megart/device.h"
#include "megart/error.h"
#include "megart/param_store.h"
#include "megart/safetensors.h"
#include "megart/splitmix.h"
#include "megart/train_checkpoint.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <sstream>
#include <string>

namespace megart {

namespace {

// A SplitMix64 stream: the same draws on every machine for a seed.
struct Generator {
  uint64_t state;
  double uniform() { return static_cast<double>(splitmix64_mix(state += kSplitmixGamma) >> 11) * 0x1.0p-53; }
};

std::vector<int32_t> parse_ids(const std::string &text, int64_t vocab_size) {
  std::vector<int32_t> ids;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    char *end = nullptr;
    const long long id = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || id < 0 || id >= vocab_size)
      throw Error("--prompt-ids: " + item + " is not a token id of this model (0 to " + std::to_string(vocab_size - 1) +
                  ")");
    ids.push_back(static_cast<int32_t>(id));
  }
  if (ids.empty())
    throw Error("--prompt-ids: give at least one token id, e.g. --prompt-ids 84,104,101");
  return ids;
}

} // namespace

int32_t next_token(const float *logits, int64_t vocab_size, const SamplingOptions &o, double uniform) {
  if (o.top_k == 1 || o.temperature == 0) // greedy: the first of the largest, as torch.argmax
    return static_cast<int32_t>(std::max_element(logits, logits + vocab_size) - logits);
  std::vector<int32_t> order(static_cast<size_t>(vocab_size));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  if (o.top_k > 0 && o.top_k < vocab_size)
    order.resize(static_cast<size_t>(o.top_k));
  std::vector<double> p(order.size());
  double total = 0;
  for (size_t i = 0; i < order.size(); ++i)
    total += p[i] = std::exp((static_cast<double>(logits[order[i]]) - logits[order[0]]) / o.temperature);
  size_t keep = order.size();
  if (o.top_p < 1) { // the smallest prefix whose probability reaches top p
    double mass = 0;
    for (keep = 0; keep < order.size() && mass < o.top_p * total; ++keep)
      mass += p[keep];
  }
  double kept = std::accumulate(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(keep), 0.0);
  double target = uniform * kept;
  for (size_t i = 0; i + 1 < keep; ++i) {
    if (target < p[i])
      return order[i];
    target -= p[i];
  }
  return order[keep - 1];
}

int generate_main(int argc, const char *const *argv, const ProgramDesc &program, std::ostream &out,
                  std::ostream &err) {
  CLI::App app{"Generates tokens from a checkpoint with the compiled forward (one rank, fp32)"};
  std::string load, prompt;
  int64_t max_new = 0, seed = 1234; // max_new 0: 32, or what seq_length leaves
  std::vector<int64_t> eod;         // ids that end the text (Llama 3's config names several)
  SamplingOptions sampling;
  app.add_option("--load", load, "Checkpoint folder (its latest iteration), an iteration folder or a Hugging Face folder")
      ->required();
  app.add_option("--prompt-ids", prompt, "The prompt's token ids, comma-separated")->required();
  app.add_option("--max-new-tokens", max_new,
                 "Tokens to generate (default: 32, or as many as seq_length leaves after the prompt)")
      ->check(CLI::PositiveNumber);
  app.add_option("--temperature", sampling.temperature, "Logits / temperature; 0: greedy")
      ->check(CLI::Validator(
          [](const std::string &v) { // CLI::Range lets NaN through
            const double t = std::strtod(v.c_str(), nullptr);
            return t >= 0 && t <= 1e6 ? std::string() : "must be a finite number in [0, 1e6] (0: greedy)";
          },
          "[0, 1e6]"))
      ->capture_default_str();
  app.add_option("--top-k", sampling.top_k, "Draw among the k likeliest (0: all; 1: greedy)")
      ->check(CLI::Range(int64_t(0), int64_t(1) << 40))
      ->capture_default_str();
  app.add_option("--top-p", sampling.top_p, "Draw among the likeliest whose probability reaches p")
      ->check(CLI::Validator(
          [](const std::string &v) {
            const double p = std::strtod(v.c_str(), nullptr);
            return p > 0 && p <= 1 ? std::string() : "must be > 0 and <= 1 (1: every token)";
          },
          "(0, 1]"))
      ->capture_default_str();
  app.add_option("--seed", seed, "Seed of the draws")->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--eod", eod, "Stop after this id (the tokenizer's end of document); several: comma-separated")
      ->delimiter(',');
  std::string logits_file;
  app.add_option("--logits-file", logits_file,
                 "Also write the prompt's logits, [prompt tokens, vocab_size] float32, to this safetensors file "
                 "(tensor \"logits\": the whole window's forward, as a model's logits are compared)");
  bool no_kv_cache = false;
  app.add_flag("--no-kv-cache", no_kv_cache,
               "Rerun the whole window for each token (logits_step) instead of one position with a KV cache");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp &e) {
    return app.exit(e, out, err);
  } catch (const CLI::ParseError &e) {
    err << "error: " << e.what() << "\nRun with --help to list the flags.\n" << std::flush;
    return 1;
  }
  try {
    // A masked LM reads its whole window both ways: it has logits of a full window, and no next token.
    if (program.masked_lm && (logits_file.empty() || max_new != 0))
      throw Error("this program is a masked language model (BERT): it predicts masked tokens from both sides and "
                  "does not continue a text, so it does not generate; OUT/train generate --logits-file F with "
                  "seq_length prompt ids (and no --max-new-tokens) writes the logits of that window");
    if (!program.logits_step)
      throw Error("this program has no logits_step: generation needs one rank in fp32; compile the spec with "
                  "megac compile SPEC -o OUT (no --tp, --pp, --dp, --bf16 or --fp16)");
    const std::vector<int32_t> prompt_ids = parse_ids(prompt, program.vocab_size);
    const int64_t s = program.seq_length, b = program.micro_batch_size;
    const int64_t prompt_len = static_cast<int64_t>(prompt_ids.size());
    if (program.masked_lm && prompt_len != s)
      throw Error("--prompt-ids has " + std::to_string(prompt_len) + " tokens; a masked language model attends to "
                  "every position of its window, so give exactly seq_length (" + std::to_string(s) + ")");
    if (max_new == 0 && !program.masked_lm) { // the default: what fits
      if (prompt_len >= s)
        throw Error("--prompt-ids has " + std::to_string(prompt_len) + " tokens, and the model's seq_length " +
                    std::to_string(s) + " leaves none to generate; shorten the prompt");
      max_new = std::min<int64_t>(32, s - prompt_len);
    }
    if (prompt_len + max_new > s)
      throw Error("--prompt-ids (" + std::to_string(prompt_ids.size()) + " tokens) + --max-new-tokens (" +
                  std::to_string(max_new) + ") exceed the model's seq_length " + std::to_string(s) +
                  "; generate fewer tokens or shorten the prompt");
    const PipelineStageDesc &stage = program.stages[0]; // one stage: logits_step reads its table
    ParamStore store(stage.params, stage.num_params);
    const LoadSource source = resolve_load(load, -1, /*with_optimizer=*/false);
    check_load_against_program(source, program, "--load " + load);
    if (source.adapters && stage.num_frozen_params == 0)
      throw Error("--load " + load + " is a LoRA checkpoint (adapters only): generate with the OUT/train of the "
                  "program compiled with --lora-rank, or merge it first (OUT/train merge-lora --load " + load +
                  " --save DIR) and load DIR");
    std::unique_ptr<ParamStore> frozen;
    if (stage.num_frozen_params > 0) { // LoRA: the adapters of a checkpoint, its base where it names
      if (!source.adapters)
        throw Error("--load " + load + ": this LoRA program generates from adapters: one of its checkpoints (the "
                    "base model is the one train_state.json names) or a folder PEFT saved (the base its "
                    "adapter_config.json names), not from " + source.folder);
      frozen = ParamStore::frozen(stage.frozen_params, stage.num_frozen_params, 0, 1, cpu_device());
      frozen->load(checkpoint_base_weights(source, load));
    }
    store.load(source.weight_files);
    int64_t padded = 0; // rows of the logits: the vocabulary padded as the program was compiled
    for (int64_t i = 0; i < stage.num_params; ++i)
      if (stage.params[i].padded)
        padded = std::max(padded, stage.params[i].shape[0]);
    if (padded < program.vocab_size)
      padded = program.vocab_size;
    DeviceBuffer arena(cpu_device(), static_cast<size_t>(program.generation_arena_bytes), MemoryCategory::Workspace);
    std::vector<int32_t> ids(static_cast<size_t>(b * s), 0); // row 0 holds the text; causal: the rest is unread
    std::vector<float> logits(static_cast<size_t>(b * s * padded));
    std::copy(prompt_ids.begin(), prompt_ids.end(), ids.begin());
    int64_t length = static_cast<int64_t>(prompt_ids.size());
    Generator generator{static_cast<uint64_t>(seed)};
    StepContext ctx;
    if (frozen) {
      ctx.frozen = frozen->param_table();
      ctx.frozen_nf4 = frozen->nf4_table();
    }
    // With a KV cache (decode_step): each layer's keys and values of the positions so far.
    const bool use_cache = program.decode_step && !no_kv_cache;
    const int64_t layers = use_cache ? program.kv_cache_layers : 0;
    const size_t cache_floats = static_cast<size_t>(b * s * program.kv_cache_row); // compiled-in sizes
    std::vector<std::vector<float>> keys(static_cast<size_t>(layers), std::vector<float>(cache_floats)),
        values = keys;
    std::vector<float *> key_ptrs, value_ptrs;
    for (int64_t l = 0; l < layers; ++l) {
      key_ptrs.push_back(keys[static_cast<size_t>(l)].data());
      value_ptrs.push_back(values[static_cast<size_t>(l)].data());
    }
    KvCache cache{key_ptrs.data(), value_ptrs.data(), layers, s, 0};
    ctx.kv_cache = &cache; // logits_step does not read it
    std::vector<int32_t> token(static_cast<size_t>(b), 0); // row 0's token; the other rows are unread
    int64_t cached = 0;                                     // positions in the cache
    // The logits of the last position of ids[0, length): the whole window again, or with the
    // cache the positions not yet in it (the prompt, then one a token).
    auto last_logits = [&]() -> const float * {
      if (!use_cache) {
        program.logits_step(ctx, store.param_table(), arena.as<char>(), ids.data(), logits.data());
        return logits.data() + (length - 1) * padded;
      }
      for (; cached < length; ++cached) {
        cache.position = cached;
        token[0] = ids[static_cast<size_t>(cached)];
        program.decode_step(ctx, store.param_table(), arena.as<char>(), token.data(), logits.data());
      }
      return logits.data();
    };
    if (!logits_file.empty()) {
      program.logits_step(ctx, store.param_table(), arena.as<char>(), ids.data(), logits.data());
      std::vector<float> rows(static_cast<size_t>(length * program.vocab_size)); // without the padding columns
      for (int64_t t = 0; t < length; ++t)
        std::copy_n(logits.data() + t * padded, program.vocab_size, rows.data() + t * program.vocab_size);
      write_safetensors(logits_file, {{"logits", {length, program.vocab_size}, rows.data()}});
      if (program.masked_lm)
        return 0;
    }
    std::vector<int32_t> generated;
    for (int64_t k = 0; k < max_new; ++k) {
      const int32_t next = next_token(last_logits(), program.vocab_size, sampling, generator.uniform());
      generated.push_back(next);
      ids[static_cast<size_t>(length++)] = next;
      if (std::find(eod.begin(), eod.end(), next) != eod.end())
        break;
    }
    auto list = [](const std::vector<int32_t> &v) {
      std::string text = "[";
      for (size_t i = 0; i < v.size(); ++i)
        text += (i ? ", " : "") + std::to_string(v[i]);
      return text + "]";
    };
    out << "{\"prompt_ids\": " << list(prompt_ids) << ", \"ids\": " << list(generated)
        << ", \"kv_cache\": " << (use_cache ? "true" : "false") << "}" << std::endl;
    return 0;
  } catch (const Error &e) {
    err << "error: " << e.what() << std::endl;
    return 1;
  }
}

} // namespace megart
