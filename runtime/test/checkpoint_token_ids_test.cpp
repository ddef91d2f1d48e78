#include "megart/generation_config.h"
#include "megart/json.h"
#include "megart/tokenizer_record.h"

#include "expect_error.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

namespace fs = std::filesystem;

namespace {

// PREFIX.tokenizer.json with `record` in a fresh folder, read back; files named in it live there too.
struct RecordFolder {
  fs::path dir = fs::temp_directory_path() / ("megart-token-ids-" + std::to_string(::getpid()));
  RecordFolder() { fs::create_directories(dir); }
  ~RecordFolder() { fs::remove_all(dir); }
  void write(const std::string &name, const std::string &text) const { std::ofstream(dir / name) << text; }
  megart::TokenizerRecord read(const std::string &record) const {
    write("data.tokenizer.json", record);
    return *megart::read_tokenizer_record((dir / "data").string());
  }
  std::string file(const megart::TokenizerRecord &r, const std::string &name) const {
    for (const auto &[n, content] : megart::tokenizer_checkpoint_files(r))
      if (n == name)
        return content;
    return "";
  }
};

const char *const kGpt2Config = "{\n  \"model_type\": \"gpt2\",\n  \"vocab_size\": 300\n}\n";

} // namespace

// The special tokens megac data records give config.json's ids and generation_config.json as
// transformers writes it (GenerationConfig.from_model_config(config).save_pretrained).
TEST(CheckpointTokenIds, ConfigAndGenerationConfigCarryTheIds) {
  RecordFolder f;
  const megart::TokenizerRecord r = f.read(
      R"({"tokenizer_type": "HuggingFaceTokenizer", "vocab_size": 300, "eod": 2, "special_tokens": )"
      R"({"bos_token": {"id": 1, "content": "<s>"}, "eos_token": {"id": 2, "content": "</s>"}}, "files": {}})");
  EXPECT_EQ(megart::config_with_token_ids(kGpt2Config, r),
            "{\n  \"bos_token_id\": 1,\n  \"eos_token_id\": 2,\n  \"model_type\": \"gpt2\",\n  \"vocab_size\": 300\n}\n");
  EXPECT_EQ(megart::generation_config_json(r), "{\n  \"_from_model_config\": true,\n  \"bos_token_id\": 1,\n"
                                               "  \"eos_token_id\": 2,\n  \"transformers_version\": \"4.40.2\"\n}\n");
  // The tokenizer_config.json megac writes for it names the tokens (AutoTokenizer's eos_token).
  const megart::JsonValue config = megart::parse_json(f.file(r, "tokenizer_config.json"), "tokenizer_config.json");
  EXPECT_EQ(config.get("eos_token")->string, "</s>");
  EXPECT_EQ(config.get("bos_token")->string, "<s>");
  EXPECT_EQ(config.get("tokenizer_class")->string, "PreTrainedTokenizerFast");
}

// A tokenizer without a bos says so (null, not the family's default); the byte tokenizer's end
// of document has no text and no tokenizer_config.json; an older record's eod is its eos.
TEST(CheckpointTokenIds, NoneIsMadeUp) {
  RecordFolder f;
  const megart::TokenizerRecord bytes = f.read(R"({"tokenizer_type": "ByteTokenizer", "vocab_size": 257, "eod": 256})");
  ASSERT_TRUE(bytes.eos);
  EXPECT_EQ(bytes.eos->id, 256);
  EXPECT_FALSE(bytes.bos);
  EXPECT_NE(megart::config_with_token_ids(kGpt2Config, bytes).find("\"bos_token_id\": null"), std::string::npos);
  EXPECT_EQ(megart::generation_config_json(bytes).find("bos_token_id"), std::string::npos);
  EXPECT_EQ(f.file(bytes, "tokenizer_config.json"), "");
  const megart::TokenizerRecord gpt2 = f.read(R"({"tokenizer_type": "GPT2BPETokenizer", "vocab_size": 300, "eod": 299})");
  ASSERT_TRUE(gpt2.bos && gpt2.eos);
  EXPECT_EQ(gpt2.bos->content, "<|endoftext|>");
  EXPECT_EQ(gpt2.eos->id, 299);
  const megart::TokenizerRecord none = f.read(R"({"tokenizer_type": "HuggingFaceTokenizer", "vocab_size": 300, )"
                                              R"("eod": null, "special_tokens": {}})");
  EXPECT_FALSE(none.eos || none.bos || none.pad);
  EXPECT_EQ(megart::generation_config_json(none),
            "{\n  \"_from_model_config\": true,\n  \"transformers_version\": \"4.40.2\"\n}\n");
}

