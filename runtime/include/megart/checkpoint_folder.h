// A checkpoint folder's tracker and iteration folders, as Megatron names them: read by OUT/train's
// --load (train_checkpoint.h) and by megac generate, which finds the iteration to compile for
// before anything runs (it links this file, not the whole runtime).
#pragma once

#include <cstdint>
#include <string>

namespace megart {

constexpr const char *kTrackerFile = "latest_checkpointed_iteration.txt";

std::string iteration_folder(const std::string &dir, int64_t iteration); // DIR/iter_{:07d}
std::string tracker_path(const std::string &dir);

// The iteration DIR's tracker names, or -1 when DIR has no tracker. Throws when the tracker
// holds anything but a non-negative integer.
int64_t read_tracker(const std::string &dir);

} // namespace megart
