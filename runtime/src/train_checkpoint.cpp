#include "megart/train_checkpoint.h"

#include "megart/atomic_file.h"
#include "megart/checkpoint_match.h"
#include "megart/crash_point.h"
#include "megart/crc32c.h"
#include "megart/error.h"
#include "megart/exit_signal.h"
#include "megart/file_checks.h"
#include "megart/json.h"
#include "megart/param_layout.h"
#include "megart/peft_adapter.h"
#include "megart/pipeline_program.h"
#include "megart/safetensors.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdio.h> // renameat2, RENAME_EXCHANGE (glibc)
#include <fcntl.h>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <system_error>
#include <unistd.h>

namespace megart {

namespace fs = std::filesystem;

namespace {

constexpr const char *kTracker = kTrackerFile;
constexpr const char *kModelFile = "model.safetensors";
constexpr const char *kShardIndex = "model.safetensors.index.json";
constexpr const char *kOptimizerFile = "optimizer.safetensors";
constexpr const char *kStateFile = "train_state.json";
constexpr const char *kConfigFile = "config.json";
constexpr const char *kAdapterFile = "adapter_model.safetensors";
constexpr const char *kAdapterConfigFile = "adapter_config.json";

// Every file read here is small (a tracker, a JSON state or index): a huge one is refused
// rather than read into memory.
std::string read_text(const std::string &path) {
  return read_small_file(path, "a checkpoint's text file", "a checkpoint's trackers, states and indexes are files "
                         "megac writes", size_t(64) << 20);
}

void write_text(const std::string &path, const std::string &text) {
  AtomicFile file(path);
  file.write(text.data(), text.size());
  file.commit();
}

// A folder's entries reach the disk only when the folder itself is synced.
void sync_folder(const std::string &dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    throw Error(dir + ": cannot open the folder to sync it: " + std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0)
    throw Error(dir + ": fsync failed: " + std::strerror(err));
}

bool starts_with(const std::string &s, const char *prefix) {
  return s.rfind(prefix, 0) == 0;
}

// "iter_0000010" -> 10 (at least 7 digits, more past 9,999,999); -1 for any other name.
int64_t iteration_of(const std::string &name) {
  if (!starts_with(name, "iter_") || name.size() < 12 || name.size() > 5 + 18)
    return -1;
  int64_t v = 0;
  for (size_t i = 5; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9')
      return -1;
    v = v * 10 + (name[i] - '0');
  }
  return v;
}

// The whole model's full tensors of one array, on the writer (tp and ep rank 0 of pp rank 0);
// other ranks get nothing back. A tensor several stages hold (tied) comes from the first of them.
std::vector<NamedTensor> gather_model(const ParamStore &store, StateArray which,
                                      const CheckpointGroup &g,
                                      std::vector<std::vector<float>> &storage) {
  storage = store.gather_tensors(g.tp, which, g.ep);
  std::vector<NamedTensor> named;
  if (g.tp.rank() != 0 || (g.ep && g.ep->rank() != 0))
    return named;
  // The other stages of the replica send the tensors they are the first to hold.
  const int64_t stages = g.pp ? g.pp->size() : 1, here = g.pp ? g.pp->rank() : 0;
  if (stages > 1 && !g.program)
    throw Error("saving a pipeline-parallel checkpoint needs the program's stage tables");
  const std::map<std::string, std::vector<int64_t>> owners =
      stages > 1 ? tensor_stages(*g.program) : std::map<std::string, std::vector<int64_t>>{};
  auto owned_by = [&](const std::string &name, int64_t stage) {
    return owners.at(name).front() == stage;
  };
  if (here != 0) {
    std::vector<std::unique_ptr<Request>> sends;
    for (size_t i = 0; i < store.tensors().size(); ++i)
      if (owned_by(store.tensors()[i].name, here))
        sends.push_back(g.pp->isend(storage[i].data(), static_cast<int64_t>(storage[i].size()), 0,
                                    p2p_tag::kCheckpointTensor));
    for (auto &r : sends)
      g.pp->wait(*r);
    return named;
  }
  for (size_t i = 0; i < store.tensors().size(); ++i)
    named.push_back({state_tensor_name(store.tensors()[i].name, which), store.tensors()[i].shape,
                     storage[i].data()});
  // Every receive is posted first, so the stages send at once; the writer holds the whole
  // array, as with pp 1. `storage` is sized before any pointer into it is taken.
  struct Incoming {
    CheckpointTensor tensor;
    int64_t stage;
    size_t slot;
  };
  std::vector<Incoming> incoming;
  for (int64_t r = 1; r < stages; ++r) {
    const PipelineStageDesc &stage = g.program->stages[r];
    for (const CheckpointTensor &t : group_by_tensor(stage.params, stage.num_params))
      if (owned_by(t.name, r)) {
        incoming.push_back({t, r, storage.size()});
        storage.emplace_back(static_cast<size_t>(full_numel(stage.params[t.blocks[0]])));
      }
  }
  std::vector<std::unique_ptr<Request>> recvs;
  for (const Incoming &in : incoming) {
    std::vector<float> &buf = storage[in.slot];
    recvs.push_back(g.pp->irecv(buf.data(), static_cast<int64_t>(buf.size()),
                                static_cast<int>(in.stage), p2p_tag::kCheckpointTensor));
    named.push_back({state_tensor_name(in.tensor.name, which), in.tensor.shape, buf.data()});
  }
  for (auto &r : recvs)
    g.pp->wait(*r);
  return named;
}

// --keep-latest-k: of the iteration folders up to `newest` (the one just saved, which the
// tracker now names), keeps the newest `keep`. Folders past it belong to a run this one went
// back from; they are left alone. A folder that cannot be removed is reported, not fatal: the
// checkpoint just saved is complete.
void remove_old_checkpoints(const std::string &dir, int64_t newest, int64_t keep) {
  std::vector<int64_t> iterations;
  std::error_code ec;
  for (const auto &e : fs::directory_iterator(dir, ec))
    if (!e.is_symlink(ec) && e.is_directory()) { // a linked folder is not this run's to remove
      const int64_t it = iteration_of(e.path().filename().string());
      if (it >= 0 && it <= newest)
        iterations.push_back(it);
    }
  std::sort(iterations.rbegin(), iterations.rend());
  for (size_t i = static_cast<size_t>(keep); i < iterations.size(); ++i) {
    fs::remove_all(iteration_folder(dir, iterations[i]), ec);
    if (ec)
      std::fprintf(stderr, "warning: %s: cannot remove an old checkpoint (--keep-latest-k): %s\n",
                   iteration_folder(dir, iterations[i]).c_str(), ec.message().c_str());
  }
}

// The data order a state resumes (its seed, whether shuffled, over how many samples).
std::string data_order_text(const TrainState &state) {
  return "seed " + std::to_string(state.seed) + (state.shuffle ? " shuffled" : " in order") + " over " +
         std::to_string(state.data_num_samples) + " samples";
}

// What each tensor file of a checkpoint records of the state it was saved with, so that the
// files of one checkpoint can be checked against each other on resume.
std::map<std::string, std::string> checkpoint_file_metadata(const TrainState &state) {
  return {{"megac_iteration", std::to_string(state.iteration)},
          {"megac_consumed_samples", std::to_string(state.consumed_samples)},
          {"megac_data_order", data_order_text(state)}};
}

// A checkpoint with a NaN or an infinity would pass the damage on to every run that loads it:
// the save fails instead (the previous checkpoint stays the latest).
void require_finite(const std::vector<NamedTensor> &tensors, int64_t iteration) {
  for (const NamedTensor &t : tensors) {
    int64_t n = 1;
    for (int64_t d : t.shape)
      n *= d;
    const float *bad = std::find_if(t.data, t.data + n, [](float v) { return !std::isfinite(v); });
    if (bad != t.data + n)
      throw Error("iteration " + std::to_string(iteration) + ": tensor '" + t.name + "' holds " +
                  (std::isnan(*bad) ? "NaN" : "an infinity") + " at element " + std::to_string(bad - t.data) +
                  ", so it was not saved (the previous checkpoint stays the latest); the training state is "
                  "damaged: resume from an earlier checkpoint");
  }
}

// Moves the complete staging folder to `final`. When `final` exists (a save repeated at the
// same iteration) the two are exchanged in one step, so `final` is never missing; the old
// contents then sit under the staging name, which the next start removes if this one dies.
void publish_folder(const std::string &staging, const std::string &final, const std::string &dir) {
  std::error_code ec;
  if (!fs::exists(final, ec)) {
    if (::rename(staging.c_str(), final.c_str()) != 0)
      throw Error(final + ": cannot rename " + staging + " into place: " + std::strerror(errno));
  } else if (::renameat2(AT_FDCWD, staging.c_str(), AT_FDCWD, final.c_str(), RENAME_EXCHANGE) != 0) {
    throw Error(final + ": cannot replace the older checkpoint with " + staging + ": " +
                std::strerror(errno) + " (the filesystem must support an atomic exchange; save "
                "into a new folder instead)");
  }
  sync_folder(dir);
  fs::remove_all(staging, ec); // the older contents, if any
}

} // namespace

void check_save_dir(const std::string &dir) {
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  if (fs::exists(st) && !fs::is_directory(st))
    throw Error("--save " + dir + " exists and is not a folder; give a folder for checkpoints");
  // Nothing is created before training (a run that stops early leaves no empty folder): the
  // folder, or the nearest folder above it that exists, must be writable.
  fs::path probe_in = fs::absolute(dir, ec);
  while (!fs::exists(probe_in, ec) && probe_in.has_parent_path() && probe_in != probe_in.parent_path())
    probe_in = probe_in.parent_path();
  if (!fs::is_directory(probe_in, ec))
    throw Error("--save " + dir + ": " + probe_in.string() + " is not a folder, so the "
                "checkpoint folder cannot be created there; give another path");
  // The longest path a save writes must fit the filesystem's limits, found now rather than
  // after training: DIR/iter_NNNNNNN.tmp.PID/optimizer.safetensors.tmp.PID.N.
  const long name_max = ::pathconf(probe_in.c_str(), _PC_NAME_MAX), path_max = ::pathconf(probe_in.c_str(), _PC_PATH_MAX);
  const fs::path absolute = fs::absolute(dir, ec);
  for (const fs::path &part : absolute)
    if (name_max > 0 && static_cast<long>(part.string().size()) > name_max)
      throw Error("--save " + dir + ": the name " + part.string().substr(0, 40) + "... has " +
                  std::to_string(part.string().size()) + " characters, more than the filesystem's " +
                  std::to_string(name_max) + "; give a shorter path");
  const size_t longest = absolute.string().size() + std::string("/iter_0000000.tmp.4194304/optimizer.safetensors"
                                                                ".tmp.4194304.1000000").size();
  if (path_max > 0 && static_cast<long>(longest) >= path_max)
    throw Error("--save " + dir + ": the path has " + std::to_string(absolute.string().size()) +
                " characters; with the checkpoint's files inside it reaches " + std::to_string(longest) +
                ", more than the filesystem's " + std::to_string(path_max) + "; give a shorter path");
  const std::string probe = (probe_in / (".megac-write-test." + std::to_string(::getpid()))).string();
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0)
    throw Error("--save " + dir + ": cannot write in " + probe_in.string() + ": " +
                std::strerror(errno) + "; give a folder you can write");
  ::close(fd);
  ::unlink(probe.c_str());
}

