// Checkpoint folders in Megatron's layout: DIR/iter_0000010/model.safetensors (Hugging Face
// names, full tensors) and DIR/latest_checkpointed_iteration.txt holding "10".
#pragma once

#include "megart/param_store.h"

#include <cstdint>
#include <string>

namespace megart {

// DIR/iter_{iteration:07d}/model.safetensors
std::string checkpoint_path(const std::string &dir, int64_t iteration);

// Throws if `dir` exists and is not a folder (checked before training, so a bad --save fails
// before any work is done).
void check_checkpoint_dir(const std::string &dir);

// Creates the folders, writes the model file, then the tracker file; each write is atomic and
// the tracker only names a checkpoint that is complete. Returns the model file's path.
std::string save_checkpoint(const std::string &dir, int64_t iteration, const ParamStore &store);

// The same for a tensor-parallel store: collective over `tp` (every tp rank of one data-parallel
// replica calls it; other replicas hold the same weights and do not). tp rank 0 creates the
// folders and writes both files; the others only contribute their blocks.
std::string save_checkpoint(const std::string &dir, int64_t iteration, const ParamStore &store,
                            Communicator &tp);

// Pipeline parallelism (program.stages; `store` holds stage pp.rank()'s tensors): one file with
// every tensor of the model, the file a pp 1 program of the same model saves. Collective over
// `tp` and `pp` of one data-parallel replica: each stage assembles its tensors over tp, each
// stage's tp rank 0 sends the tensors no earlier stage holds to pp rank 0, and pp rank 0's tp
// rank 0 writes both files.
std::string save_checkpoint(const std::string &dir, int64_t iteration, const ParamStore &store,
                            Communicator &tp, Communicator &pp, const ProgramDesc &program);

} // namespace megart
