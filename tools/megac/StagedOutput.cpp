#include "StagedOutput.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"

using namespace llvm;
using namespace megac;

static Error fail(const Twine &message) { return createStringError(inconvertibleErrorCode(), message); }

Expected<std::unique_ptr<StagedOutput>> StagedOutput::create(StringRef outArg) {
  if (outArg.trim().empty()) // else it would be the current folder
    return fail("-o is empty; give the output folder, such as -o out");
  SmallString<256> out(outArg);
  if (std::error_code ec = sys::fs::make_absolute(out))
    return fail("-o " + outArg + ": " + ec.message());
  sys::path::remove_dots(out, /*remove_dot_dot=*/true);
  StringRef parent = sys::path::parent_path(out), name = sys::path::filename(out);
  if (parent.empty() || name.empty() || name == "/")
    return fail("-o " + outArg + " is not a folder megac can write into; give a folder such as -o out");
  if (sys::fs::exists(out) && !sys::fs::is_directory(out))
    return fail("-o " + outArg + " is a file, not a folder; give a new or existing folder");

  // The first missing parent: created now, removed again if the compile fails.
  std::string createdParent;
  for (StringRef p = parent; !p.empty() && !sys::fs::exists(p); p = sys::path::parent_path(p))
    createdParent = p.str();
  if (std::error_code ec = sys::fs::create_directories(parent))
    return fail("cannot create the folder " + parent + " for -o " + outArg + ": " + ec.message());

  // Beside a new OUT (renamed to OUT at the end); inside an existing one (its files renamed out
  // of it), so that only OUT itself needs to be writable.
  const std::string pid = std::to_string(sys::Process::getProcessId());
  std::string staging = sys::fs::is_directory(out) ? (out + "/.megac-staging.tmp." + pid).str()
                                                   : (parent + "/" + name + ".tmp." + pid).str();
  sys::fs::remove_directories(staging); // a leftover of a killed compile that had our pid
  if (std::error_code ec = sys::fs::create_directory(staging, /*IgnoreExisting=*/false)) {
    if (!createdParent.empty())
      sys::fs::remove_directories(createdParent);
    return fail("cannot create the staging folder " + staging + " for -o " + outArg + ": " + ec.message() +
                "; check that the folder is writable");
  }
  return std::unique_ptr<StagedOutput>(new StagedOutput(out.str().str(), std::move(staging), std::move(createdParent)));
}

StagedOutput::~StagedOutput() {
  if (committed)
    return;
  sys::fs::remove_directories(staging);
  if (!createdParent.empty())
    sys::fs::remove_directories(createdParent);
}

Error StagedOutput::commit(ArrayRef<StringRef> ours) {
  auto in = [](StringRef dir, StringRef name) { return (dir + "/" + name).str(); };
  if (!sys::fs::exists(out)) {
    if (std::error_code ec = sys::fs::rename(staging, out))
      return fail("cannot move " + staging + " to " + out + ": " + ec.message());
    committed = true;
    return Error::success();
  }
  // An existing OUT: first remove what an earlier compile made and this one did not, then move
  // the new files in (each rename replaces one file at once).
  for (StringRef name : ours)
    if (!sys::fs::exists(in(staging, name)) && sys::fs::exists(in(out, name)))
      if (std::error_code ec = sys::fs::remove(in(out, name)))
        return fail("cannot remove the old " + in(out, name) + ": " + ec.message());
  for (StringRef name : ours)
    if (sys::fs::exists(in(staging, name)))
      if (std::error_code ec = sys::fs::rename(in(staging, name), in(out, name)))
        return fail("cannot move " + in(staging, name) + " to " + in(out, name) + ": " + ec.message());
  committed = true;
  sys::fs::remove_directories(staging);
  return Error::success();
}