std::vector<std::string> remove_stale_checkpoint_temps(const std::string &dir) {
  std::vector<std::string> removed;
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return removed;
  std::vector<fs::path> stale;
  for (const auto &e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    // A link is never followed: what it points to is not this run's to clean (a link that is
    // itself a leftover temporary goes, the link alone).
    const bool link = e.is_symlink(ec);
    if (starts_with(name, kTracker) && name.find(".tmp.") != std::string::npos) {
      stale.push_back(e.path()); // a tracker write that died
      continue;
    }
    if (!starts_with(name, "iter_"))
      continue;
    if (name.find(".tmp.") != std::string::npos) {
      stale.push_back(e.path());
      continue;
    }
    // A save of an older megac, or a file write that died: temporaries inside the folder.
    if (!link && e.is_directory())
      for (const auto &f : fs::directory_iterator(e.path(), ec))
        if (f.path().filename().string().find(".tmp.") != std::string::npos)
          stale.push_back(f.path());
  }
  for (const fs::path &p : stale) {
    fs::remove_all(p, ec);
    if (!ec)
      removed.push_back(p.string());
  }
  // An iteration folder the temporaries were all of is gone too.
  std::vector<fs::path> empty;
  for (const auto &e : fs::directory_iterator(dir, ec))
    if (!e.is_symlink(ec) && e.is_directory() && iteration_of(e.path().filename().string()) >= 0 &&
        fs::is_empty(e.path(), ec))
      empty.push_back(e.path());
  for (const fs::path &p : empty)
    if (fs::remove(p, ec) && !ec)
      removed.push_back(p.string());
  return removed;
}

