// Writes a file so that readers see either the old file or the complete new one, never half:
// data goes to a temporary name in the same folder (same filesystem, so rename is atomic) and
// is renamed over the target only by commit(). Dropping the object without commit() removes
// the temporary, so a failed write leaves nothing behind.
#pragma once

#include <cstddef>
#include <string>

namespace megart {

class AtomicFile {
public:
  explicit AtomicFile(std::string path);
  ~AtomicFile();
  AtomicFile(AtomicFile &&other) noexcept;
  AtomicFile &operator=(AtomicFile &&other) = delete;
  AtomicFile(const AtomicFile &) = delete;
  AtomicFile &operator=(const AtomicFile &) = delete;

  void write(const void *data, std::size_t bytes);
  // Bytes written so far.
  std::size_t size() const { return written_; }
  // Flushes to disk and renames the temporary over the target path.
  void commit();

  const std::string &path() const { return path_; }
  const std::string &temp_path() const { return temp_path_; }

private:
  std::string path_;
  std::string temp_path_;
  int fd_ = -1;
  std::size_t written_ = 0;
};

} // namespace megart
