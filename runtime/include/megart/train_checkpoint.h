// Checkpoint folders in Megatron's layout, holding the whole training state:
//   DIR/latest_checkpointed_iteration.txt     "10": the newest complete checkpoint
//   DIR/iter_0000010/model.safetensors        weights: Hugging Face names, full tensors
//   DIR/iter_0000010/optimizer.safetensors    AdamW moments: NAME.exp_avg, NAME.exp_avg_sq (F32)
//   DIR/iter_0000010/train_state.json         iteration, samples, schedule, data, loss scaler
//   DIR/iter_0000010/config.json              the Hugging Face config (when the program has one)
// A LoRA program's checkpoint holds its adapters as PEFT does: adapter_model.safetensors and
// adapter_config.json instead of model.safetensors (the frozen base model stays where it was
// loaded from; train_state.json names its files).
// Every tensor is whole, whatever the plan, so any plan can resume from any other's checkpoint.
//
// A save is atomic per folder: everything is written into DIR/iter_0000010.tmp.<pid>, synced,
// then renamed into place (exchanged with an existing folder of that iteration in one step),
// and only then is the tracker updated. A save that dies leaves the previous checkpoint the
// latest and a .tmp folder that the next run removes.
#pragma once

#include "megart/checkpoint_folder.h" // iteration_folder, read_tracker
#include "megart/comm.h"
#include "megart/param_store.h"
#include "megart/program.h"
#include "megart/train_state.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace megart {

// Before training: --save must be a folder that can be written, or one that can be created
// (the nearest existing folder above it is writable; nothing is created yet). Throws naming the
// folder and why not.
void check_save_dir(const std::string &dir);

// Removes what a killed save left in DIR (iter_*.tmp.* folders, temporary files inside
// iteration folders, a tracker's temporary). Returns the paths it removed.
std::vector<std::string> remove_stale_checkpoint_temps(const std::string &dir);

// Who takes part in a save: one data-parallel replica (the others hold the same state).
struct CheckpointGroup {
  Communicator &tp;
  Communicator *pp = nullptr;           // pipeline parallelism: every stage of the replica
  const ProgramDesc *program = nullptr; // with pp: which stage holds which tensor
  Communicator *ep = nullptr;           // expert parallelism: the ranks whose experts make the model's
};

struct CheckpointOptions {
  std::string hf_config_json;  // written as config.json when not empty
  int64_t keep_latest = 0;     // > 0: remove older iteration folders beyond the newest K
  // Further files of the folder, name -> content: the tokenizer's (tokenizer_record.h).
  std::vector<std::pair<std::string, std::string>> extra_files;
  // A LoRA program's (PEFT's adapter_config.json): the store holds the adapters, written as
  // adapter_model.safetensors beside this config instead of model.safetensors, so PEFT's
  // PeftModel.from_pretrained(base, folder) loads the folder. Empty: a whole model.
  std::string adapter_config_json;
};

// Collective over the group: every stage assembles its tensors over tp (and ep), and the writer
// (tp and ep rank 0 of pp rank 0) receives the other stages' and writes the folder. Returns the
// folder.
std::string save_checkpoint(const std::string &dir, const TrainState &state,
                            const ParamStore &store, const CheckpointGroup &group,
                            const CheckpointOptions &options = {});

// What --load names, resolved before anything is read.
struct LoadSource {
  bool resume = false;                   // a megac checkpoint folder: the whole state
  std::string folder;                    // the iteration folder (resume), or the weights' folder
  int64_t iteration = -1;                // resume: the folder's iteration
  std::vector<std::string> weight_files; // safetensors files holding the weights
  std::string optimizer_file;            // resume only
  std::string state_file;                // resume only
  bool adapters = false;                 // LoRA adapters (a megac LoRA checkpoint, or a folder PEFT saved:
                                         // not resume): weight_files is adapter_model.safetensors
  std::string config_file;               // the folder's config.json, when it has one (checked first)
};

// --load PATH: a checkpoint folder with a tracker (its latest iteration, or `step` when >= 0),
// an iteration folder, a PEFT adapter folder (adapter_config.json + adapter_model.safetensors
// without train_state.json), a Hugging Face folder (model.safetensors or a sharded
// model.safetensors.index.json), or one .safetensors / .index.json file (weights only). Throws
// naming the path, what it holds and what was expected.
// `with_optimizer`: a resume needs optimizer.safetensors (not with --no-load-optim).
LoadSource resolve_load(const std::string &path, int64_t step = -1, bool with_optimizer = true);

// --pretrained-checkpoint PATH (a LoRA program's base model): the weight files of a Hugging Face
// folder, a .safetensors file, an *.index.json or a whole model's megac checkpoint, as
// resolve_load finds them; errors name `flag` (what gave the path).
std::vector<std::string> resolve_base(const std::string &path, const std::string &flag = "--pretrained-checkpoint");

// The file_checksum (megart/crc32c.h) of each base weight file, recorded with a LoRA run's state.
std::vector<std::string> base_weights_checksums(const std::vector<std::string> &files);

// The frozen base model of a LoRA checkpoint `source` (--load `load`): the files of
// --pretrained-checkpoint `pretrained` when given (resolve_base), else those its train_state.json
// names, else (a folder PEFT saved) those of the base its adapter_config.json names in
// base_model_name_or_path. Throws when none names any (the run had a random base), or when the
// files differ from those the checkpoint's run recorded (their checksums).
std::vector<std::string> checkpoint_base_weights(const LoadSource &source, const std::string &load,
                                                 const std::string &pretrained = "");

// The tensor files a sharded checkpoint's index names (weight_map values, in order, unique),
// checked to exist beside the index.
std::vector<std::string> sharded_weight_files(const std::string &index_path);

// Reads and checks train_state.json.
TrainState read_train_state(const std::string &path);

// What `source` says of its model against the program, before any tensor is read: the folder's
// config.json (megart/checkpoint_match.h) and, for a LoRA checkpoint, its adapter_config.json
// against the program's settings and against its train_state.json's record of them.
void check_load_against_program(const LoadSource &source, const ProgramDesc &program, const std::string &what);

// A resumed checkpoint's files against each other: the iteration, samples and optimizer steps
// its tensor files recorded when saved must be its train_state.json's. Throws naming the file.
void check_checkpoint_files(const LoadSource &source, const TrainState &state);

} // namespace megart
