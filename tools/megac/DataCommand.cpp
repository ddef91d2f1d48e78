// megac data: text or JSON lines -> Megatron indexed dataset(s), with megac's byte tokenizer
// (here, in C++) or a library tokenizer (Hugging Face tokenizers, SentencePiece: in Python, by
// megac_tokenizer.py). Beside each dataset, PREFIX.tokenizer.json records the tokenizer.
#include "Commands.h"
#include "DataProgress.h"
#include "DocumentStream.h"
#include "RepeatedFlags.h"
#include "TokenizerProcess.h"

#include "megart/atomic_file.h"
#include "megart/byte_tokenizer.h"
#include "megart/error.h"
#include "megart/indexed_dataset.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <memory>
#include <new>
#include <vector>

using namespace llvm;
namespace cl = llvm::cl;

namespace megac::cli {
extern cl::SubCommand data;
} // namespace megac::cli

namespace {
using megac::cli::data;

cl::list<std::string> inputs("input", cl::OneOrMore, cl::desc("a text or JSON-lines file (repeat for more)"),
                             cl::value_desc("FILE"), cl::sub(data));
cl::opt<std::string> outputPrefix("output-prefix", cl::Required,
                                  cl::desc("writes PREFIX.bin and PREFIX.idx; from JSON lines, "
                                           "PREFIX_KEY_document.bin/.idx per key (as Megatron)"),
                                  cl::sub(data), megac::recordValues<std::string>("--output-prefix"));
cl::opt<bool> splitParagraphs("split-paragraphs",
                              cl::desc("each blank-line-separated paragraph of a text input is a document "
                                       "(default: each file is one document)"),
                              cl::sub(data), megac::recordValues<bool>("--split-paragraphs"));
cl::opt<std::string> tokenizerType("tokenizer-type", cl::init("ByteTokenizer"),
                                   cl::desc("ByteTokenizer (megac's, vocab 257), GPT2BPETokenizer, "
                                            "BertWordPieceLowerCase, BertWordPieceCase, HuggingFaceTokenizer or "
                                            "SentencePieceTokenizer"),
                                   cl::sub(data), megac::recordValues<std::string>("--tokenizer-type"));
cl::opt<std::string> vocabFile("vocab-file", cl::desc("GPT2BPETokenizer's vocab.json; BertWordPiece*'s vocab.txt"),
                               cl::value_desc("FILE"),
                               cl::sub(data), megac::recordValues<std::string>("--vocab-file"));
cl::opt<std::string> mergeFile("merge-file", cl::desc("GPT2BPETokenizer's merges.txt"), cl::value_desc("FILE"),
                               cl::sub(data), megac::recordValues<std::string>("--merge-file"));
cl::opt<std::string> tokenizerModel("tokenizer-model",
                                    cl::desc("HuggingFaceTokenizer's tokenizer.json (or its folder); "
                                             "SentencePieceTokenizer's .model"),
                                    cl::value_desc("PATH"), cl::sub(data),
                                    megac::recordValues<std::string>("--tokenizer-model"));
cl::list<std::string> jsonKeys("json-keys", cl::CommaSeparated,
                               cl::desc("the inputs are JSON lines; tokenize these string fields (default: text)"),
                               cl::value_desc("KEY,..."), cl::sub(data));
cl::opt<bool> appendEod("append-eod", cl::init(true),
                        cl::desc("end each document with the tokenizer's end-of-document token (default: "
                                 "true; --append-eod=false leaves it out)"),
                        cl::sub(data), megac::recordValues<bool>("--append-eod"));
cl::opt<unsigned> workers("workers", cl::init(1), cl::desc("tokenizer processes (library tokenizers)"),
                          cl::sub(data), megac::recordValues<unsigned>("--workers"));

// A document is held in memory with its tokens (4 bytes each): 64 MiB of text takes 320 MiB.
// The byte tokenizer is for tests and small corpora: one run reads at most 16 GiB.
constexpr megac::DocumentLimits kLimits{uint64_t(1) << 26, uint64_t(1) << 34};
constexpr unsigned kMaxWorkers = 256;
const char *const kTokenizerTypes[] = {"ByteTokenizer",          "GPT2BPETokenizer",     "BertWordPieceLowerCase",
                                       "BertWordPieceCase",      "HuggingFaceTokenizer", "SentencePieceTokenizer"};

int fail(const Twine &message) {
  errs() << "megac data: error: " << message << "\n";
  return 1;
}

bool isJsonLines(StringRef path) { return path.ends_with(".json") || path.ends_with(".jsonl"); }

/// The flags that do not fit together, as an error message; none: std::nullopt.
std::optional<std::string> checkFlags(bool json) {
  if (!is_contained(kTokenizerTypes, StringRef(tokenizerType)))
    return "--tokenizer-type " + tokenizerType +
           ": unknown; use ByteTokenizer, GPT2BPETokenizer, BertWordPieceLowerCase, BertWordPieceCase, "
           "HuggingFaceTokenizer or SentencePieceTokenizer";
  if (workers < 1 || workers > kMaxWorkers)
    return "--workers " + std::to_string(workers) + ": must be 1 to " + std::to_string(kMaxWorkers);
  const bool bpe = tokenizerType == "GPT2BPETokenizer", wordPiece = StringRef(tokenizerType).starts_with("BertWordPiece");
  const bool model = tokenizerType == "HuggingFaceTokenizer" || tokenizerType == "SentencePieceTokenizer";
  if (!vocabFile.empty() && !bpe && !wordPiece)
    return "--vocab-file is GPT2BPETokenizer's (vocab.json) and BertWordPiece*'s (vocab.txt); --tokenizer-type is " +
           tokenizerType;
  if (!mergeFile.empty() && !bpe)
    return "--merge-file is GPT2BPETokenizer's; --tokenizer-type is " + tokenizerType;
  if (!tokenizerModel.empty() && !model)
    return "--tokenizer-model is HuggingFaceTokenizer's and SentencePieceTokenizer's; --tokenizer-type is " +
           tokenizerType;
  if (json && splitParagraphs)
    return std::string("--split-paragraphs is for text inputs; each JSON line is one document");
  // PREFIX names files (PREFIX.bin, PREFIX.idx): one ending in a folder separator names none.
  if (outputPrefix.empty() || StringRef(outputPrefix).ends_with("/") || llvm::sys::path::filename(outputPrefix) == "." ||
      llvm::sys::path::filename(outputPrefix) == "..")
    return "--output-prefix " + outputPrefix + " names a folder, not files; give the files' name too, e.g. " +
           "--output-prefix " + (outputPrefix.empty() ? std::string("data/") : outputPrefix +
                                 (StringRef(outputPrefix).ends_with("/") ? "" : "/")) + "corpus";
  for (const std::string &path : inputs)
    if (isJsonLines(path) != isJsonLines(inputs.front()) && jsonKeys.empty())
      return "--input " + inputs.front() + " and --input " + path +
             ": one is JSON lines (.json/.jsonl) and one text; make a dataset of each, or give --json-keys to "
             "read every input as JSON lines";
  return std::nullopt;
}

/// PREFIX.tokenizer.json: the tokenizer a dataset was made with (OUT/train checks the model's
/// vocabulary against it; checkpoints carry it on).
void writeTokenizerRecord(const std::string &prefix, StringRef json) {
  megart::AtomicFile file(prefix + ".tokenizer.json");
  file.write(json.data(), json.size());
  file.write("\n", 1);
  file.commit();
}

// The inputs' sizes together: what the progress line's ETA counts down.
uint64_t inputBytes() {
  uint64_t total = 0;
  for (const std::string &path : inputs) {
    uint64_t size = 0;
    if (!llvm::sys::fs::file_size(path, size))
      total += size;
  }
  return total;
}

int byteTokenizerData() {
  megart::IndexedDatasetWriter writer(outputPrefix, megart::dtype_for_vocab(megart::kByteVocabSize));
  int64_t documents = 0, tokens = 0;
  uint64_t bytesRead = 0;
  megac::DataProgress progress(inputBytes());
  for (const std::string &path : inputs) {
    Error e = megac::readDocuments(path, splitParagraphs, kLimits, bytesRead, [&](StringRef doc) -> Error {
      std::vector<int32_t> ids = megart::byte_tokenizer::encode(std::string_view(doc.data(), doc.size()));
      if (appendEod)
        ids.push_back(megart::kEndOfDocument);
      tokens += ids.size();
      writer.add_document(ids);
      ++documents;
      progress.update(documents, bytesRead);
      return Error::success();
    });
    if (e)
      return fail(toString(std::move(e)) + "; nothing was written");
  }
  writer.finalize();
  progress.finish(documents, bytesRead);
  writeTokenizerRecord(outputPrefix, R"({"tokenizer_type": "ByteTokenizer", "vocab_size": )" +
                                         std::to_string(megart::kByteVocabSize) +
                                         R"(, "eod": )" + std::to_string(megart::kEndOfDocument) +
                                         R"(, "special_tokens": {"eos_token": {"id": )" +
                                         std::to_string(megart::kEndOfDocument) + R"(, "content": null}}})");
  outs() << "megac data: wrote " << outputPrefix << ".bin/.idx: " << documents << " documents, " << tokens
         << " tokens (ByteTokenizer, vocab " << megart::kByteVocabSize << ")\n";
  return 0;
}

int libraryTokenizerData(bool json) {
  std::vector<std::string> args = {"--tokenizer-type", tokenizerType, "--workers", std::to_string(workers),
                                   "--input-format", json ? "jsonl" : "text"};
  for (const std::string &path : inputs)
    args.insert(args.end(), {"--input", path});
  for (const std::string &key : jsonKeys)
    args.insert(args.end(), {"--json-keys", key});
  for (auto [flag, value] : {std::pair{"--vocab-file", &vocabFile}, std::pair{"--merge-file", &mergeFile},
                             std::pair{"--tokenizer-model", &tokenizerModel}})
    if (!value->empty())
      args.insert(args.end(), {flag, *value});
  if (splitParagraphs)
    args.push_back("--split-paragraphs");
  if (appendEod)
    args.push_back("--append-eod");

  struct Output {
    std::string prefix;
    std::unique_ptr<megart::IndexedDatasetWriter> writer;
    int64_t documents = 0, tokens = 0;
  };
  std::vector<Output> outputs;
  megac::TokenizerHeader header;
  Error e = megac::runTokenizer(
      args,
      [&](const megac::TokenizerHeader &h) -> Error {
        header = h;
        for (const std::string &key : h.keys) {
          std::string prefix = json ? outputPrefix + "_" + key + "_document" : std::string(outputPrefix);
          outputs.push_back({prefix, std::make_unique<megart::IndexedDatasetWriter>(
                                         prefix, megart::dtype_for_vocab(h.vocabSize))});
        }
        return Error::success();
      },
      [&](size_t key, const std::vector<int32_t> &ids) -> Error {
        Output &out = outputs[key];
        for (int32_t id : ids)
          if (id < 0 || id >= header.vocabSize)
            return createStringError(inconvertibleErrorCode(), "the tokenizer gave id " + std::to_string(id) +
                                                                   ", outside its vocabulary of " +
                                                                   std::to_string(header.vocabSize));
        out.writer->add_document(ids);
        ++out.documents;
        out.tokens += ids.size();
        return Error::success();
      });
  if (e)
    return fail(toString(std::move(e)) + "; nothing was written");
  for (Output &out : outputs)
    out.writer->finalize();
  for (Output &out : outputs) {
    writeTokenizerRecord(out.prefix, header.json);
    outs() << "megac data: wrote " << out.prefix << ".bin/.idx: " << out.documents << " documents, "
           << out.tokens << " tokens (" << tokenizerType << ", vocab " << header.vocabSize << ")\n";
  }
  return 0;
}

} // namespace

