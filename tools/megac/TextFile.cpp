#include "TextFile.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/ToolOutputFile.h"

bool megac::writeTextFile(llvm::StringRef path, llvm::function_ref<void(llvm::raw_ostream &)> print) {
  std::error_code ec;
  llvm::ToolOutputFile file(path, ec, llvm::sys::fs::OF_Text); // removed again unless kept
  if (!ec) {
    print(file.os());
    file.os().flush();
    ec = file.os().error();
  }
  if (ec) {
    llvm::errs() << "megac compile: error: cannot write " << path << ": " << ec.message() << "\n";
    file.os().clear_error();
    return false;
  }
  file.keep();
  return true;
}
