// megac data: text files -> Megatron indexed dataset with the built-in byte tokenizer.
#include "Commands.h"
#include "DocumentStream.h"
#include "RepeatedFlags.h"

#include "megart/byte_tokenizer.h"
#include "megart/error.h"
#include "megart/indexed_dataset.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

#include <new>

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
                                  cl::desc("writes PREFIX.bin and PREFIX.idx"), cl::sub(data),
                                  megac::recordValues<std::string>("--output-prefix"));
cl::opt<bool> splitParagraphs("split-paragraphs",
                              cl::desc("each blank-line-separated paragraph is a document "
                                       "(default: each file is one document)"),
                              cl::sub(data), megac::recordValues<bool>("--split-paragraphs"));

// A document is held in memory with its tokens (4 bytes each): 64 MiB of text takes 320 MiB.
// The byte tokenizer is for tests and small corpora: one run reads at most 16 GiB.
constexpr megac::DocumentLimits kLimits{uint64_t(1) << 26, uint64_t(1) << 34};

int fail(const Twine &message) {
  errs() << "megac data: error: " << message << "\n";
  return 1;
}

} // namespace

int megac::runData() {
  if (std::optional<std::string> conflict = conflictingFlagValues())
    return fail(*conflict);
  // The writer stages PREFIX.bin in a temporary file; leaving this scope early, by an error or
  // an exception, removes it, so a failed run writes nothing.
  try {
    megart::IndexedDatasetWriter writer(outputPrefix, megart::dtype_for_vocab(megart::kByteVocabSize));
    int64_t documents = 0, tokens = 0;
    uint64_t bytesRead = 0;
    for (const std::string &path : inputs) {
      Error e = readDocuments(path, splitParagraphs, kLimits, bytesRead, [&](StringRef doc) -> Error {
        std::vector<int32_t> ids = megart::byte_tokenizer::encode(std::string_view(doc.data(), doc.size()));
        ids.push_back(megart::kEndOfDocument); // Megatron's --append-eod
        tokens += ids.size();
        writer.add_document(ids);
        ++documents;
        return Error::success();
      });
      if (e)
        return fail(toString(std::move(e)) + "; nothing was written");
    }
    writer.finalize();
    outs() << "megac data: wrote " << outputPrefix << ".bin/.idx: " << documents << " documents, " << tokens
           << " tokens (byte tokenizer, vocab " << megart::kByteVocabSize << ")\n";
    return 0;
  } catch (const megart::Error &e) {
    return fail(e.what());
  } catch (const std::bad_alloc &) {
    return fail("out of memory while reading the inputs; nothing was written");
  }
}
