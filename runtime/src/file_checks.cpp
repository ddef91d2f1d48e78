#include "megart/file_checks.h"

#include "megart/error.h"

#include <cerrno>
#include <cstring>
#include <sys/stat.h>

namespace megart {

std::string file_kind(mode_t mode) {
  if (S_ISREG(mode))
    return "a file";
  if (S_ISDIR(mode))
    return "a folder";
  if (S_ISFIFO(mode))
    return "a pipe (FIFO)";
  if (S_ISCHR(mode))
    return "a character device";
  if (S_ISBLK(mode))
    return "a block device";
  if (S_ISSOCK(mode))
    return "a socket";
  return "not a file";
}

void require_regular_file(const std::string &path, const std::string &hint) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw Error(path + ": " + std::strerror(errno) + "; " + hint);
  if (!S_ISREG(st.st_mode))
    throw Error(path + " is not a regular file (" + file_kind(st.st_mode) + "); " + hint);
}

} // namespace megart
