#include "megart/file_checks.h"

#include "megart/error.h"

#include <cerrno>
#include <cstring>
#include <fstream>
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

std::string read_small_file(const std::string &path, const std::string &what, const std::string &hint,
                            size_t max_bytes) {
  require_regular_file(path, hint);
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw Error(path + ": " + std::strerror(errno) + "; " + hint);
  const size_t size = static_cast<size_t>(st.st_size);
  if (size > max_bytes)
    throw Error(path + ": " + std::to_string(size) + " bytes; " + what + " is far smaller (megac reads at most " +
                std::to_string(max_bytes >> 20) + " MiB of it): is this the right file?");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error(path + ": cannot open: " + std::strerror(errno));
  std::string text(size, '\0'); // a file growing meanwhile is read up to the size checked
  in.read(text.data(), static_cast<std::streamsize>(size));
  text.resize(static_cast<size_t>(in.gcount()));
  return text;
}

} // namespace megart