std::string save_checkpoint(const std::string &dir, const TrainState &state,
                            const ParamStore &store, const CheckpointGroup &group,
                            const CheckpointOptions &options) {
  const SavingCheckpoint saving; // a stop signal now takes effect when the save is done or undone
  const std::string final = iteration_folder(dir, state.iteration);
  const bool writer =
      group.tp.rank() == 0 && (!group.pp || group.pp->rank() == 0) && (!group.ep || group.ep->rank() == 0);
  const std::string staging = final + ".tmp." + std::to_string(::getpid());
  // A save that fails (a full disk, a damaged state) leaves nothing behind: the staging folder
  // goes, and the previous checkpoint stays the latest.
  struct StagingGuard {
    std::string path;
    bool published = false;
    ~StagingGuard() {
      std::error_code ec;
      if (!published && !path.empty())
        fs::remove_all(path, ec);
    }
  } guard{writer ? staging : std::string()};
  if (writer) {
    std::error_code ec;
    const bool new_dir = !fs::exists(dir, ec);
    fs::remove_all(staging, ec);
    fs::create_directories(staging, ec);
    if (ec)
      throw Error(staging + ": cannot create the checkpoint folder: " + ec.message());
    if (new_dir) // the first save made --save: its entry in the parent must reach the disk too
      sync_folder(fs::absolute(dir).parent_path().string());
  }
  // One file at a time: the writer holds the full weights, then both full moments, besides its
  // own blocks.
  {
    std::vector<std::vector<float>> storage;
    const std::vector<NamedTensor> weights = gather_model(store, StateArray::Param, group, storage);
    const char *file = options.adapter_config_json.empty() ? kModelFile : kAdapterFile;
    if (writer) {
      require_finite(weights, state.iteration);
      std::map<std::string, std::string> metadata = checkpoint_file_metadata(state);
      metadata["format"] = "pt"; // transformers reads a file only with it
      write_safetensors((fs::path(staging) / file).string(), weights, metadata);
    }
  }
  crash_point("save:model-written");
  {
    std::vector<std::vector<float>> first, second;
    std::vector<NamedTensor> moments = gather_model(store, StateArray::ExpAvg, group, first);
    const std::vector<NamedTensor> sq = gather_model(store, StateArray::ExpAvgSq, group, second);
    moments.insert(moments.end(), sq.begin(), sq.end());
    if (writer) {
      require_finite(moments, state.iteration);
      std::map<std::string, std::string> metadata = checkpoint_file_metadata(state);
      metadata["format"] = "megac-adamw";
      metadata["optimizer_steps"] = std::to_string(state.optimizer_steps);
      write_safetensors((fs::path(staging) / kOptimizerFile).string(), moments, metadata);
    }
  }
  if (!writer)
    return final;
  write_text((fs::path(staging) / kStateFile).string(), format_train_state(state));
  if (!options.hf_config_json.empty())
    write_text((fs::path(staging) / kConfigFile).string(), options.hf_config_json);
  if (!options.adapter_config_json.empty())
    write_text((fs::path(staging) / kAdapterConfigFile).string(), options.adapter_config_json);
  for (const auto &[name, content] : options.extra_files)
    write_text((fs::path(staging) / name).string(), content);
  sync_folder(staging);
  crash_point("save:staged");
  publish_folder(staging, final, dir);
  guard.published = true;
  crash_point("save:published");
  // Last: the tracker only ever names a complete checkpoint.
  write_text(tracker_path(dir), std::to_string(state.iteration)); // no newline, as Megatron
  sync_folder(dir);
  crash_point("save:tracked");
  if (options.keep_latest > 0)
    remove_old_checkpoints(dir, state.iteration, options.keep_latest);
  return final;
}

