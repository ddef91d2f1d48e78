#include "megart/indexed_dataset.h"

#include "megart/atomic_file.h"
#include "megart/error.h"
#include "megart/file_checks.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <limits>
#include <sys/mman.h>
#include <type_traits>
#include <sys/stat.h>
#include <unistd.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "indexed datasets are little-endian; this reader copies integers as they are in memory"
#endif

namespace megart {

namespace {

// memcpy with an empty vector's data() (null) is undefined even for 0 bytes: an empty dataset
// has empty tables.
void copy_bytes(void *to, const void *from, size_t bytes) {
  if (bytes > 0)
    std::memcpy(to, from, bytes);
}

constexpr char kMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
constexpr uint64_t kVersion = 1;
constexpr size_t kHeaderBytes = 9 + 8 + 1 + 8 + 8;
const char *const kRebuild = "re-run megac data to rebuild it";

bool is_token_dtype(TokenDType d) {
  switch (d) {
  case TokenDType::UInt8:
  case TokenDType::Int8:
  case TokenDType::Int16:
  case TokenDType::Int32:
  case TokenDType::Int64:
  case TokenDType::UInt16:
    return true;
  default:
    return false;
  }
}

const char *const kSupportedDtypes =
    "1 (uint8), 2 (int8), 3 (int16), 4 (int32), 5 (int64), 8 (uint16)";

template <typename T> T load(const char *p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

std::string escape_bytes(const char *p, size_t n) {
  static const char *hex = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    unsigned char c = static_cast<unsigned char>(p[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      s += static_cast<char>(c);
    } else {
      s += "\\x";
      s += hex[c >> 4];
      s += hex[c & 15];
    }
  }
  return s;
}

std::string missing_file_message(const std::string &path, const std::string &prefix) {
  std::string msg = path + ": not found (" + std::strerror(errno) +
                    "); a data path is the common prefix of PREFIX.bin and PREFIX.idx, given "
                    "without the extension (here '" + prefix + "')";
  const size_t n = prefix.size();
  if (n > 4 && (prefix.compare(n - 4, 4, ".bin") == 0 || prefix.compare(n - 4, 4, ".idx") == 0))
    return msg + "; drop the '" + prefix.substr(n - 4) + "' from the path";
  return msg + "; build the dataset with megac data";
}

// Token ids from the file, widened to int32; rejects ids no vocabulary can have.
template <typename T>
void convert(const char *src, int64_t count, int32_t *out, int64_t stream_pos,
             const std::string &bin_path) {
  for (int64_t k = 0; k < count; ++k) {
    T v = load<T>(src + k * static_cast<int64_t>(sizeof(T)));
    if constexpr (std::is_signed_v<T>) {
      if (v < 0 || static_cast<int64_t>(v) > std::numeric_limits<int32_t>::max())
        throw Error(bin_path + ": token at stream position " + std::to_string(stream_pos + k) +
                    " is " + std::to_string(static_cast<int64_t>(v)) +
                    "; token ids must be in 0..2147483647; " + kRebuild);
    }
    out[k] = static_cast<int32_t>(v);
  }
}

} // namespace

const char *token_dtype_name(TokenDType dtype) {
  switch (dtype) {
  case TokenDType::UInt8: return "uint8";
  case TokenDType::Int8: return "int8";
  case TokenDType::Int16: return "int16";
  case TokenDType::Int32: return "int32";
  case TokenDType::Int64: return "int64";
  case TokenDType::Float64: return "float64";
  case TokenDType::Float32: return "float32";
  case TokenDType::UInt16: return "uint16";
  }
  return "unknown";
}

int token_dtype_size(TokenDType dtype) {
  switch (dtype) {
  case TokenDType::UInt8:
  case TokenDType::Int8: return 1;
  case TokenDType::Int16:
  case TokenDType::UInt16: return 2;
  case TokenDType::Int32:
  case TokenDType::Float32: return 4;
  case TokenDType::Int64:
  case TokenDType::Float64: return 8;
  }
  throw Error("token dtype code " + std::to_string(static_cast<int>(dtype)) + " is not defined; " +
              "supported codes are " + kSupportedDtypes);
}

TokenDType dtype_for_vocab(int64_t vocab_size) {
  if (vocab_size <= 0)
    throw Error("vocabulary size is " + std::to_string(vocab_size) + "; it must be positive");
  return vocab_size < 65500 ? TokenDType::UInt16 : TokenDType::Int32;
}

// ---------------------------------------------------------------------------------------------
// Reading

struct IndexedDataset::Mapping {
  std::string path;
  const char *data = nullptr;
  size_t size = 0;
  ~Mapping() {
    if (data && size)
      ::munmap(const_cast<char *>(data), size);
  }
};

IndexedDataset IndexedDataset::open(const std::string &prefix) {
  const std::string idx_path = prefix + ".idx";
  const std::string bin_path = prefix + ".bin";
  struct stat st {};
  // A pipe would block the read, a device (/dev/zero) never end it: only files are datasets.
  for (const std::string *path : {&idx_path, &bin_path}) {
    if (::stat(path->c_str(), &st) != 0)
      throw Error(missing_file_message(*path, prefix));
    if (!S_ISREG(st.st_mode))
      throw Error(*path + " is not a regular file (" + file_kind(st.st_mode) +
                  "); a dataset is the .bin/.idx files megac data (or Megatron's preprocess_data.py) writes");
  }

  // The index is small next to the tokens: read it whole.
  std::ifstream in(idx_path, std::ios::binary);
  if (!in)
    throw Error(idx_path + ": cannot open for reading: " + std::strerror(errno));
  std::string idx((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad())
    throw Error(idx_path + ": read error: " + std::strerror(errno));
  const uint64_t idx_size = idx.size();
  const char *p = idx.data();

  if (idx_size < kHeaderBytes)
    throw Error(idx_path + ": truncated: the header needs " + std::to_string(kHeaderBytes) +
                " bytes, but the file has " + std::to_string(idx_size) + "; " + kRebuild);
  if (std::memcmp(p, kMagic, sizeof kMagic) != 0)
    throw Error(idx_path + ": bad magic: found \"" + escape_bytes(p, sizeof kMagic) +
                "\", expected \"MMIDIDX\\x00\\x00\"; this is not a Megatron indexed dataset "
                "index (or it is corrupt); " + kRebuild);
  uint64_t version = load<uint64_t>(p + 9);
  if (version != kVersion)
    throw Error(idx_path + ": unsupported version " + std::to_string(version) +
                "; only version 1 (Megatron's MMIDIDX format) is supported; " + kRebuild);
  uint8_t code = static_cast<uint8_t>(p[17]);
  auto dtype = static_cast<TokenDType>(code);
  if (code == 6 || code == 7)
    throw Error(idx_path + ": dtype code " + std::to_string(code) + " (" +
                token_dtype_name(dtype) + ") cannot hold token ids; supported codes are " +
                kSupportedDtypes);
  if (!is_token_dtype(dtype))
    throw Error(idx_path + ": unknown dtype code " + std::to_string(code) +
                "; supported codes are " + kSupportedDtypes);
  const uint64_t n = load<uint64_t>(p + 18);
  const uint64_t d = load<uint64_t>(p + 26);

  // Sizes are checked before multiplying so a corrupt count cannot overflow the arithmetic.
  const uint64_t body = idx_size - kHeaderBytes;
  auto truncated = [&](const std::string &needing) {
    return Error(idx_path + ": truncated: header says " + std::to_string(n) + " sequences and " +
                 std::to_string(d) + " document index entries, needing " + needing +
                 " bytes of index, but the file has " + std::to_string(idx_size) + " bytes; " +
                 kRebuild);
  };
  if (n > body / 12 || d > (body - n * 12) / 8) {
    // n and d are below 2^64, so the exact need fits in 128 bits.
    const unsigned __int128 need = kHeaderBytes + static_cast<unsigned __int128>(n) * 12 +
                                   static_cast<unsigned __int128>(d) * 8;
    throw truncated(need > std::numeric_limits<uint64_t>::max()
                        ? std::string("more than 2^64")
                        : std::to_string(static_cast<uint64_t>(need)));
  }
  const uint64_t need = kHeaderBytes + n * 12 + d * 8;
  if (idx_size > need)
    throw Error(idx_path + ": " + std::to_string(idx_size - need) +
                " unexpected bytes after the document index (header says " + std::to_string(n) +
                " sequences and " + std::to_string(d) + " document index entries, " +
                std::to_string(need) + " bytes in all); " + kRebuild);

  IndexedDataset ds;
  ds.prefix_ = prefix;
  ds.dtype_ = dtype;
  ds.sizes_.resize(n);
  ds.pointers_.resize(n);
  ds.doc_idx_.resize(d);
  copy_bytes(ds.sizes_.data(), p + kHeaderBytes, n * 4);
  copy_bytes(ds.pointers_.data(), p + kHeaderBytes + n * 4, n * 8);
  copy_bytes(ds.doc_idx_.data(), p + kHeaderBytes + n * 12, d * 8);

  // Map the tokens.
  auto mapping = std::make_shared<Mapping>();
  mapping->path = bin_path;
  int fd = ::open(bin_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw Error(bin_path + ": cannot open for reading: " + std::strerror(errno));
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    throw Error(bin_path + ": cannot stat: " + std::strerror(e));
  }
  mapping->size = static_cast<size_t>(st.st_size);
  if (mapping->size > 0) {
    void *m = ::mmap(nullptr, mapping->size, PROT_READ, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
      int e = errno;
      ::close(fd);
      throw Error(bin_path + ": cannot map " + std::to_string(mapping->size) +
                  " bytes: " + std::strerror(e));
    }
    mapping->data = static_cast<const char *>(m);
  }
  ::close(fd); // the mapping stays valid
  ds.bin_ = mapping;

  // Every sequence must lie inside the .bin.
  const int64_t item = token_dtype_size(dtype);
  const int64_t bin_size = static_cast<int64_t>(mapping->size);
  ds.token_starts_.resize(n + 1);
  ds.token_starts_[0] = 0;
  int64_t data_end = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const int64_t len = ds.sizes_[i];
    const int64_t off = ds.pointers_[i];
    if (len < 0)
      throw Error(idx_path + ": sequence " + std::to_string(i) + " has length " +
                  std::to_string(len) + "; lengths must be >= 0; " + kRebuild);
    if (off < 0 || off % item != 0)
      throw Error(idx_path + ": sequence " + std::to_string(i) + " has byte offset " +
                  std::to_string(off) + "; offsets must be >= 0 and a multiple of the " +
                  std::to_string(item) + "-byte " + token_dtype_name(dtype) + " token size; " +
                  kRebuild);
    if (off > bin_size || len > (bin_size - off) / item)
      throw Error(idx_path + ": sequence " + std::to_string(i) + " (offset " +
                  std::to_string(off) + ", " + std::to_string(len) + " tokens of " +
                  std::to_string(item) + " bytes) ends at byte " +
                  std::to_string(static_cast<uint64_t>(off) + static_cast<uint64_t>(len) * item) +
                  ", past the end of " + bin_path + " (" +
                  std::to_string(bin_size) + " bytes); the .bin and .idx do not belong together "
                  "or the .bin is truncated; " + kRebuild);
    ds.token_starts_[i + 1] = ds.token_starts_[i] + len;
    data_end = std::max(data_end, off + len * item);
  }
  // Writers lay sequences back to back, so bytes past the last one mean the .bin was replaced
  // without its .idx (e.g. a crash between the two renames of a rebuild).
  if (data_end != bin_size)
    throw Error(bin_path + " has " + std::to_string(bin_size) + " bytes, but " + idx_path +
                " describes " + std::to_string(data_end) + "; the .bin and .idx do not belong "
                "together; " + kRebuild);

  // Document boundaries: 0, then non-decreasing sequence numbers ending at the sequence count.
  if (d == 0)
    throw Error(idx_path + ": the document index is empty; it must start with 0 and end with the "
                "sequence count (" + std::to_string(n) + "); " + kRebuild);
  if (ds.doc_idx_[0] != 0)
    throw Error(idx_path + ": the document index starts with " + std::to_string(ds.doc_idx_[0]) +
                ", expected 0; " + kRebuild);
  for (uint64_t k = 1; k < d; ++k)
    if (ds.doc_idx_[k] < ds.doc_idx_[k - 1])
      throw Error(idx_path + ": document index entry " + std::to_string(k) + " is " +
                  std::to_string(ds.doc_idx_[k]) + ", less than the entry before it (" +
                  std::to_string(ds.doc_idx_[k - 1]) + "); entries must not decrease; " +
                  kRebuild);
  if (ds.doc_idx_.back() != static_cast<int64_t>(n))
    throw Error(idx_path + ": the last document index entry is " +
                std::to_string(ds.doc_idx_.back()) + ", expected the sequence count " +
                std::to_string(n) + "; " + kRebuild);
  return ds;
}

int32_t IndexedDataset::sequence_length(int64_t i) const {
  if (i < 0 || i >= num_sequences())
    throw Error(prefix_ + ": sequence " + std::to_string(i) + " out of range; the dataset has " +
                std::to_string(num_sequences()) + " sequences");
  return sizes_[i];
}

std::vector<int32_t> IndexedDataset::sequence(int64_t i) const {
  std::vector<int32_t> out(sequence_length(i));
  read_tokens(token_starts_[i], sizes_[i], out.data());
  return out;
}

int64_t IndexedDataset::sequence_at_token(int64_t token) const {
  // Last sequence whose start is <= token (empty sequences share a start; skip past them).
  auto it = std::upper_bound(token_starts_.begin(), token_starts_.end(), token);
  return static_cast<int64_t>(it - token_starts_.begin()) - 1;
}

void IndexedDataset::read_tokens(int64_t start, int64_t count, int32_t *out) const {
  if (start < 0 || count < 0 || start > num_tokens() || count > num_tokens() - start)
    throw Error(prefix_ + ": tokens [" + std::to_string(start) + ", " +
                std::to_string(start + count) + ") are out of range; the dataset has " +
                std::to_string(num_tokens()) + " tokens");
  const int64_t item = token_dtype_size(dtype_);
  int64_t pos = start;
  int64_t seq = count > 0 ? sequence_at_token(start) : 0;
  while (count > 0) {
    const int64_t within = pos - token_starts_[seq];
    const int64_t take = std::min<int64_t>(count, sizes_[seq] - within);
    const char *src = bin_->data + pointers_[seq] + within * item;
    switch (dtype_) {
    case TokenDType::UInt8: convert<uint8_t>(src, take, out, pos, bin_->path); break;
    case TokenDType::Int8: convert<int8_t>(src, take, out, pos, bin_->path); break;
    case TokenDType::Int16: convert<int16_t>(src, take, out, pos, bin_->path); break;
    case TokenDType::Int32: convert<int32_t>(src, take, out, pos, bin_->path); break;
    case TokenDType::Int64: convert<int64_t>(src, take, out, pos, bin_->path); break;
    case TokenDType::UInt16: convert<uint16_t>(src, take, out, pos, bin_->path); break;
    default: throw Error(prefix_ + ": unsupported token dtype"); // rejected by open()
    }
    out += take;
    pos += take;
    count -= take;
    ++seq;
  }
}

int64_t IndexedDataset::document_token_start(int64_t doc) const {
  if (doc < 0 || doc > num_documents())
    throw Error(prefix_ + ": document " + std::to_string(doc) + " out of range 0.." + std::to_string(num_documents()));
  return token_starts_.at(static_cast<size_t>(doc_idx_[static_cast<size_t>(doc)]));
}

int64_t IndexedDataset::num_samples(int64_t seq_length) const {
  if (seq_length <= 0)
    throw Error("seq_length is " + std::to_string(seq_length) + "; it must be positive");
  if (num_tokens() < 1)
    return 0;
  return (num_tokens() - 1) / seq_length;
}

void IndexedDataset::sample(int64_t i, int64_t seq_length, int32_t *out) const {
  const int64_t count = num_samples(seq_length);
  if (i < 0 || i >= count)
    throw Error(prefix_ + ": sample " + std::to_string(i) + " out of range: with seq_length " +
                std::to_string(seq_length) + " the dataset's " + std::to_string(num_tokens()) +
                " tokens give " + std::to_string(count) + " samples" +
                (count > 0 ? " (0.." + std::to_string(count - 1) + ")" : std::string()));
  read_tokens(i * seq_length, seq_length + 1, out);
}

// ---------------------------------------------------------------------------------------------
// Shuffling

namespace {

// SplitMix64 (Steele, Lea, Flood 2014): tiny, full 64-bit period, good enough to shuffle.
struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, bound) without modulo bias: reject the top partial block.
  uint64_t below(uint64_t bound) {
    const uint64_t limit = std::numeric_limits<uint64_t>::max() -
                           std::numeric_limits<uint64_t>::max() % bound;
    uint64_t r;
    do {
      r = next();
    } while (r >= limit);
    return r % bound;
  }
};

} // namespace

