#include "ProgramCache.h"

#include "MegacPaths.h"
#include "RunCommand.h"
#include "TextFile.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Chrono.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/SHA256.h"

#include <chrono>
#include <cstdlib>

using namespace llvm;

namespace megac {

namespace {

Error fail(const Twine &message) { return createStringError(inconvertibleErrorCode(), message); }

/// A file as the key knows it: its path, then a line a rebuild changes (its size and time).
std::string identity(StringRef name, StringRef path) {
  sys::fs::file_status status;
  std::string build = "missing";
  if (!sys::fs::status(path, status))
    build = ("size " + Twine(status.getSize()) + " modified " +
             Twine(status.getLastModificationTime().time_since_epoch().count()))
                .str();
  return (name + ": " + path + "\n" + name + " build: " + build + "\n").str();
}

/// What decides the program: megac and its runtime, the flags, then the spec.
std::string keyText(StringRef specText, ArrayRef<std::string> compileFlags, StringRef megac) {
  std::string flags;
  for (const std::string &f : compileFlags)
    flags += " " + f;
  return "megac compile's program, for megac generate\n" + identity("megac", megac) +
         identity("runtime", megacPaths().runtimeLibrary) + "compile flags:" + flags + "\nspec:\n" + specText.str();
}

std::string hashOf(StringRef text) {
  std::array<uint8_t, 32> digest = SHA256::hash(arrayRefFromStringRef(text));
  return toHex(ArrayRef<uint8_t>(digest).take_front(16), /*LowerCase=*/true);
}

constexpr char kKeyFile[] = "cache-key.txt";

/// An entry is whole when its key is ours (not another spec's hash twin) and its program runs.
bool usable(StringRef entry, StringRef key) {
  Expected<std::string> recorded = readTextFile(joinPath(entry, kKeyFile), uint64_t(1) << 26, "cache key");
  if (!recorded) {
    consumeError(recorded.takeError());
    return false;
  }
  return *recorded == key && sys::fs::can_execute(joinPath(entry, "train"));
}

/// Staging folders of compiles killed before they could remove them (a stop signal removes its
/// own): any older than an hour, when no compile takes nearly as long.
void removeAbandonedStaging(StringRef programs) {
  std::error_code ec;
  const auto hourAgo = std::chrono::system_clock::now() - std::chrono::hours(1);
  for (sys::fs::directory_iterator it(programs, ec), end; it != end && !ec; it.increment(ec)) {
    if (!StringRef(sys::path::filename(it->path())).contains(".tmp."))
      continue;
    sys::fs::file_status status;
    if (!sys::fs::status(it->path(), status) && status.getLastModificationTime() < hourAgo)
      sys::fs::remove_directories(it->path());
  }
}

/// Programs an earlier build of this megac (the same path, another build line) compiled: it
/// never reuses them again. Those of other megac installations stay.
void removeOutdated(StringRef programs, StringRef key) {
  SmallVector<StringRef> ours;
  key.split(ours, '\n', /*MaxSplit=*/5);
  std::error_code ec;
  for (sys::fs::directory_iterator it(programs, ec), end; it != end && !ec; it.increment(ec)) {
    if (StringRef(sys::path::filename(it->path())).contains(".tmp."))
      continue;
    Expected<std::string> text = readTextFile(joinPath(it->path(), kKeyFile), uint64_t(1) << 26, "cache key");
    if (!text) {
      consumeError(text.takeError());
      continue;
    }
    SmallVector<StringRef> theirs;
    StringRef(*text).split(theirs, '\n', /*MaxSplit=*/5);
    // Lines 1-4: "megac: PATH", "megac build: ...", "runtime: PATH", "runtime build: ...".
    if (theirs.size() > 4 && theirs[1] == ours[1] && theirs[3] == ours[3] &&
        (theirs[2] != ours[2] || theirs[4] != ours[4]))
      sys::fs::remove_directories(it->path());
  }
}

/// Removes the staging folder however the compile ends (also when a stop signal ends it).
struct StagingFolder {
  std::string path;
  ~StagingFolder() {
    if (!path.empty())
      sys::fs::remove_directories(path);
  }
};

} // namespace

Expected<std::string> programCacheDir() {
  auto variable = [](const char *name) -> std::string {
    const char *v = std::getenv(name);
    return v ? v : "";
  };
  std::string dir = variable("MEGAC_CACHE_DIR");
  if (dir.empty() && !variable("XDG_CACHE_HOME").empty())
    dir = joinPath(variable("XDG_CACHE_HOME"), "megac");
  if (dir.empty() && !variable("HOME").empty())
    dir = joinPath(joinPath(variable("HOME"), ".cache"), "megac");
  if (dir.empty())
    return fail("no folder for compiled programs: HOME, XDG_CACHE_HOME and MEGAC_CACHE_DIR are all unset; set "
                "MEGAC_CACHE_DIR to a folder megac may write");
  SmallString<256> absolute(dir);
  if (std::error_code ec = sys::fs::make_absolute(absolute))
    return fail("the program cache " + dir + ": " + ec.message());
  return std::string(absolute);
}

Expected<CachedProgram> cachedProgram(StringRef specText, ArrayRef<std::string> compileFlags, StringRef megac) {
  Expected<std::string> cache = programCacheDir();
  if (!cache)
    return cache.takeError();
  const std::string programs = joinPath(*cache, "programs");
  if (std::error_code ec = sys::fs::create_directories(programs))
    return fail("cannot create the program cache " + programs + ": " + ec.message() +
                "; set MEGAC_CACHE_DIR to a folder megac may write");
  const std::string key = keyText(specText, compileFlags, megac), hash = hashOf(key);
  const std::string entry = joinPath(programs, hash);
  if (usable(entry, key))
    return CachedProgram{entry, false, 0};

  removeAbandonedStaging(programs);
  removeOutdated(programs, key);
  if (usable(entry, key)) // another call finished it meanwhile
    return CachedProgram{entry, false, 0};
  const std::string pid = std::to_string(sys::Process::getProcessId());
  if (sys::fs::exists(entry)) { // damaged (a file deleted by hand): compiled again below
    errs() << "megac generate: the cached program " << entry << " is incomplete; compiling it again\n";
    const std::string aside = entry + ".tmp." + pid + "-damaged";
    if (!sys::fs::rename(entry, aside))
      sys::fs::remove_directories(aside);
  }
  StagingFolder staging;
  SmallString<256> unique;
  for (int attempt = 0; attempt < 16 && staging.path.empty(); ++attempt) {
    sys::fs::createUniquePath(entry + ".tmp." + pid + "-%%%%%%", unique, /*MakeAbsolute=*/false);
    if (!sys::fs::create_directory(unique, /*IgnoreExisting=*/false))
      staging.path = std::string(unique);
  }
  if (staging.path.empty())
    return fail("cannot create a staging folder in the program cache " + programs +
                "; set MEGAC_CACHE_DIR to a folder megac may write");
  const std::string spec = joinPath(staging.path, "spec.yaml"), out = joinPath(staging.path, "program");
  if (!writeTextFile(spec, [&](raw_ostream &os) { os << specText; }))
    return fail("cannot write the spec into the program cache (the error is above)");
  std::vector<std::string> compile = {megac.str(), "compile", spec};
  compile.insert(compile.end(), compileFlags.begin(), compileFlags.end());
  compile.insert(compile.end(), {"-o", out});
  const auto start = std::chrono::steady_clock::now();
  if (Error e = runCommand(compile, "compiling the model's spec", StringRef(joinPath(staging.path, "compile.log"))))
    return std::move(e);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!writeTextFile(joinPath(out, kKeyFile), [&](raw_ostream &os) { os << key; }))
    return fail("cannot write the cache key (the error is above)");
  if (std::error_code ec = sys::fs::rename(out, entry)) {
    if (usable(entry, key)) // a concurrent call's rename came first: its program is the same
      return CachedProgram{entry, true, seconds};
    return fail("cannot move the compiled program " + out + " to " + entry + ": " + ec.message());
  }
  return CachedProgram{entry, true, seconds};
}

} // namespace megac