// The tokenizer's own tokenizer_config.json goes as it is, or with the eos_token or the class it
// lacks added.
TEST(CheckpointTokenIds, OwnTokenizerConfigIsCompletedNotReplaced) {
  RecordFolder f;
  const std::string own = R"({"model_max_length": 1000000000000000019884624838656, "eos_token": "</s>", )"
                          R"("tokenizer_class": "LlamaTokenizerFast"})";
  f.write("tokenizer_config.json", own);
  const std::string record = R"({"tokenizer_type": "HuggingFaceTokenizer", "vocab_size": 300, "special_tokens": )"
                             R"({"eos_token": {"id": 2, "content": "</s>"}}, "files": {"tokenizer_config": ")" +
                             (f.dir / "tokenizer_config.json").string() + "\"}}";
  EXPECT_EQ(f.file(f.read(record), "tokenizer_config.json"), own);
  f.write("tokenizer_config.json", R"({"bos_token": "<s>", "model_max_length": 1000000000000000019884624838656})");
  const std::string rewritten = f.file(f.read(record), "tokenizer_config.json");
  // Completed, its integers stay integers (transformers wrote this one; 1e+30 would read back a float).
  EXPECT_NE(rewritten.find("\"model_max_length\": 1000000000000000019884624838656,"), std::string::npos) << rewritten;
  const megart::JsonValue completed = megart::parse_json_wide(rewritten, "tokenizer_config.json");
  EXPECT_EQ(completed.get("bos_token")->string, "<s>");
  EXPECT_EQ(completed.get("eos_token")->string, "</s>");
  EXPECT_EQ(completed.get("tokenizer_class")->string, "PreTrainedTokenizerFast");
}

// A special token outside the vocabulary is refused by name.
TEST(CheckpointTokenIds, BadSpecialTokenIsNamed) {
  RecordFolder f;
  expect_error([&] {
    f.read(R"({"tokenizer_type": "HuggingFaceTokenizer", "vocab_size": 300, "special_tokens": )"
           R"({"eos_token": {"id": 300, "content": "</s>"}}})");
  }, {"special_tokens.eos_token is", "below vocab_size 300", "remake the dataset"});
}

// format_json writes what Python's json.dumps(indent=2) writes; set_member keeps keys sorted.
TEST(CheckpointTokenIds, JsonIsWrittenAsPythonWritesIt) {
  megart::JsonValue v = megart::parse_json(R"({"a": 16.0, "c": [1, 1e-05, "x"], "d": {}, "e": []})", "test");
  megart::set_member(v, "b", megart::json_null());
  EXPECT_EQ(megart::format_json(v),
            "{\n  \"a\": 16.0,\n  \"b\": null,\n  \"c\": [\n    1,\n    1e-05,\n    \"x\"\n  ],\n  \"d\": {},\n"
            "  \"e\": []\n}");
  EXPECT_EQ(megart::parse_json_wide("1000000000000000019884624838656", "test").number, 1e30);
  // Written back as the integer it was (transformers' model_max_length), not as the float 1e+30.
  EXPECT_EQ(megart::format_json(megart::parse_json_wide(R"({"model_max_length": 1000000000000000019884624838656, )"
                                                        R"("x": -99999999999999999999})", "test")),
            "{\n  \"model_max_length\": 1000000000000000019884624838656,\n  \"x\": -99999999999999999999\n}");
  EXPECT_NE(error_of([] { megart::parse_json("1000000000000000019884624838656", "test"); }), "");
}
