// What a path is, said in words, before it is read: a pipe would block a read and a device
// (/dev/zero) never end it, a folder reads as nonsense. Every file megart reads by name is a
// regular file (or a link to one).
#pragma once

#include <string>
#include <sys/types.h>

namespace megart {

// "a folder", "a pipe (FIFO)", "a character device", ... for a stat mode.
std::string file_kind(mode_t mode);

// Throws megart::Error "PATH is not a regular file (a folder); HINT" unless `path` is a regular
// file or a link to one; a missing path says so.
void require_regular_file(const std::string &path, const std::string &hint);

} // namespace megart
