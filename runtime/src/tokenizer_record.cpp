#include "megart/tokenizer_record.h"

#include "megart/error.h"
#include "megart/json.h"

#include <filesystem>
#include <fstream>
#include <sstream>

namespace megart {

namespace {

constexpr uintmax_t kMaxTokenizerFileBytes = uintmax_t(1) << 28;

std::string read_file(const std::string &path, const std::string &what) {
  std::error_code ec;
  const uintmax_t bytes = std::filesystem::file_size(path, ec);
  if (ec)
    throw Error(what + " " + path + ": cannot read it (" + ec.message() +
                "); the tokenizer's files must stay where megac data found them");
  if (bytes > kMaxTokenizerFileBytes)
    throw Error(what + " " + path + ": " + std::to_string(bytes) + " bytes, more than a tokenizer file has (256 MiB)");
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// What transformers' AutoTokenizer needs besides the files: which class reads them.
std::string tokenizer_config(const TokenizerRecord &r) {
  if (r.type == "GPT2BPETokenizer")
    return R"({"tokenizer_class": "GPT2Tokenizer", "bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>", )"
           R"("unk_token": "<|endoftext|>"})";
  if (r.type == "SentencePieceTokenizer") // the model's pieces, nothing added
    return R"({"tokenizer_class": "LlamaTokenizer", "add_bos_token": false, "add_eos_token": false, "legacy": true})";
  return R"({"tokenizer_class": "PreTrainedTokenizerFast"})";
}

} // namespace

std::optional<TokenizerRecord> read_tokenizer_record(const std::string &prefix) {
  TokenizerRecord r;
  r.path = prefix + ".tokenizer.json";
  std::ifstream in(r.path);
  if (!in)
    return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  r.json = text.str();
  const JsonValue record = parse_json(r.json, r.path);
  const JsonValue *type = record.get("tokenizer_type"), *vocab = record.get("vocab_size");
  if (!type || !type->is_string() || !vocab || !vocab->is_integer())
    throw Error(r.path + ": needs a string tokenizer_type and an integer vocab_size (megac data writes it); "
                "remake the dataset with megac data, or delete the file");
  r.type = type->string;
  r.vocab_size = vocab->integer;
  if (const JsonValue *files = record.get("files"); files && files->is_object())
    for (const auto &[role, path] : files->object)
      if (path.is_string())
        r.files[role] = path.string;
  return r;
}

std::vector<std::pair<std::string, std::string>> tokenizer_checkpoint_files(const TokenizerRecord &r) {
  std::vector<std::pair<std::string, std::string>> out = {{"megac_tokenizer.json", r.json}};
  // Hugging Face's names for each role's file.
  static const std::map<std::string, std::string> kNames = {
      {"vocab_file", "vocab.json"}, {"merge_file", "merges.txt"}, {"tokenizer_config", "tokenizer_config.json"}};
  bool has_config = false;
  for (const auto &[role, path] : r.files) {
    std::string name;
    if (role == "tokenizer_model")
      name = r.type == "SentencePieceTokenizer" ? "tokenizer.model" : "tokenizer.json";
    else if (auto it = kNames.find(role); it != kNames.end())
      name = it->second;
    else
      continue; // a role this runtime does not know: the record keeps its path
    has_config |= name == "tokenizer_config.json";
    out.emplace_back(name, read_file(path, r.path + ": " + role));
  }
  if (!has_config && r.type != "ByteTokenizer")
    out.emplace_back("tokenizer_config.json", tokenizer_config(r));
  return out;
}

} // namespace megart