std::vector<std::string> sharded_weight_files(const std::string &index_path) {
  const JsonValue index = parse_json(read_text(index_path), index_path);
  const JsonValue *map = index.is_object() ? index.get("weight_map") : nullptr;
  if (!map || !map->is_object() || map->object.empty())
    throw Error(index_path + ": no \"weight_map\" object naming each tensor's file; is this a "
                "Hugging Face model.safetensors.index.json?");
  std::vector<std::string> files;
  std::set<std::string> seen;
  const fs::path folder = fs::path(index_path).parent_path();
  for (const auto &[tensor, file] : map->object) {
    if (!file.is_string() || file.string.empty() || file.string.find('/') != std::string::npos)
      throw Error(index_path + ": weight_map[\"" + tensor + "\"] is " + file.brief() +
                  "; it must name a .safetensors file beside the index");
    if (!seen.insert(file.string).second)
      continue;
    const std::string path = (folder / file.string).string();
    std::error_code ec;
    if (!fs::is_regular_file(path, ec))
      throw Error(index_path + ": names " + file.string + " (for tensor '" + tensor +
                  "'), which is not beside it; copy every shard into " + folder.string());
    files.push_back(path);
  }
  // The index and the shards must say the same: a tensor the index maps elsewhere, leaves out,
  // or that two shards hold would load from a file nobody meant.
  std::map<std::string, std::string> holder; // tensor -> the shard holding it
  for (const std::string &path : files) {
    const std::string name = fs::path(path).filename().string();
    for (const std::string &tensor : SafetensorsFile::open(path).names())
      if (!holder.emplace(tensor, name).second)
        throw Error(index_path + ": tensor '" + tensor + "' is in two shards, " + holder[tensor] + " and " + name +
                    "; a sharded checkpoint holds each tensor once");
  }
  for (const auto &[tensor, name] : holder) {
    const JsonValue *mapped = map->get(tensor);
    if (!mapped)
      throw Error(index_path + ": shard " + name + " holds tensor '" + tensor + "', which the index's weight_map "
                  "does not list; the index and its shards are from different saves");
    if (mapped->string != name)
      throw Error(index_path + ": maps tensor '" + tensor + "' to " + mapped->string + ", but it is in shard " +
                  name + "; the index and its shards are from different saves");
  }
  for (const auto &[tensor, file] : map->object)
    if (!holder.count(tensor))
      throw Error(index_path + ": maps tensor '" + tensor + "' to " + file.string + ", which does not hold it; the "
                  "index and its shards are from different saves");
  return files;
}

