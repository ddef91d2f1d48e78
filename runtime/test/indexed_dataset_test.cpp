#include "megart/atomic_file.h"

#include "expect_error.h"
#include "megart/error.h"
#include "megart/indexed_dataset.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <string>

namespace fs = std::filesystem;
using megart::IndexedDataset;
using megart::IndexedDatasetWriter;
using megart::TokenDType;
using ::testing::HasSubstr;

namespace {

class DataTest : public ::testing::Test {
protected:
  void SetUp() override {
    char tmpl[] = "/tmp/megart-data-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string prefix(const std::string &name = "corpus") const { return dir_ + "/" + name; }

  // Documents {10,11,12,13,14}, {} (empty), {20,21,22}, {30,31,32,33}.
  std::string write_sample_dataset(TokenDType dtype = TokenDType::UInt16) {
    IndexedDatasetWriter w(prefix(), dtype);
    w.add_document({10, 11, 12, 13, 14});
    w.add_document({});
    w.add_document({20, 21, 22});
    w.add_document({30, 31, 32, 33});
    w.finalize();
    return prefix();
  }

  std::string dir_;
};

std::string read_file(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_file(const std::string &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

template <typename T> void poke(std::string &bytes, size_t offset, T value) {
  std::memcpy(bytes.data() + offset, &value, sizeof value);
}

// Runs `fn`, expects megart::Error, and checks that the message contains every fragment.
// Offsets in the .idx of the sample dataset: 3 sequences, 5 document index entries.
constexpr size_t kVersionAt = 9, kDtypeAt = 17, kCountAt = 18, kDocCountAt = 26, kSizesAt = 34;
constexpr size_t kPointersAt = kSizesAt + 3 * 4, kDocsAt = kPointersAt + 3 * 8;
constexpr size_t kIdxBytes = kDocsAt + 5 * 8;

} // namespace

TEST_F(DataTest, RoundTripUInt16) {
  IndexedDataset ds = IndexedDataset::open(write_sample_dataset());
  EXPECT_EQ(ds.dtype(), TokenDType::UInt16);
  EXPECT_EQ(ds.num_sequences(), 3); // the empty document adds no sequence
  EXPECT_EQ(ds.num_documents(), 4);
  EXPECT_EQ(ds.document_index(), (std::vector<int64_t>{0, 1, 1, 2, 3}));
  EXPECT_EQ(ds.num_tokens(), 12);
  EXPECT_EQ(ds.sequence_length(1), 3);
  EXPECT_EQ(ds.sequence(0), (std::vector<int32_t>{10, 11, 12, 13, 14}));
  EXPECT_EQ(ds.sequence(2), (std::vector<int32_t>{30, 31, 32, 33}));
  EXPECT_EQ(fs::file_size(prefix() + ".bin"), 12u * 2);
}

TEST_F(DataTest, RoundTripInt32KeepsLargeIds) {
  IndexedDatasetWriter w(prefix(), TokenDType::Int32);
  w.add_document({0, 70000, 128255});
  w.finalize();
  IndexedDataset ds = IndexedDataset::open(prefix());
  EXPECT_EQ(ds.dtype(), TokenDType::Int32);
  EXPECT_EQ(ds.sequence(0), (std::vector<int32_t>{0, 70000, 128255}));
  EXPECT_EQ(fs::file_size(prefix() + ".bin"), 3u * 4);
}

TEST_F(DataTest, WriterProducesMegatronLayout) {
  write_sample_dataset();
  std::string idx = read_file(prefix() + ".idx");
  ASSERT_EQ(idx.size(), kIdxBytes);
  EXPECT_EQ(idx.substr(0, 9), std::string("MMIDIDX\0\0", 9));
  uint64_t u64;
  std::memcpy(&u64, idx.data() + kVersionAt, 8);
  EXPECT_EQ(u64, 1u);
  EXPECT_EQ(idx[kDtypeAt], 8); // uint16
  std::memcpy(&u64, idx.data() + kCountAt, 8);
  EXPECT_EQ(u64, 3u);
  std::memcpy(&u64, idx.data() + kDocCountAt, 8);
  EXPECT_EQ(u64, 5u);
  int32_t sizes[3];
  int64_t pointers[3], docs[5];
  std::memcpy(sizes, idx.data() + kSizesAt, sizeof sizes);
  std::memcpy(pointers, idx.data() + kPointersAt, sizeof pointers);
  std::memcpy(docs, idx.data() + kDocsAt, sizeof docs);
  EXPECT_EQ(std::vector<int32_t>(sizes, sizes + 3), (std::vector<int32_t>{5, 3, 4}));
  EXPECT_EQ(std::vector<int64_t>(pointers, pointers + 3), (std::vector<int64_t>{0, 10, 16}));
  EXPECT_EQ(std::vector<int64_t>(docs, docs + 5), (std::vector<int64_t>{0, 1, 1, 2, 3}));
}

TEST_F(DataTest, DtypeForVocab) {
  EXPECT_EQ(megart::dtype_for_vocab(257), TokenDType::UInt16);
  EXPECT_EQ(megart::dtype_for_vocab(50257), TokenDType::UInt16);
  EXPECT_EQ(megart::dtype_for_vocab(65499), TokenDType::UInt16);
  EXPECT_EQ(megart::dtype_for_vocab(65500), TokenDType::Int32);
  EXPECT_EQ(megart::dtype_for_vocab(128256), TokenDType::Int32);
  expect_error([] { megart::dtype_for_vocab(0); }, {"vocabulary size is 0"});
}

TEST_F(DataTest, SamplesSpanDocumentBoundaries) {
  IndexedDataset ds = IndexedDataset::open(write_sample_dataset());
  // Stream: 10 11 12 13 14 | 20 21 22 | 30 31 32 33 (12 tokens).
  EXPECT_EQ(ds.num_samples(4), 2); // (12 - 1) / 4
  EXPECT_EQ(ds.num_samples(11), 1);
  EXPECT_EQ(ds.num_samples(12), 0);
  std::vector<int32_t> out(5);
  ds.sample(0, 4, out.data());
  EXPECT_EQ(out, (std::vector<int32_t>{10, 11, 12, 13, 14}));
  ds.sample(1, 4, out.data()); // starts in document 0, crosses into documents 2 and 3
  EXPECT_EQ(out, (std::vector<int32_t>{14, 20, 21, 22, 30}));
  std::vector<int32_t> one(2);
  ds.sample(10, 1, one.data());
  EXPECT_EQ(one, (std::vector<int32_t>{32, 33}));
  std::vector<int32_t> all(12);
  ds.sample(0, 11, all.data());
  EXPECT_EQ(all.back(), 33);
}

TEST_F(DataTest, SampleOutOfRangeNamesIndexAndCount) {
  IndexedDataset ds = IndexedDataset::open(write_sample_dataset());
  std::vector<int32_t> out(5);
  expect_error([&] { ds.sample(2, 4, out.data()); }, {"sample 2", "give 2 samples"});
  expect_error([&] { ds.sample(-1, 4, out.data()); }, {"sample -1"});
  expect_error([&] { ds.num_samples(0); }, {"seq_length is 0"});
  expect_error([&] { ds.sequence_length(3); }, {"sequence 3", "3 sequences"});
}

TEST_F(DataTest, EmptyDatasetHasNoSamples) {
  IndexedDatasetWriter w(prefix(), TokenDType::UInt16);
  w.finalize();
  IndexedDataset ds = IndexedDataset::open(prefix());
  EXPECT_EQ(ds.num_tokens(), 0);
  EXPECT_EQ(ds.num_documents(), 0);
  EXPECT_EQ(ds.num_samples(1), 0);
  EXPECT_EQ(ds.num_samples(8), 0);
  int32_t out[2];
  expect_error([&] { ds.sample(0, 1, out); }, {"sample 0 out of range", "give 0 samples"});
}

TEST_F(DataTest, ReadsFollowPointersNotFileOrder) {
  // Two sequences stored in reverse order in the .bin: {5,6} at byte 6, {1,2,3} at byte 0.
  std::string bin(10, '\0');
  const uint16_t tokens[5] = {1, 2, 3, 5, 6};
  std::memcpy(bin.data(), tokens, sizeof tokens);
  std::string idx("MMIDIDX\0\0", 9);
  idx.resize(34 + 2 * 12 + 2 * 8);
  poke<uint64_t>(idx, kVersionAt, 1);
  idx[kDtypeAt] = 8;
  poke<uint64_t>(idx, kCountAt, 2);
  poke<uint64_t>(idx, kDocCountAt, 2);
  poke<int32_t>(idx, 34, 2);
  poke<int32_t>(idx, 38, 3);
  poke<int64_t>(idx, 42, 6);
  poke<int64_t>(idx, 50, 0);
  poke<int64_t>(idx, 58, 0);
  poke<int64_t>(idx, 66, 2);
  write_file(prefix() + ".bin", bin);
  write_file(prefix() + ".idx", idx);
  IndexedDataset ds = IndexedDataset::open(prefix());
  std::vector<int32_t> out(5);
  ds.sample(0, 4, out.data());
  EXPECT_EQ(out, (std::vector<int32_t>{5, 6, 1, 2, 3}));
}

TEST_F(DataTest, MissingFilesAreNamed) {
  expect_error([&] { IndexedDataset::open(prefix("nothing")); },
               {prefix("nothing") + ".idx", "not found", "without the extension"});
  write_sample_dataset();
  fs::remove(prefix() + ".bin");
  expect_error([&] { IndexedDataset::open(prefix()); }, {prefix() + ".bin", "not found"});
  write_sample_dataset();
  expect_error([&] { IndexedDataset::open(prefix() + ".bin"); }, {"drop the '.bin'"});
}

TEST_F(DataTest, BadMagic) {
  write_sample_dataset();
  std::string idx = read_file(prefix() + ".idx");
  idx[0] = 'X';
  write_file(prefix() + ".idx", idx);
  expect_error([&] { IndexedDataset::open(prefix()); },
               {prefix() + ".idx", "bad magic", "XMIDIDX\\x00\\x00", "expected \"MMIDIDX"});
}

TEST_F(DataTest, UnsupportedVersion) {
  write_sample_dataset();
  std::string idx = read_file(prefix() + ".idx");
  poke<uint64_t>(idx, kVersionAt, 2);
  write_file(prefix() + ".idx", idx);
  expect_error([&] { IndexedDataset::open(prefix()); },
               {"unsupported version 2", "only version 1"});
}

TEST_F(DataTest, UnsupportedDtypeCodes) {
  write_sample_dataset();
  std::string idx = read_file(prefix() + ".idx");
  idx[kDtypeAt] = 7;
  write_file(prefix() + ".idx", idx);
  expect_error([&] { IndexedDataset::open(prefix()); },
               {"dtype code 7 (float32)", "cannot hold token ids", "4 (int32)", "8 (uint16)"});
  idx[kDtypeAt] = 42;
  write_file(prefix() + ".idx", idx);
  expect_error([&] { IndexedDataset::open(prefix()); },
               {"unknown dtype code 42", "supported codes are"});
}

TEST_F(DataTest, TruncatedIndex) {
  write_sample_dataset();
  std::string idx = read_file(prefix() + ".idx");
  write_file(prefix() + ".idx", idx.substr(0, 20));
  expect_error([&] { IndexedDataset::open(prefix()); },
               {"truncated", "header needs 34 bytes", "file has 20"});
  write_file(prefix() + ".idx", idx.substr(0, kIdxBytes - 3));
  expect_error([&] { IndexedDataset::open(prefix()); },
               {prefix() + ".idx", "truncated: header says 3 sequences and 5 document index",
                "needing " + std::to_string(kIdxBytes) + " bytes",
                "file has " + std::to_string(kIdxBytes - 3) + " bytes", "re-run megac data"});
  // A count so large that the size computation would overflow 64 bits.
  poke<uint64_t>(idx, kCountAt, ~0ull);
  write_file(prefix() + ".idx", idx);
  expect_error([&] { IndexedDataset::open(prefix()); }, {"truncated", "more than 2^64"});
}

TEST_F(DataTest, TrailingBytesInIndex) {
  write_sample_dataset();
  write_file(prefix() + ".idx", read_file(prefix() + ".idx") + "junk");
  expect_error([&] { IndexedDataset::open(prefix()); }, {"4 unexpected bytes"});
}

TEST_F(DataTest, SequencePastEndOfBin) {
  write_sample_dataset();
  std::string bin = read_file(prefix() + ".bin");
  write_file(prefix() + ".bin", bin.substr(0, 20)); // last sequence needs bytes 16..24
  expect_error([&] { IndexedDataset::open(prefix()); },
               {"sequence 2", "ends at byte 24", "past the end of " + prefix() + ".bin (20 bytes)"});
}

TEST_F(DataTest, BinLongerThanItsIndex) {
  // A rebuild that replaced the .bin but died before the .idx: the old index describes fewer
  // bytes than the new .bin holds, and reading it would hand out the wrong tokens.
  write_sample_dataset();
  write_file(prefix() + ".bin", read_file(prefix() + ".bin") + std::string(6, '\0'));
  expect_error([&] { IndexedDataset::open(prefix()); },
               {prefix() + ".bin has 30 bytes", "describes 24", "do not belong together"});
}

TEST_F(DataTest, BadOffsetsAndSizes) {
  write_sample_dataset();
  const std::string good = read_file(prefix() + ".idx");
  std::string idx = good;
  poke<int64_t>(idx, kPointersAt + 8, 11); // odd byte offset for uint16 tokens
  write_file(prefix() + ".idx", idx);
  expect_error([&] { IndexedDataset::open(prefix()); },
               {"sequence 1 has byte offset 11", "multiple of the 2-byte uint16"});
  idx = good;
  poke<int64_t>(idx, kPointersAt + 8, 1000);
  write_file(prefix() + ".idx", idx);
  expect_error([&] { IndexedDataset::open(prefix()); }, {"sequence 1", "past the end"});
  idx = good;
  poke<int32_t>(idx, kSizesAt + 4, -2);
  write_file(prefix() + ".idx", idx);
  expect_error([&] { IndexedDataset::open(prefix()); }, {"sequence 1 has length -2"});
}

TEST_F(DataTest, BadDocumentIndex) {
  write_sample_dataset();
  const std::string good = read_file(prefix() + ".idx");
  std::string idx = good;
  poke<int64_t>(idx, kDocsAt, 1);
  write_file(prefix() + ".idx", idx);
  expect_error([&] { IndexedDataset::open(prefix()); },
               {"document index starts with 1, expected 0"});
  idx = good;
  poke<int64_t>(idx, kDocsAt + 2 * 8, 0); // {0, 1, 0, 2, 3}
  write_file(prefix() + ".idx", idx);
  expect_error([&] { IndexedDataset::open(prefix()); },
               {"entry 2 is 0, less than the entry before it (1)"});
  idx = good;
  poke<int64_t>(idx, kDocsAt + 4 * 8, 2); // last entry should be 3
  write_file(prefix() + ".idx", idx);
  expect_error([&] { IndexedDataset::open(prefix()); },
               {"last document index entry is 2, expected the sequence count 3"});
  idx = good.substr(0, kDocsAt); // no document index at all
  poke<uint64_t>(idx, kDocCountAt, 0);
  write_file(prefix() + ".idx", idx);
  expect_error([&] { IndexedDataset::open(prefix()); }, {"document index is empty"});
}

TEST_F(DataTest, WriterRejectsTokensThatDoNotFit) {
  IndexedDatasetWriter w(prefix(), TokenDType::UInt16);
  w.add_document({1, 2});
  expect_error([&] { w.add_document({3, 70000}); },
               {"document 1, token 1 is 70000", "does not fit uint16 (0..65535)", "int32"});
  expect_error([&] { w.add_document({-1}); }, {"token 0 is -1"});
  expect_error([&] { IndexedDatasetWriter(prefix("f"), TokenDType::Float32); },
               {"dtype code 7 (float32)"});
}

TEST_F(DataTest, UnfinishedWriterLeavesNothing) {
  {
    IndexedDatasetWriter w(prefix(), TokenDType::UInt16);
    w.add_document({1, 2, 3});
  }
  EXPECT_TRUE(fs::is_empty(dir_)) << "temporary files left behind";
  IndexedDatasetWriter w(prefix(), TokenDType::UInt16);
  w.finalize();
  expect_error([&] { w.add_document({1}); }, {"after finalize"});
  // Only the two final files remain.
  std::set<std::string> names;
  for (const auto &e : fs::directory_iterator(dir_))
    names.insert(e.path().filename().string());
  EXPECT_EQ(names, (std::set<std::string>{"corpus.bin", "corpus.idx"}));
}

TEST_F(DataTest, ShuffledOrderIsADeterministicPermutation) {
  std::vector<int64_t> a = megart::shuffled_sample_order(1000, 1234);
  std::vector<int64_t> b = megart::shuffled_sample_order(1000, 1234);
  std::vector<int64_t> c = megart::shuffled_sample_order(1000, 1235);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  std::vector<int64_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 1000; ++i)
    ASSERT_EQ(sorted[i], i);
  int64_t fixed = 0; // a shuffle, not the identity
  for (int64_t i = 0; i < 1000; ++i)
    fixed += a[i] == i;
  EXPECT_LT(fixed, 20);
  // Pinned so that a change to the generator (which would change every run's data order) shows.
  EXPECT_EQ(megart::shuffled_sample_order(5, 42), (std::vector<int64_t>{1, 2, 0, 4, 3}));
  EXPECT_TRUE(megart::shuffled_sample_order(0, 1).empty());
  EXPECT_EQ(megart::shuffled_sample_order(1, 1), (std::vector<int64_t>{0}));
}

TEST(DataAtomicFile, CommitReplacesAndAbandonRemoves) {
  char tmpl[] = "/tmp/megart-atomic-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl, path = dir + "/f.txt";
  write_file(path, "old");
  {
    megart::AtomicFile f(path);
    f.write("new contents", 12);
    EXPECT_EQ(read_file(path), "old"); // untouched until commit
    f.commit();
  }
  EXPECT_EQ(read_file(path), "new contents");
  {
    megart::AtomicFile f(path);
    f.write("half", 4);
  } // dropped without commit
  EXPECT_EQ(read_file(path), "new contents");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);
  expect_error([&] { megart::AtomicFile f(dir + "/no/such/folder/x"); },
               {"cannot create temporary file", "check that the folder exists"});
  fs::remove_all(dir);
}
