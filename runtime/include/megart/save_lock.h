// One run at a time per --save folder: two runs saving into one folder would each print "saved"
// while the folder keeps one run's checkpoints and loses the other's. The first run takes an
// advisory lock (POSIX fcntl, which NFS honours) on SAVE/.megac-save.lock, which records its
// host, pid and start; a second run is refused before training, naming them. The lock goes with
// the process, so a killed run never leaves a folder locked.
#pragma once

#include <string>

namespace megart {

class SaveLock {
public:
  // Creates `dir` when missing (removed again by the destructor if the run saved nothing into it)
  // and locks it. Throws naming the holder when another process has it.
  static SaveLock acquire(const std::string &dir);
  SaveLock(SaveLock &&other) noexcept;
  SaveLock &operator=(SaveLock &&other) noexcept;
  ~SaveLock();

private:
  void release();
  SaveLock(std::string dir, int fd, bool created) : dir_(std::move(dir)), fd_(fd), created_(created) {}
  std::string dir_;
  int fd_ = -1;
  bool created_ = false; // the folder was made for this run
};

} // namespace megart