TrainState read_train_state(const std::string &path) { return parse_train_state(read_text(path), path); }

void check_load_against_program(const LoadSource &source, const ProgramDesc &program, const std::string &what) {
  if (!source.config_file.empty() && program.hf_config_json)
    check_hf_config(source.config_file, program.hf_config_json, what);
  if (!source.adapters || !program.adapter_config_json)
    return;
  const std::string adapter_config = (fs::path(source.folder) / kAdapterConfigFile).string();
  // The tensors' names say which modules are adapted, however target_modules is written.
  const std::vector<std::string> adapted = adapted_modules(SafetensorsFile::open(source.weight_files.at(0)).names());
  check_adapter_config(read_text(adapter_config), adapter_config, program.adapter_config_json,
                       "this program's LoRA settings", adapted, /*against_program=*/true);
  if (!source.state_file.empty() && fs::exists(source.state_file)) {
    const TrainState state = read_train_state(source.state_file);
    if (!state.adapter_config_json.empty())
      check_adapter_config(read_text(adapter_config), adapter_config, state.adapter_config_json,
                           "the settings train_state.json records of the run that trained them", adapted);
  }
}

void check_checkpoint_files(const LoadSource &source, const TrainState &state) {
  // Each file's record against the state's; files of an older megac record nothing.
  auto check = [&](const std::string &path, const std::string &key, const std::string &expected, const char *field) {
    const SafetensorsFile file = SafetensorsFile::open(path);
    const std::map<std::string, std::string> &metadata = file.metadata();
    const auto found = metadata.find(key);
    if (found == metadata.end() || found->second == expected)
      return;
    throw Error("--load " + source.folder + ": " + fs::path(path).filename().string() + " was saved with " + field +
                " " + found->second + ", but " + fs::path(source.state_file).filename().string() + " says " +
                expected + "; the checkpoint's files are from different saves (load another iteration with "
                "--ckpt-step N, or the folder as saved)");
  };
  std::vector<std::string> files = source.weight_files;
  if (!source.optimizer_file.empty() && fs::is_regular_file(source.optimizer_file)) {
    files.push_back(source.optimizer_file);
    check(source.optimizer_file, "optimizer_steps", std::to_string(state.optimizer_steps), "optimizer_steps");
  }
  for (const std::string &f : files) {
    check(f, "megac_iteration", std::to_string(state.iteration), "iteration");
    check(f, "megac_consumed_samples", std::to_string(state.consumed_samples), "consumed_samples");
    check(f, "megac_data_order", data_order_text(state), "the data order");
  }
}

