// megac data's library tokenizers: runs megac_tokenizer.py (Hugging Face tokenizers,
// SentencePiece) in Python and reads the token ids of each document from its output.
#pragma once

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace megac {

/// What megac_tokenizer.py says of the tokenizer before the documents: its description as one
/// JSON object (recorded beside the dataset), the vocabulary size and the JSON keys read.
struct TokenizerHeader {
  std::string json;
  int64_t vocabSize = 0;
  std::vector<std::string> keys;
};

/// Runs `python megac_tokenizer.py encode-corpus ARGS...`; calls onHeader once, then onDocument
/// for each document and JSON key (the key's index in the header's keys). Fails, naming what,
/// if Python cannot be run, the script fails (its own error is on stderr already), or its
/// output is cut short or malformed.
llvm::Error runTokenizer(llvm::ArrayRef<std::string> args,
                         llvm::function_ref<llvm::Error(const TokenizerHeader &)> onHeader,
                         llvm::function_ref<llvm::Error(size_t key, const std::vector<int32_t> &ids)> onDocument);

/// The Python that runs it, as a full path: $MEGAC_PYTHON, else the build tree's build/pyenv when
/// megac runs from there and it is present, else python3 from PATH (an installed megac: README).
std::string tokenizerPython();

} // namespace megac
