#include "megart/train_checkpoint.h"

#include "megart/atomic_file.h"
#include "megart/error.h"
#include "megart/param_layout.h"
#include "megart/pipeline_program.h"
#include "megart/safetensors.h"

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

namespace {

void create_folder(const std::string &dir, int64_t iteration) {
  const std::string folder = iteration_folder(dir, iteration);
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec)
    throw Error(folder + ": cannot create checkpoint folder: " + ec.message());
}

// Written last: it only ever names a complete checkpoint.
void write_tracker(const std::string &dir, int64_t iteration) {
  AtomicFile tracker((fs::path(dir) / "latest_checkpointed_iteration.txt").string());
  const std::string text = std::to_string(iteration); // no newline, as Megatron writes it
  tracker.write(text.data(), text.size());
  tracker.commit();
}

} // namespace

std::string save_checkpoint(const std::string &dir, int64_t iteration, const ParamStore &store,
                            Communicator &tp) {
  const bool writer = tp.rank() == 0;
  const std::string path = checkpoint_path(dir, iteration);
  if (writer)
    create_folder(dir, iteration);
  store.save(path, tp);
  if (writer)
    write_tracker(dir, iteration);
  return path;
}

std::string save_checkpoint(const std::string &dir, int64_t iteration, const ParamStore &store,
                            Communicator &tp, Communicator &pp, const ProgramDesc &program) {
  const std::string path = checkpoint_path(dir, iteration);
  std::vector<std::vector<float>> data = store.gather_tensors(tp);
  if (tp.rank() != 0)
    return path;
  // A tensor several stages hold (tied) comes from the first of them.
  const std::map<std::string, std::vector<int64_t>> owners = tensor_stages(program);
  auto owned_by = [&](const std::string &name, int64_t stage) {
    return owners.at(name).front() == stage;
  };
  const int64_t here = pp.rank();
  if (here != 0) {
    std::vector<std::unique_ptr<Request>> sends;
    for (size_t i = 0; i < store.tensors().size(); ++i)
      if (owned_by(store.tensors()[i].name, here))
        sends.push_back(pp.isend(data[i].data(), static_cast<int64_t>(data[i].size()), 0,
                                 p2p_tag::kCheckpointTensor));
    for (auto &r : sends)
      pp.wait(*r);
    return path;
  }
  std::vector<NamedTensor> named;
  for (size_t i = 0; i < store.tensors().size(); ++i)
    named.push_back({store.tensors()[i].name, store.tensors()[i].shape, data[i].data()});
  // Every receive is posted first, so the stages send at once; the writer holds the whole model,
  // as with pp 1.
  std::vector<std::vector<float>> received;
  std::vector<std::unique_ptr<Request>> recvs;
  received.reserve(owners.size());
  for (int64_t r = 1; r < pp.size(); ++r) {
    const PipelineStageDesc &stage = program.stages[r];
    for (const CheckpointTensor &t : group_by_tensor(stage.params, stage.num_params)) {
      if (!owned_by(t.name, r))
        continue;
      received.emplace_back(static_cast<size_t>(full_numel(stage.params[t.blocks[0]])));
      recvs.push_back(pp.irecv(received.back().data(), static_cast<int64_t>(received.back().size()),
                               static_cast<int>(r), p2p_tag::kCheckpointTensor));
      named.push_back({t.name, t.shape, received.back().data()});
    }
  }
  for (auto &r : recvs)
    pp.wait(*r);
  create_folder(dir, iteration);
  write_safetensors(path, named, {{"format", "pt"}});
  write_tracker(dir, iteration);
  return path;
}

} // namespace megart