namespace {

LoadSource resume_from(const std::string &folder, int64_t iteration, const std::string &asked,
                       bool with_optimizer) {
  LoadSource s;
  s.resume = true;
  s.folder = folder;
  s.iteration = iteration;
  std::error_code exists;
  const bool adapters = fs::is_regular_file(fs::path(folder) / kAdapterConfigFile, exists);
  s.adapters = adapters;
  s.weight_files = {(fs::path(folder) / (adapters ? kAdapterFile : kModelFile)).string()};
  s.optimizer_file = (fs::path(folder) / kOptimizerFile).string();
  s.state_file = (fs::path(folder) / kStateFile).string();
  std::error_code ec;
  std::vector<std::string> missing;
  for (const std::string &f : {s.weight_files[0], s.optimizer_file, s.state_file})
    if (!fs::is_regular_file(f, ec) && (with_optimizer || f != s.optimizer_file))
      missing.push_back(fs::path(f).filename().string());
  if (!missing.empty()) {
    std::string list;
    for (const std::string &m : missing)
      list += (list.empty() ? "" : ", ") + m;
    throw Error("--load " + asked + ": " + folder + " has no " + list +
                "; it is not a complete megac checkpoint (resume from another iteration with "
                "--ckpt-step N, or load only its weights by naming " + kModelFile + ")");
  }
  return s;
}

// A folder PEFT's save_pretrained wrote (adapter_config.json + adapter_model.safetensors, no
// training state): its adapters start a new run; the base is found by checkpoint_base_weights.
LoadSource peft_adapters_from(const fs::path &dir) {
  std::error_code ec;
  if (fs::exists(dir / kOptimizerFile, ec)) // megac's, not PEFT's: a resume whose state is gone
    throw Error("--load " + dir.string() + ": the folder has " + kAdapterConfigFile + " and " + kOptimizerFile +
                " but no " + kStateFile + "; it is not a complete megac checkpoint (resume from another iteration "
                "with --ckpt-step N; to start a new run from its adapters alone, copy " + kAdapterConfigFile +
                " and " + kAdapterFile + " into a folder of their own)");
  LoadSource s;
  s.folder = dir.string();
  s.adapters = true;
  s.weight_files = {peft_adapter_tensors(dir.string(), "--load " + dir.string())};
  return s;
}

LoadSource weights_from(std::vector<std::string> files) {
  LoadSource s;
  s.folder = fs::path(files.front()).parent_path().string();
  s.weight_files = std::move(files);
  return s;
}

// The source with the config.json of the folder it came from, when it has one (a Hugging Face
// folder, a megac checkpoint): what the weights are of.
LoadSource with_config(LoadSource source) {
  std::error_code ec;
  const fs::path config = fs::path(source.folder) / kConfigFile;
  if (fs::exists(config, ec))
    source.config_file = config.string();
  return source;
}

} // namespace

