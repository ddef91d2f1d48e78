#include "TextFile.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"

llvm::Expected<std::string> megac::readTextFile(llvm::StringRef path, uint64_t maxBytes, llvm::StringRef what) {
  auto fail = [&](const llvm::Twine &why) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "cannot read " + what + " " + path + ": " + why);
  };
  llvm::Expected<llvm::sys::fs::file_t> file = llvm::sys::fs::openNativeFileForRead(path);
  if (!file)
    return fail(llvm::toString(file.takeError()));
  std::string text;
  char buffer[1 << 16];
  while (true) {
    llvm::Expected<size_t> n = llvm::sys::fs::readNativeFile(*file, llvm::MutableArrayRef<char>(buffer));
    if (!n) {
      llvm::sys::fs::closeFile(*file);
      return fail(llvm::toString(n.takeError()));
    }
    if (*n == 0)
      break;
    if (text.size() + *n > maxBytes) {
      llvm::sys::fs::closeFile(*file);
      return fail("it is larger than " + llvm::Twine(maxBytes >> 10) + " KiB, more than any " + what +
                  " needs; check the path");
    }
    text.append(buffer, *n);
  }
  llvm::sys::fs::closeFile(*file);
  return text;
}

bool megac::writeTextFile(llvm::StringRef path, llvm::function_ref<void(llvm::raw_ostream &)> print) {
  std::error_code ec;
  llvm::ToolOutputFile file(path, ec, llvm::sys::fs::OF_Text); // removed again unless kept
  if (!ec) {
    print(file.os());
    file.os().flush();
    ec = file.os().error();
  }
  if (ec) {
    llvm::errs() << "megac: error: cannot write " << path << ": " << ec.message() << "\n";
    file.os().clear_error();
    return false;
  }
  file.keep();
  return true;
}

llvm::Expected<llvm::json::Object> megac::readJsonObject(llvm::StringRef path, uint64_t maxBytes,
                                                         const llvm::Twine &what) {
  llvm::Expected<std::string> text = readTextFile(path, maxBytes, "file");
  if (!text)
    return text.takeError();
  llvm::Expected<llvm::json::Value> value = llvm::json::parse(*text);
  if (!value)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   what + ": not JSON (" + llvm::toString(value.takeError()) + ")");
  if (llvm::json::Object *object = value->getAsObject())
    return std::move(*object);
  return llvm::createStringError(llvm::inconvertibleErrorCode(), what + ": holds no JSON object");
}

std::string megac::joinPath(llvm::StringRef dir, const llvm::Twine &a, const llvm::Twine &b, const llvm::Twine &c) {
  llvm::SmallString<256> path(dir);
  llvm::sys::path::append(path, a, b, c);
  return std::string(path);
}
