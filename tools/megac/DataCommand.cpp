// megac data: text files -> Megatron indexed dataset with the built-in byte tokenizer.
#include "Commands.h"

#include "megart/byte_tokenizer.h"
#include "megart/error.h"
#include "megart/indexed_dataset.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;
namespace cl = llvm::cl;

namespace megac::cli {
extern cl::SubCommand data;
} // namespace megac::cli

namespace {
using megac::cli::data;

cl::list<std::string> inputs("input", cl::OneOrMore, cl::desc("a text file (repeat for more)"),
                             cl::value_desc("FILE"), cl::sub(data));
cl::opt<std::string> outputPrefix("output-prefix", cl::Required,
                                  cl::desc("writes PREFIX.bin and PREFIX.idx"), cl::sub(data));
cl::opt<bool> splitParagraphs("split-paragraphs",
                              cl::desc("each blank-line-separated paragraph is a document "
                                       "(default: each file is one document)"),
                              cl::sub(data));

/// Documents of one file: the whole file, or its paragraphs.
std::vector<std::string> documentsOf(StringRef text) {
  if (!splitParagraphs)
    return {text.str()};
  std::vector<std::string> docs;
  std::string current;
  SmallVector<StringRef> lines;
  text.split(lines, '\n');
  for (StringRef line : lines) {
    if (line.trim().empty()) {
      if (!current.empty())
        docs.push_back(std::move(current));
      current.clear();
      continue;
    }
    current += line.str() + "\n";
  }
  if (!current.empty())
    docs.push_back(std::move(current));
  return docs;
}

} // namespace

int megac::runData() {
  try {
    megart::IndexedDatasetWriter writer(outputPrefix, megart::dtype_for_vocab(megart::kByteVocabSize));
    int64_t documents = 0, tokens = 0;
    for (const std::string &path : inputs) {
      auto file = MemoryBuffer::getFile(path);
      if (!file) {
        errs() << "megac data: error: cannot read --input " << path << ": " << file.getError().message()
               << "; nothing was written\n";
        return 1;
      }
      for (const std::string &doc : documentsOf((*file)->getBuffer())) {
        std::vector<int32_t> ids = megart::byte_tokenizer::encode(doc);
        ids.push_back(megart::kEndOfDocument); // Megatron's --append-eod
        tokens += ids.size();
        writer.add_document(ids);
        ++documents;
      }
    }
    writer.finalize();
    outs() << "megac data: wrote " << outputPrefix << ".bin/.idx: " << documents << " documents, " << tokens
           << " tokens (byte tokenizer, vocab " << megart::kByteVocabSize << ")\n";
    return 0;
  } catch (const megart::Error &e) {
    errs() << "megac data: error: " << e.what() << "\n";
    return 1;
  }
}