std::vector<int64_t> shuffled_sample_order(int64_t num_samples, uint64_t seed) {
  if (num_samples < 0)
    throw Error("shuffled_sample_order: num_samples is " + std::to_string(num_samples) +
                "; it must be >= 0");
  std::vector<int64_t> order(num_samples);
  for (int64_t i = 0; i < num_samples; ++i)
    order[i] = i;
  SplitMix64 rng{seed};
  for (int64_t i = num_samples - 1; i > 0; --i) {
    int64_t j = static_cast<int64_t>(rng.below(static_cast<uint64_t>(i) + 1));
    std::swap(order[i], order[j]);
  }
  return order;
}

// ---------------------------------------------------------------------------------------------
// Writing

struct IndexedDatasetWriter::Impl {
  std::string prefix;
  TokenDType dtype;
  AtomicFile bin;
  std::vector<int32_t> sizes;
  std::vector<int64_t> doc_idx{0};
  std::vector<char> buffer;
  bool finalized = false;

  Impl(std::string p, TokenDType d) : prefix(std::move(p)), dtype(d), bin(prefix + ".bin") {}
};

IndexedDatasetWriter::IndexedDatasetWriter(std::string prefix, TokenDType dtype) {
  if (!is_token_dtype(dtype))
    throw Error(prefix + ": cannot write tokens as dtype code " +
                std::to_string(static_cast<int>(dtype)) + " (" + token_dtype_name(dtype) +
                "); supported codes are " + kSupportedDtypes);
  impl_ = std::make_unique<Impl>(std::move(prefix), dtype);
}

