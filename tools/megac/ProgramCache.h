// Compiled programs kept between calls (megac generate's): a model's program is compiled once
// and reused while the spec, the compile flags, megac and its runtime stay the same.
//
//   CACHE/programs/<key>/   what `megac compile SPEC -o` wrote (train, main.cpp, ...) and
//                           cache-key.txt, the text <key> hashes
// CACHE is $MEGAC_CACHE_DIR, else $XDG_CACHE_HOME/megac, else $HOME/.cache/megac. A program is
// compiled into CACHE/programs/<key>.tmp.<pid>-<random> and renamed into place whole, so that
// concurrent calls never see half a program: the first rename wins, the others use its program.
// A compile also removes what a rebuilt megac can no longer use (programs of an earlier build of
// the same megac, staging folders last written over an hour ago: a compile takes seconds). Removing CACHE (or one
// entry) at any time only costs a compile.
#pragma once

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>

namespace megac {

struct CachedProgram {
  std::string dir;       // the entry: dir/train is the program
  bool compiled = false; // false: an earlier call compiled it
  double seconds = 0;    // the compile's, when compiled
};

/// The cache folder, as above; fails when none of the variables gives one.
llvm::Expected<std::string> programCacheDir();

/// The program `megac compile SPEC <compileFlags>` makes of `specText`, from the cache or
/// compiled into it by running `megac` (the executable running now, whose identity is part of
/// the key with the runtime library's). The compile's own errors are on stderr; the error
/// returned names the step, and nothing is left in the cache.
llvm::Expected<CachedProgram> cachedProgram(llvm::StringRef specText, llvm::ArrayRef<std::string> compileFlags,
                                            llvm::StringRef megac);

} // namespace megac
