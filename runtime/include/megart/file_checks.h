// What a path is, said in words, before it is read: a pipe would block a read and a device
// (/dev/zero) never end it, a folder reads as nonsense. Every file megart reads by name is a
// regular file (or a link to one).
#pragma once

#include <cstddef>
#include <string>
#include <sys/types.h>

namespace megart {

// "a folder", "a pipe (FIFO)", "a character device", ... for a stat mode.
std::string file_kind(mode_t mode);

// Throws megart::Error "PATH is not a regular file (a folder); HINT" unless `path` is a regular
// file or a link to one; a missing path says so.
void require_regular_file(const std::string &path, const std::string &hint);

// The whole of `path`, a small text file read by name (a config, a state, an index): a regular
// file (else require_regular_file's error with `hint`) whose size is checked before anything is
// read, so a huge file costs no memory: past `max_bytes` it is refused as not being `what`
// ("PEFT's adapter_config.json"), which is far smaller.
std::string read_small_file(const std::string &path, const std::string &what, const std::string &hint,
                            size_t max_bytes = size_t(16) << 20);

} // namespace megart
