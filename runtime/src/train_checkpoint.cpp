#include "megart/train_checkpoint.h"

#include "megart/atomic_file.h"
#include "megart/error.h"

#include <cstdio>
#include <filesystem>
#include <system_error>

namespace megart {

namespace fs = std::filesystem;

namespace {
std::string iteration_folder(const std::string &dir, int64_t iteration) {
  char name[32];
  std::snprintf(name, sizeof name, "iter_%07lld", static_cast<long long>(iteration));
  return (fs::path(dir) / name).string();
}
} // namespace

std::string checkpoint_path(const std::string &dir, int64_t iteration) {
  return (fs::path(iteration_folder(dir, iteration)) / "model.safetensors").string();
}

void check_checkpoint_dir(const std::string &dir) {
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  if (fs::exists(st) && !fs::is_directory(st))
    throw Error("--save " + dir + " exists and is not a folder; give a folder for checkpoints");
}

std::string save_checkpoint(const std::string &dir, int64_t iteration, const ParamStore &store) {
  SelfCommunicator self;
  return save_checkpoint(dir, iteration, store, self);
}

std::string save_checkpoint(const std::string &dir, int64_t iteration, const ParamStore &store,
                            Communicator &tp) {
  const bool writer = tp.rank() == 0;
  const std::string folder = iteration_folder(dir, iteration);
  const std::string path = checkpoint_path(dir, iteration);
  if (writer) {
    std::error_code ec;
    fs::create_directories(folder, ec);
    if (ec)
      throw Error(folder + ": cannot create checkpoint folder: " + ec.message());
  }
  store.save(path, tp);
  if (writer) {
    AtomicFile tracker((fs::path(dir) / "latest_checkpointed_iteration.txt").string());
    const std::string text = std::to_string(iteration); // no newline, as Megatron writes it
    tracker.write(text.data(), text.size());
    tracker.commit();
  }
  return path;
}

} // namespace megart