namespace {

// The writers stage PREFIX.bin in a temporary file; leaving this scope early, by an error or an
// exception, removes it, so a failed run writes nothing.
int writeDatasets(bool json) {
  try {
    if (tokenizerType == "ByteTokenizer" && !json)
      return byteTokenizerData();
    return libraryTokenizerData(json);
  } catch (const megart::Error &e) {
    return fail(e.what());
  } catch (const std::bad_alloc &) {
    return fail("out of memory while reading the inputs; nothing was written");
  }
}

} // namespace

int megac::runData() {
  if (std::optional<std::string> conflict = conflictingFlagValues())
    return fail(*conflict);
  bool json = !jsonKeys.empty() || isJsonLines(inputs.front());
  if (std::optional<std::string> problem = checkFlags(json))
    return fail(*problem);
  // PREFIX's folder is made as `mkdir -p` would (Megatron's preprocess_data.py expects it to
  // exist; a user giving data/corpus means data/), and removed again if the run fails.
  const std::string folder = llvm::sys::path::parent_path(outputPrefix).str();
  std::vector<std::string> made; // the folders this run creates, deepest first
  for (StringRef f = folder; !f.empty() && !llvm::sys::fs::exists(f); f = llvm::sys::path::parent_path(f))
    made.push_back(f.str());
  if (!made.empty())
    if (std::error_code ec = llvm::sys::fs::create_directories(folder))
      return fail("--output-prefix " + outputPrefix + ": cannot create the folder " + folder + ": " + ec.message());
  const int code = writeDatasets(json);
  if (code != 0)
    for (const std::string &f : made)
      llvm::sys::fs::remove(f); // only while empty: nothing but this run wrote there
  return code;
}