IndexedDatasetWriter::~IndexedDatasetWriter() = default;

namespace {

template <typename T>
void encode_tokens(const std::vector<int32_t> &tokens, std::vector<char> &buffer,
                   const std::string &prefix, TokenDType dtype, size_t document) {
  buffer.resize(tokens.size() * sizeof(T));
  for (size_t k = 0; k < tokens.size(); ++k) {
    const int32_t t = tokens[k];
    if (t < 0 || static_cast<int64_t>(t) > static_cast<int64_t>(std::numeric_limits<T>::max()))
      throw Error(prefix + ".bin: document " + std::to_string(document) + ", token " +
                  std::to_string(k) + " is " + std::to_string(t) + ", which does not fit " +
                  token_dtype_name(dtype) + " (0.." +
                  std::to_string(static_cast<int64_t>(std::numeric_limits<T>::max())) +
                  "); token ids must be >= 0, and vocabularies of 65500 or more need int32 "
                  "(dtype_for_vocab picks it)");
    const T v = static_cast<T>(t);
    std::memcpy(buffer.data() + k * sizeof(T), &v, sizeof(T));
  }
}

} // namespace

void IndexedDatasetWriter::add_document(const std::vector<int32_t> &tokens) {
  Impl &w = *impl_;
  if (w.finalized)
    throw Error(w.prefix + ": add_document after finalize");
  const size_t doc = w.doc_idx.size() - 1;
  if (tokens.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
    throw Error(w.prefix + ": document " + std::to_string(doc) + " has " +
                std::to_string(tokens.size()) +
                " tokens; the index stores lengths as int32 (at most 2147483647); split it");
  if (!tokens.empty()) {
    switch (w.dtype) {
    case TokenDType::UInt8: encode_tokens<uint8_t>(tokens, w.buffer, w.prefix, w.dtype, doc); break;
    case TokenDType::Int8: encode_tokens<int8_t>(tokens, w.buffer, w.prefix, w.dtype, doc); break;
    case TokenDType::Int16: encode_tokens<int16_t>(tokens, w.buffer, w.prefix, w.dtype, doc); break;
    case TokenDType::Int32: encode_tokens<int32_t>(tokens, w.buffer, w.prefix, w.dtype, doc); break;
    case TokenDType::Int64: encode_tokens<int64_t>(tokens, w.buffer, w.prefix, w.dtype, doc); break;
    case TokenDType::UInt16: encode_tokens<uint16_t>(tokens, w.buffer, w.prefix, w.dtype, doc); break;
    default: throw Error(w.prefix + ": unsupported dtype"); // rejected by the constructor
    }
    w.bin.write(w.buffer.data(), w.buffer.size());
    w.sizes.push_back(static_cast<int32_t>(tokens.size()));
  }
  w.doc_idx.push_back(static_cast<int64_t>(w.sizes.size()));
}

void IndexedDatasetWriter::finalize() {
  Impl &w = *impl_;
  if (w.finalized)
    throw Error(w.prefix + ": finalize called twice");
  const uint64_t n = w.sizes.size();
  const uint64_t d = w.doc_idx.size();
  const int64_t item = token_dtype_size(w.dtype);

  std::vector<char> idx(kHeaderBytes + n * 12 + d * 8);
  char *p = idx.data();
  std::memcpy(p, kMagic, sizeof kMagic);
  std::memcpy(p + 9, &kVersion, 8);
  p[17] = static_cast<char>(w.dtype);
  std::memcpy(p + 18, &n, 8);
  std::memcpy(p + 26, &d, 8);
  copy_bytes(p + kHeaderBytes, w.sizes.data(), n * 4);
  int64_t offset = 0; // sequences are laid out back to back
  for (uint64_t i = 0; i < n; ++i) {
    std::memcpy(p + kHeaderBytes + n * 4 + i * 8, &offset, 8);
    offset += static_cast<int64_t>(w.sizes[i]) * item;
  }
  std::memcpy(p + kHeaderBytes + n * 12, w.doc_idx.data(), d * 8);

  AtomicFile idx_file(w.prefix + ".idx");
  idx_file.write(idx.data(), idx.size());
  // .bin first: a reader that finds the new .idx then also finds the .bin it describes.
  w.bin.commit();
  idx_file.commit();
  w.finalized = true;
}

} // namespace megart
