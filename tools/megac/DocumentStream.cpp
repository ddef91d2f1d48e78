#include "DocumentStream.h"

#include "llvm/ADT/Twine.h"
#include "llvm/Support/FileSystem.h"

#include <string>
#include <vector>

using namespace llvm;

namespace {

Error fail(StringRef path, const Twine &message) {
  return createStringError(inconvertibleErrorCode(), "--input " + path + ": " + message);
}

/// Builds the documents of one file from its bytes as they arrive.
class DocumentBuilder {
public:
  DocumentBuilder(StringRef path, bool splitParagraphs, uint64_t limit,
                  function_ref<Error(StringRef)> onDocument)
      : path(path), splitParagraphs(splitParagraphs), limit(limit), onDocument(onDocument) {}

  Error add(StringRef bytes) {
    if (!splitParagraphs)
      return append(document, bytes);
    while (!bytes.empty()) {
      auto [piece, rest] = bytes.split('\n');
      bool lineEnds = piece.size() < bytes.size();
      if (Error e = append(line, piece))
        return e;
      bytes = rest;
      if (lineEnds)
        if (Error e = endLine())
          return e;
    }
    return Error::success();
  }

  /// At the end of the file: its last line (if it has no '\n') and last document.
  Error finish() {
    if (!splitParagraphs)
      return onDocument(document);
    if (Error e = endLine())
      return e;
    return endParagraph();
  }

private:
  /// `to` += `bytes`, refusing to grow a document past the limit.
  Error append(std::string &to, StringRef bytes) {
    if (document.size() + line.size() + bytes.size() + 1 > limit)
      return fail(path, "a document is longer than " + Twine(limit) + " bytes (" + Twine(limit >> 20) +
                            " MiB), the most megac data holds in memory at once; cut the text into documents "
                            "(blank lines between paragraphs with --split-paragraphs, or several --input files)");
    to.append(bytes.data(), bytes.size());
    return Error::success();
  }

  // A blank line ends a paragraph; other lines join it, each ending in '\n'.
  Error endLine() {
    bool blank = StringRef(line).trim().empty();
    if (!blank)
      document += line + "\n";
    line.clear();
    return blank ? endParagraph() : Error::success();
  }

  Error endParagraph() {
    if (document.empty())
      return Error::success();
    Error e = onDocument(document);
    document.clear();
    return e;
  }

  StringRef path;
  bool splitParagraphs;
  uint64_t limit;
  function_ref<Error(StringRef)> onDocument;
  std::string document, line;
};

} // namespace

Error megac::readDocuments(StringRef path, bool splitParagraphs, const DocumentLimits &limits, uint64_t &bytesRead,
                           function_ref<Error(StringRef)> onDocument) {
  Expected<sys::fs::file_t> file = sys::fs::openNativeFileForRead(path);
  if (!file)
    return fail(path, "cannot read it: " + toString(file.takeError()));
  DocumentBuilder builder(path, splitParagraphs, limits.documentBytes, onDocument);
  std::vector<char> buffer(1 << 20);
  auto readAll = [&]() -> Error {
    while (true) {
      Expected<size_t> n = sys::fs::readNativeFile(*file, MutableArrayRef<char>(buffer));
      if (!n)
        return fail(path, "cannot read it: " + toString(n.takeError()));
      if (*n == 0)
        return builder.finish();
      bytesRead += *n;
      if (bytesRead > limits.inputBytes)
        return fail(path, "the inputs are longer than " + Twine(limits.inputBytes) + " bytes (" +
                              Twine(limits.inputBytes >> 30) +
                              " GiB), the most one megac data run reads; give fewer or smaller inputs and make "
                              "several datasets");
      if (Error e = builder.add(StringRef(buffer.data(), *n)))
        return e;
    }
  };
  Error result = readAll();
  sys::fs::closeFile(*file);
  return result;
}
