#include "megart/save_lock.h"

#include "megart/error.h"

#include <cerrno>
#include <climits>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <filesystem>
#include <string>
#include <unistd.h>

namespace megart {

namespace {

constexpr const char *kLockFile = ".megac-save.lock";

std::string holder_text() {
  char host[HOST_NAME_MAX + 1] = {};
  ::gethostname(host, sizeof host - 1);
  char when[64] = {};
  const std::time_t now = std::time(nullptr);
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", std::localtime(&now));
  return std::string("host ") + host + ", pid " + std::to_string(::getpid()) + ", since " + when;
}

std::string read_holder(int fd) {
  char buf[512] = {};
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  std::string text(buf, n > 0 ? static_cast<size_t>(n) : 0);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\0'))
    text.pop_back();
  return text.empty() ? "a process that recorded nothing" : text;
}

} // namespace

SaveLock SaveLock::acquire(const std::string &dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const bool created = !fs::exists(dir, ec);
  fs::create_directories(dir, ec);
  if (ec)
    throw Error("--save " + dir + ": cannot create the folder: " + ec.message());
  const std::string path = (fs::path(dir) / kLockFile).string();
  // O_NOFOLLOW: a link planted as the lock file is not written through.
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) {
    const std::string why = std::strerror(errno);
    if (created)
      fs::remove(dir, ec);
    throw Error("--save " + dir + ": cannot open its lock file " + path + ": " + why);
  }
  struct flock lock {};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  if (::fcntl(fd, F_SETLK, &lock) != 0) {
    const int e = errno;
    const std::string holder = read_holder(fd);
    ::close(fd);
    if (e == EACCES || e == EAGAIN)
      throw Error("--save " + dir + " is in use by another run (" + holder + "): two runs saving into one folder "
                  "would replace each other's checkpoints. Save elsewhere, or wait for that run to end");
    throw Error("--save " + dir + ": cannot lock " + path + ": " + std::strerror(e));
  }
  const std::string text = holder_text() + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    throw Error("--save " + dir + ": cannot write its lock file " + path + ": " + why);
  }
  return SaveLock(dir, fd, created);
}

SaveLock::SaveLock(SaveLock &&other) noexcept
    : dir_(std::move(other.dir_)), fd_(other.fd_), created_(other.created_) {
  other.fd_ = -1;
}

SaveLock &SaveLock::operator=(SaveLock &&other) noexcept {
  if (this != &other) {
    release();
    dir_ = std::move(other.dir_);
    fd_ = other.fd_;
    created_ = other.created_;
    other.fd_ = -1;
  }
  return *this;
}

SaveLock::~SaveLock() { release(); }

void SaveLock::release() {
  if (fd_ < 0)
    return;
  namespace fs = std::filesystem;
  std::error_code ec;
  // A folder made for this run that holds nothing but the lock goes again (a run that stopped
  // before its first save leaves nothing behind). The lock file stays otherwise: removing it
  // while another run waits to open it would let two runs lock two different files.
  if (created_) {
    bool only_lock = true;
    for (const auto &e : fs::directory_iterator(dir_, ec))
      only_lock = only_lock && e.path().filename() == kLockFile;
    if (only_lock && !ec) {
      fs::remove(fs::path(dir_) / kLockFile, ec);
      fs::remove(dir_, ec);
    }
  }
  ::close(fd_);
  fd_ = -1;
}

} // namespace megart
