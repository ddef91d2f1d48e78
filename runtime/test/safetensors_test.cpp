#include "megart/error.h"

#include "expect_error.h"
#include "megart/json.h"
#include "megart/safetensors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <string>

namespace fs = std::filesystem;
using megart::NamedTensor;
using megart::SafetensorsFile;
using ::testing::HasSubstr;

namespace {

std::string read_file(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

class SafetensorsTest : public ::testing::Test {
protected:
  void SetUp() override {
    char tmpl[] = "/tmp/megart-st-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/model.safetensors";
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A file with the given header text (unpadded) and data bytes, as another writer might make.
  void craft(const std::string &header, const std::string &data, int64_t length_override = -1) {
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    uint64_t n = length_override >= 0 ? static_cast<uint64_t>(length_override) : header.size();
    out.write(reinterpret_cast<const char *>(&n), 8);
    out << header << data;
  }

  std::string dir_, path_;
};

} // namespace

TEST_F(SafetensorsTest, RoundTrip) {
  std::vector<float> a = {1.5f, -2.25f, 3.0f, 1e-30f};
  std::vector<float> b = {0, 1, 2, 3, 4, 5};
  float scalar = 7.0f;
  megart::write_safetensors(path_,
                            {{"transformer.wte.weight", {2, 3}, b.data()},
                             {"lm.bias", {4}, a.data()},
                             {"empty", {0, 5}, nullptr},
                             {"scale", {}, &scalar}},
                            {{"format", "pt"}, {"note", "quote \" and \\ and \n"}});
  SafetensorsFile f = SafetensorsFile::open(path_);
  EXPECT_EQ(f.names(),
            (std::vector<std::string>{"empty", "lm.bias", "scale", "transformer.wte.weight"}));
  EXPECT_EQ(f.metadata().at("format"), "pt");
  EXPECT_EQ(f.metadata().at("note"), "quote \" and \\ and \n");
  const megart::TensorInfo *info = f.find("transformer.wte.weight");
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->dtype, "F32");
  EXPECT_EQ(info->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(f.find("nope"), nullptr);
  EXPECT_EQ(f.read_f32("transformer.wte.weight", {2, 3}), b);
  EXPECT_EQ(f.read_f32("lm.bias", {4}), a);
  EXPECT_EQ(f.read_f32("scale", {}), std::vector<float>{7.0f});
  EXPECT_TRUE(f.read_f32("empty", {0, 5}).empty());
}

TEST_F(SafetensorsTest, WriterLayoutMatchesPythonLibrary) {
  std::vector<float> x = {1, 2}, y = {3};
  megart::write_safetensors(path_, {{"y", {1}, y.data()}, {"x", {2}, x.data()}},
                            {{"format", "pt"}});
  const std::string bytes = read_file(path_);
  uint64_t n;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  const std::string header = bytes.substr(8, n);
  // Compact JSON, metadata first, keys sorted, data in key order, padded with spaces.
  const std::string json = "{\"__metadata__\":{\"format\":\"pt\"},"
                           "\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                           "\"y\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}";
  EXPECT_EQ(header.substr(0, json.size()), json);
  EXPECT_EQ(header.substr(json.size()), std::string(n - json.size(), ' '));
  ASSERT_EQ(bytes.size(), 8 + n + 12);
  float data[3];
  std::memcpy(data, bytes.data() + 8 + n, 12);
  EXPECT_EQ(data[0], 1);
  EXPECT_EQ(data[1], 2);
  EXPECT_EQ(data[2], 3);
}

TEST_F(SafetensorsTest, WriteIsAtomicAndValidated) {
  std::vector<float> x = {1, 2};
  expect_error([&] { megart::write_safetensors(path_, {{"a", {2}, x.data()}, {"a", {2}, x.data()}}); },
               {"tensor 'a' is given twice"});
  expect_error([&] { megart::write_safetensors(path_, {{"a", {2}, nullptr}}); },
               {"tensor 'a' has shape [2] but no data pointer"});
  expect_error([&] { megart::write_safetensors(path_, {{"__metadata__", {2}, x.data()}}); },
               {"cannot write a tensor named '__metadata__'"});
  expect_error([&] { megart::write_safetensors(path_, {{"a", {-1}, x.data()}}); },
               {"tensor 'a' has shape [-1]"});
  EXPECT_TRUE(fs::is_empty(dir_)) << "a failed write left files behind";
}

TEST_F(SafetensorsTest, ReadsBF16AndF16AsFloat) {
  // bf16: 1, -2, 0.15625 (0x3E20), +inf.  f16: 1, -2, 65504 (max), 2^-24 (smallest subnormal),
  // 0.000061035156 (2^-14, smallest normal), -0.
  const uint16_t bf16[4] = {0x3F80, 0xC000, 0x3E20, 0x7F80};
  const uint16_t f16[6] = {0x3C00, 0xC000, 0x7BFF, 0x0001, 0x0400, 0x8000};
  std::string data(reinterpret_cast<const char *>(bf16), 8);
  data.append(reinterpret_cast<const char *>(f16), 12);
  craft("{\"b\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[0,8]},"
        "\"h\":{\"dtype\":\"F16\",\"shape\":[6],\"data_offsets\":[8,20]}}",
        data);
  SafetensorsFile f = SafetensorsFile::open(path_);
  std::vector<float> b = f.read_f32("b", {2, 2});
  EXPECT_EQ(b[0], 1.0f);
  EXPECT_EQ(b[1], -2.0f);
  EXPECT_EQ(b[2], 0.15625f);
  EXPECT_EQ(b[3], std::numeric_limits<float>::infinity());
  std::vector<float> h = f.read_f32("h", {6});
  EXPECT_EQ(h[0], 1.0f);
  EXPECT_EQ(h[1], -2.0f);
  EXPECT_EQ(h[2], 65504.0f);
  EXPECT_EQ(h[3], std::ldexp(1.0f, -24));
  EXPECT_EQ(h[4], std::ldexp(1.0f, -14));
  EXPECT_EQ(h[5], 0.0f);
  EXPECT_TRUE(std::signbit(h[5]));
}

TEST_F(SafetensorsTest, MissingTensorListsSimilarNames) {
  std::vector<float> x(4, 0);
  megart::write_safetensors(path_, {{"transformer.h.0.attn.c_attn.weight", {4}, x.data()},
                                    {"transformer.h.0.attn.c_attn.bias", {4}, x.data()},
                                    {"transformer.wte.weight", {4}, x.data()},
                                    {"lm_head.weight", {4}, x.data()}});
  SafetensorsFile f = SafetensorsFile::open(path_);
  try {
    f.read_f32("transformer.h.0.attn.c_proj.weight", {4});
    FAIL() << "expected megart::Error";
  } catch (const megart::Error &e) {
    const std::string msg = e.what();
    EXPECT_THAT(msg, HasSubstr("no tensor named 'transformer.h.0.attn.c_proj.weight'"));
    EXPECT_THAT(msg, HasSubstr("the file has 4 tensors"));
    // The closest names come first.
    EXPECT_THAT(msg, HasSubstr("for example 'transformer.h.0.attn.c_attn.bias', "
                               "'transformer.h.0.attn.c_attn.weight', 'transformer.wte.weight'"));
  }
}

TEST_F(SafetensorsTest, WrongShapeNamesTensorAndBothShapes) {
  std::vector<float> x(6, 0);
  megart::write_safetensors(path_, {{"w", {2, 3}, x.data()}});
  SafetensorsFile f = SafetensorsFile::open(path_);
  expect_error([&] { f.read_f32("w", {3, 2}); },
               {path_, "tensor 'w' has shape [2, 3]", "model expects [3, 2]"});
}

TEST_F(SafetensorsTest, UnsupportedDtypeOnRead) {
  craft("{\"ids\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[0,16]}}", std::string(16, '\0'));
  SafetensorsFile f = SafetensorsFile::open(path_); // any valid dtype opens
  expect_error([&] { f.read_f32("ids", {2}); },
               {"tensor 'ids' has dtype I64", "supported dtypes are F32, BF16 and F16"});
}

TEST_F(SafetensorsTest, BadHeaderLength) {
  {
    std::ofstream out(path_, std::ios::binary);
    out << "abc";
  }
  expect_error([&] { SafetensorsFile::open(path_); }, {"3 bytes is too small"});
  craft("{}", "", 1000);
  expect_error([&] { SafetensorsFile::open(path_); },
               {"bad header length", "JSON header has 1000 bytes, but only 2 bytes follow"});
  expect_error([&] { SafetensorsFile::open(dir_ + "/absent.safetensors"); },
               {dir_ + "/absent.safetensors", "cannot open"});
}

TEST_F(SafetensorsTest, InvalidJson) {
  craft("{\"a\": {\"dtype\": \"F32\", \"shape\": [1] \"data_offsets\": [0, 4]}}", std::string(4, '\0'));
  expect_error([&] { SafetensorsFile::open(path_); },
               {path_ + ": header: invalid JSON at byte 36", "expected '}' or ',' in object"});
  craft("[1, 2]", "");
  expect_error([&] { SafetensorsFile::open(path_); }, {"header is a JSON array, expected an object"});
  craft("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
        "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
        std::string(4, '\0'));
  expect_error([&] { SafetensorsFile::open(path_); }, {"duplicate key \"a\""});
}

TEST_F(SafetensorsTest, BadTensorEntries) {
  const std::string data(16, '\0');
  craft("{\"a\":{\"dtype\":\"F33\",\"shape\":[1],\"data_offsets\":[0,4]}}", data);
  expect_error([&] { SafetensorsFile::open(path_); }, {"tensor 'a': unknown dtype \"F33\""});
  craft("{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", data);
  expect_error([&] { SafetensorsFile::open(path_); }, {"tensor 'a': shape [1.5]"});
  craft("{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", data);
  expect_error([&] { SafetensorsFile::open(path_); },
               {"tensor 'a': \"data_offsets\" is missing"});
  craft("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,4]}}", data);
  expect_error([&] { SafetensorsFile::open(path_); }, {"\"data_offsets\" is [8,4]"});
  craft("{\"__metadata__\":{\"step\":3}}", "");
  expect_error([&] { SafetensorsFile::open(path_); },
               {"__metadata__[\"step\"] is 3, expected a string"});
}

TEST_F(SafetensorsTest, OffsetsOutOfRange) {
  craft("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", std::string(12, '\0'));
  expect_error([&] { SafetensorsFile::open(path_); },
               {"tensor 'a': data_offsets [0, 16] run past the end of the data section (12 bytes)"});
}

TEST_F(SafetensorsTest, OverlappingTensors) {
  craft("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
        "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
        std::string(12, '\0'));
  expect_error([&] { SafetensorsFile::open(path_); },
               {"tensors 'a' (bytes 0..8) and 'b' (bytes 4..12) overlap"});
}

TEST_F(SafetensorsTest, ByteSizeMismatch) {
  craft("{\"a\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[0,24]}}", std::string(24, '\0'));
  expect_error([&] { SafetensorsFile::open(path_); },
               {"dtype BF16 and shape [2, 3] need 12 bytes, but data_offsets [0, 24] hold 24"});
}

// The JSON reader behind the header.
TEST(SafetensorsJson, ParsesWhatHeadersUse) {
  megart::JsonValue v = megart::parse_json(
      " {\"k\\\"ey\": [1, -2, 9007199254740993], \"s\": \"caf\\u00e9 \\ud83d\\ude00 \\n\\t\\/\","
      " \"o\": {\"t\": true, \"f\": false, \"n\": null, \"x\": 1.5e3}} ",
      "test");
  ASSERT_TRUE(v.is_object());
  const megart::JsonValue *arr = v.get("k\"ey");
  ASSERT_NE(arr, nullptr);
  ASSERT_EQ(arr->array.size(), 3u);
  EXPECT_EQ(arr->array[1].integer, -2);
  EXPECT_EQ(arr->array[2].integer, 9007199254740993); // exact beyond double precision
  EXPECT_EQ(v.get("s")->string, "caf\xc3\xa9 \xf0\x9f\x98\x80 \n\t/");
  const megart::JsonValue *o = v.get("o");
  EXPECT_TRUE(o->get("t")->boolean);
  EXPECT_EQ(o->get("n")->kind, megart::JsonValue::Kind::Null);
  EXPECT_EQ(o->get("x")->kind, megart::JsonValue::Kind::Number);
  EXPECT_EQ(o->get("x")->number, 1500.0);
  EXPECT_EQ(megart::json_quote("a\"b\\c\n\x01"), "\"a\\\"b\\\\c\\n\\u0001\"");
}

TEST(SafetensorsJson, RejectsMalformedText) {
  auto bad = [](const std::string &text, const std::string &why) {
    expect_error([&] { megart::parse_json(text, "h"); }, {"h: invalid JSON", why});
  };
  bad("", "expected a value");
  bad("{\"a\" 1}", "expected ':' after object key");
  bad("[1, 2", "expected ']' or ','");
  bad("\"abc", "unterminated string");
  bad("\"a\\qb\"", "unknown escape");
  bad("\"\\ud800\"", "high surrogate");
  bad("01", "malformed number");
  bad("99999999999999999999", "does not fit in 64 bits");
  bad("{} x", "unexpected text after the end");
  bad(std::string(100, '[') + std::string(100, ']'), "nesting deeper than 64");
}