LoadSource resolve_load(const std::string &path, int64_t step, bool with_optimizer) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st))
    throw Error("--load " + path + ": no such file or folder");
  if (fs::is_regular_file(st)) {
    if (step >= 0)
      throw Error("--ckpt-step " + std::to_string(step) + " needs --load to name a checkpoint "
                  "folder (one with " + kTracker + "), not the file " + path);
    const std::string name = fs::path(path).filename().string();
    if (name.size() > 11 && name.compare(name.size() - 11, 11, ".index.json") == 0)
      return with_config(weights_from(sharded_weight_files(path)));
    return weights_from({path}); // a lone tensor file says nothing of its model
  }
  if (!fs::is_directory(st))
    throw Error("--load " + path + " is neither a file nor a folder");
  const fs::path dir(path);
  const int64_t latest = read_tracker(path);
  if (latest >= 0 || step >= 0) {
    const int64_t it = step >= 0 ? step : latest;
    const std::string folder = iteration_folder(path, it);
    if (!fs::is_directory(folder, ec))
      throw Error("--load " + path + ": " + (step >= 0 ? "--ckpt-step " + std::to_string(step)
                                                       : std::string(kTracker) + " says " +
                                                             std::to_string(latest)) +
                  ", but there is no folder " + folder);
    return with_config(resume_from(folder, it, path, with_optimizer));
  }
  if (fs::is_regular_file(dir / kStateFile, ec)) {
    // An iteration folder named directly.
    const int64_t it = iteration_of(dir.filename().string());
    return with_config(resume_from(path, it >= 0 ? it : read_train_state((dir / kStateFile).string()).iteration,
                                   path, with_optimizer));
  }
  if (fs::is_regular_file(dir / kAdapterConfigFile, ec))
    return with_config(peft_adapters_from(dir));
  if (fs::is_regular_file(dir / kShardIndex, ec))
    return with_config(weights_from(sharded_weight_files((dir / kShardIndex).string())));
  if (fs::is_regular_file(dir / kModelFile, ec))
    return with_config(weights_from({(dir / kModelFile).string()}));
  throw Error("--load " + path + ": the folder has no " + kTracker + ", " + kStateFile + ", " + kAdapterConfigFile +
              ", " + kShardIndex + " or " + kModelFile + "; give a checkpoint folder (--save of an "
              "earlier run), one of its iter_NNNNNNN folders, a PEFT adapter folder or a Hugging Face model folder");
}
} // namespace megart

namespace megart {

std::vector<std::string> resolve_base(const std::string &path, const std::string &flag) {
  try {
    const LoadSource source = resolve_load(path, -1, /*with_optimizer=*/false);
    if (source.adapters)
      throw Error("--load " + path + " is a LoRA checkpoint (adapters only), not a base model");
    return source.weight_files;
  } catch (const Error &e) {
    const std::string message = e.what();
    throw Error(message.rfind("--load ", 0) == 0 ? flag + message.substr(6) : flag + " " + path + ": " + message);
  }
}

std::vector<std::string> base_weights_checksums(const std::vector<std::string> &files) {
  std::vector<std::string> sums;
  for (const std::string &f : files)
    sums.push_back(file_checksum(f));
  return sums;
}

std::vector<std::string> checkpoint_base_weights(const LoadSource &source, const std::string &load,
                                                 const std::string &pretrained) {
  // A checkpoint's record (none when --pretrained-checkpoint starts a run from a base folder, nor
  // in a folder PEFT saved: its adapter_config.json names the base).
  const TrainState state = source.state_file.empty() ? TrainState() : read_train_state(source.state_file);
  std::vector<std::string> base;
  if (!pretrained.empty()) {
    base = resolve_base(pretrained);
  } else if (source.state_file.empty() && source.adapters) {
    const std::string config = (fs::path(source.folder) / kAdapterConfigFile).string();
    base = resolve_base(peft_named_base(config), config + ": base_model_name_or_path");
  } else {
    base = state.base_weights;
  }
  if (base.empty())
    throw Error("--load " + load + ": " + source.state_file + " names no base model (it was trained from a "
                "random one); give the base's weights with --pretrained-checkpoint");
  // The adapters fit the base they were trained on, byte for byte: a file replaced at the same
  // path, or another model given, is refused.
  if (!state.base_weights_checksums.empty()) {
    const std::vector<std::string> now = base_weights_checksums(base);
    if (now != state.base_weights_checksums) {
      std::string then, found;
      for (size_t i = 0; i < state.base_weights_checksums.size(); ++i)
        then += (i ? ", " : "") + (i < state.base_weights.size() ? state.base_weights[i] + " " : std::string()) +
                state.base_weights_checksums[i];
      for (size_t i = 0; i < now.size(); ++i)
        found += (i ? ", " : "") + base[i] + " " + now[i];
      throw Error("--load " + load + ": the base model is not the one its adapters were trained on: they were "
                  "trained on " + then + "; the base found now is " + found + ". Give the original base with "
                  "--pretrained-checkpoint (or restore its files)");
    }
  }
  return base;
}

} // namespace megart
