// megac data's reading: one input file, read in pieces (never whole: an input may be a device or
// a pipe that never ends), cut into documents, each bounded in size before it is handed on.
#pragma once

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>

namespace megac {

struct DocumentLimits {
  uint64_t documentBytes; // one document, held in memory with its tokens (4 bytes each)
  uint64_t inputBytes;    // all inputs of one run together
};

/// Reads `path` and calls `onDocument` with each document: the whole file, or with
/// `splitParagraphs` each blank-line-separated paragraph (its lines each ending in '\n').
/// `bytesRead` counts across calls, against limits.inputBytes. Errors name --input PATH, what
/// went wrong and, for a limit, the limit and how to stay under it.
llvm::Error readDocuments(llvm::StringRef path, bool splitParagraphs, const DocumentLimits &limits,
                          uint64_t &bytesRead, llvm::function_ref<llvm::Error(llvm::StringRef)> onDocument);

} // namespace megac
