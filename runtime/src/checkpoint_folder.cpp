#include "megart/checkpoint_folder.h"

#include "megart/error.h"
#include "megart/file_checks.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

namespace megart {

namespace fs = std::filesystem;

std::string iteration_folder(const std::string &dir, int64_t iteration) {
  char name[32];
  std::snprintf(name, sizeof name, "iter_%07lld", static_cast<long long>(iteration));
  return (fs::path(dir) / name).string();
}

std::string tracker_path(const std::string &dir) { return (fs::path(dir) / kTrackerFile).string(); }

int64_t read_tracker(const std::string &dir) {
  const std::string path = tracker_path(dir);
  std::error_code ec;
  if (!fs::exists(path, ec))
    return -1;
  std::string text = read_small_file(path, "a checkpoint's tracker", "a checkpoint's tracker is a file megac writes");
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' '))
    text.pop_back();
  const bool digits = !text.empty() && text.size() <= 12 &&
                      std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits)
    throw Error(path + ": holds \"" + text.substr(0, 40) + "\", not an iteration number; write the iteration of "
                "the checkpoint to load into it (e.g. 1000), or name its iteration folder (" +
                iteration_folder(dir, 1000) + ") instead");
  return std::stoll(text);
}

} // namespace megart
