// megac compile's output folder, written all at once: the files go to a fresh staging folder
// (OUT.tmp.<pid> beside a new OUT, OUT/.megac-staging.tmp.<pid> in an existing one), and commit()
// moves them into OUT only once everything succeeded. A compile
// that fails, at any step up to and including building OUT/train, leaves the previous OUT as it
// was (or no OUT), never a new main.cpp beside an old train.
#pragma once

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <string>

namespace megac {

class StagedOutput {
public:
  /// Creates the staging folder for `out` (and OUT's missing parent folders, removed again if
  /// nothing is committed). Fails naming -o OUT when OUT is a file or its folder not writable.
  static llvm::Expected<std::unique_ptr<StagedOutput>> create(llvm::StringRef out);
  /// Removes the staging folder (and the parents it created) unless committed.
  ~StagedOutput();
  StagedOutput(const StagedOutput &) = delete;
  StagedOutput &operator=(const StagedOutput &) = delete;

  /// Where to write: the staging folder.
  llvm::StringRef dir() const { return staging; }
  /// Moves the staged files into OUT (creating it). Of `ours` (every name a compile may write),
  /// those this compile did not stage are removed from OUT first: an earlier compile's train
  /// never stays beside this one's main.cpp. Other files in OUT are left alone.
  llvm::Error commit(llvm::ArrayRef<llvm::StringRef> ours);

private:
  StagedOutput(std::string out, std::string staging, std::string createdParent)
      : out(std::move(out)), staging(std::move(staging)), createdParent(std::move(createdParent)) {}

  std::string out, staging;
  std::string createdParent; // the first of OUT's parent folders this compile created, or ""
  bool committed = false;
};

} // namespace megac
