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

// GPT-2's single special token: its end of text, also its begin (GPT2Tokenizer's defaults).
constexpr const char *kGpt2EndOfText = "<|endoftext|>";

// Sets a tokenizer_config.json's KEY ("eos_token", ...) to the token's text, unless the
// tokenizer's own config already names one (it is what the token was read from). Returns
// whether it changed the config.
bool name_token(JsonValue &config, const char *key, const std::optional<SpecialToken> &token) {
  const JsonValue *there = config.get(key);
  if (!token || token->content.empty() || (there && there->kind != JsonValue::Kind::Null))
    return false;
  set_member(config, key, json_string(token->content));
  return true;
}

// What transformers' AutoTokenizer needs besides the files: which class reads them, and the
// special tokens' texts (its eos_token, bos_token and pad_token attributes).
std::string tokenizer_config(const TokenizerRecord &r, const std::string &own_config) {
  JsonValue config = own_config.empty() ? parse_json("{}", "tokenizer_config")
                                        : parse_json_wide(own_config, r.path + ": its tokenizer_config.json");
  if (!config.is_object())
    throw Error(r.path + ": the tokenizer's tokenizer_config.json holds " + config.brief() +
                ", not a JSON object; fix or remove it and remake the dataset");
  if (own_config.empty()) {
    if (r.type == "GPT2BPETokenizer") {
      set_member(config, "tokenizer_class", json_string("GPT2Tokenizer"));
      set_member(config, "unk_token", json_string(kGpt2EndOfText));
    } else if (r.type == "BertWordPieceLowerCase" || r.type == "BertWordPieceCase") { // BERT's own names
      set_member(config, "tokenizer_class", json_string("BertTokenizer"));
      set_member(config, "do_lower_case", json_bool(r.type == "BertWordPieceLowerCase"));
    } else if (r.type == "SentencePieceTokenizer") { // the model's pieces, nothing added
      set_member(config, "tokenizer_class", json_string("LlamaTokenizer"));
      set_member(config, "add_bos_token", json_bool(false));
      set_member(config, "add_eos_token", json_bool(false));
      set_member(config, "legacy", json_bool(true));
    }
  }
  // A config that names no class would be read by the class of the folder's config.json
  // (GPT2TokenizerFast, whose default tokens are not this tokenizer's): tokenizer.json's own.
  const bool classless = !config.get("tokenizer_class");
  if (classless)
    set_member(config, "tokenizer_class", json_string("PreTrainedTokenizerFast"));
  // `|`, not `||`: every token is named.
  const bool named = name_token(config, "bos_token", r.bos) | name_token(config, "eos_token", r.eos) |
                     name_token(config, "pad_token", r.pad);
  // The tokenizer's own file goes as it is unless something was added to it.
  return !own_config.empty() && !named && !classless ? own_config : format_json(config) + "\n";
}

// special_tokens.KEY of a record: {"id": ID, "content": TEXT}, the id inside the vocabulary.
std::optional<SpecialToken> special_token(const TokenizerRecord &r, const JsonValue &tokens, const char *key) {
  const JsonValue *t = tokens.get(key);
  if (!t || t->kind == JsonValue::Kind::Null)
    return std::nullopt;
  const JsonValue *id = t->is_object() ? t->get("id") : nullptr;
  const JsonValue *content = t->is_object() ? t->get("content") : nullptr;
  if (!id || !id->is_integer() || id->integer < 0 || id->integer >= r.vocab_size ||
      (content && !content->is_string() && content->kind != JsonValue::Kind::Null))
    throw Error(r.path + ": special_tokens." + key + " is " + t->brief() + "; it must be {\"id\": ID, \"content\": "
                "TEXT} with an id below vocab_size " + std::to_string(r.vocab_size) +
                " (megac data writes it): remake the dataset with megac data");
  return SpecialToken{id->integer, content && content->is_string() ? content->string : std::string()};
}

// The special tokens of a record: "special_tokens" as megac data writes it, or, in a record of
// an older megac, the end of document ("eod") as the eos.
void read_special_tokens(TokenizerRecord &r, const JsonValue &record) {
  if (const JsonValue *tokens = record.get("special_tokens")) {
    if (!tokens->is_object())
      throw Error(r.path + ": special_tokens is " + tokens->brief() + ", not an object; remake the dataset with "
                  "megac data");
    r.bos = special_token(r, *tokens, "bos_token");
    r.eos = special_token(r, *tokens, "eos_token");
    r.pad = special_token(r, *tokens, "pad_token");
    r.cls = special_token(r, *tokens, "cls_token");
    r.sep = special_token(r, *tokens, "sep_token");
    r.mask = special_token(r, *tokens, "mask_token");
    return;
  }
  const JsonValue *eod = record.get("eod");
  if (!eod || !eod->is_integer() || eod->integer < 0 || eod->integer >= r.vocab_size)
    return; // none recorded: the tokenizer's ids are not known, and none is made up
  r.eos = SpecialToken{eod->integer, r.type == "GPT2BPETokenizer" ? kGpt2EndOfText : ""};
  if (r.type == "GPT2BPETokenizer")
    r.bos = r.eos;
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
  read_special_tokens(r, record);
  return r;
}

std::vector<std::pair<std::string, std::string>> tokenizer_checkpoint_files(const TokenizerRecord &r) {
  std::vector<std::pair<std::string, std::string>> out = {{"megac_tokenizer.json", r.json}};
  // Hugging Face's names for each role's file.
  static const std::map<std::string, std::string> kNames = {
      {"vocab_file", "vocab.json"}, {"merge_file", "merges.txt"}, {"wordpiece_vocab", "vocab.txt"},
      {"tokenizer_config", "tokenizer_config.json"}};
  std::string own_config; // the tokenizer's own tokenizer_config.json, completed below
  for (const auto &[role, path] : r.files) {
    std::string name;
    if (role == "tokenizer_model")
      name = r.type == "SentencePieceTokenizer" ? "tokenizer.model" : "tokenizer.json";
    else if (auto it = kNames.find(role); it != kNames.end())
      name = it->second;
    else
      continue; // a role this runtime does not know: the record keeps its path
    if (name == "tokenizer_config.json")
      own_config = read_file(path, r.path + ": " + role);
    else
      out.emplace_back(name, read_file(path, r.path + ": " + role));
  }
  // The byte tokenizer has no class in transformers: no tokenizer_config.json.
  if (r.type != "ByteTokenizer")
    out.emplace_back("tokenizer_config.json", tokenizer_config(r, own_config));
  return out;
}

} // namespace megart
