#include "megart/atomic_file.h"

#include "megart/crash_point.h"
#include "megart/error.h"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace megart {

namespace {
std::string errno_text() { return std::strerror(errno); }
} // namespace

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  // pid + counter: two writers of the same target (in any processes) never share a temporary.
  static std::atomic<unsigned> counter{0};
  temp_path_ = path_ + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0)
    throw Error(path_ + ": cannot create temporary file " + temp_path_ + ": " + errno_text() +
                "; check that the folder exists and is writable");
}

AtomicFile::AtomicFile(AtomicFile &&other) noexcept
    : path_(std::move(other.path_)), temp_path_(std::move(other.temp_path_)), fd_(other.fd_),
      written_(other.written_) {
  other.fd_ = -1;
  other.temp_path_.clear();
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(temp_path_.c_str());
  }
}

void AtomicFile::write(const void *data, std::size_t bytes) {
  if (fd_ < 0)
    throw Error(path_ + ": write after commit");
  const char *p = static_cast<const char *>(data);
  while (bytes > 0) {
    ssize_t n = ::write(fd_, p, bytes);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      throw Error(path_ + ": writing " + temp_path_ + " failed after " + std::to_string(written_) +
                  " bytes: " + errno_text() + "; check free disk space");
    }
    p += n;
    bytes -= static_cast<std::size_t>(n);
    written_ += static_cast<std::size_t>(n);
  }
}

void AtomicFile::commit() {
  if (fd_ < 0)
    throw Error(path_ + ": commit called twice");
  // fsync before rename: otherwise a crash can leave the new name pointing at missing data.
  if (::fsync(fd_) != 0)
    throw Error(path_ + ": fsync of " + temp_path_ + " failed: " + errno_text());
  crash_point("atomic-file:synced");
  int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) {
    ::unlink(temp_path_.c_str());
    throw Error(path_ + ": closing " + temp_path_ + " failed: " + errno_text());
  }
  if (std::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    std::string why = errno_text();
    ::unlink(temp_path_.c_str());
    throw Error(path_ + ": renaming " + temp_path_ + " into place failed: " + why);
  }
}

} // namespace megart
