#include "megart/safetensors.h"
#include "megart/stacked_tensors.h"

#include "megart/atomic_file.h"
#include "megart/error.h"
#include "megart/json.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <limits>
#include <sys/stat.h>
#include <unistd.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors is little-endian; this code copies numbers as they are in memory"
#endif

namespace megart {

namespace {

// Same cap as the reference implementation: a bigger header is corruption, not a model.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

// Bytes per element of every dtype the format defines (so any valid file opens; reading
// converts only the float ones).
int dtype_bytes(const std::string &dtype) {
  static const std::map<std::string, int> sizes = {
      {"BOOL", 1}, {"U8", 1},      {"I8", 1},       {"F8_E5M2", 1}, {"F8_E4M3", 1},
      {"I16", 2},  {"U16", 2},     {"F16", 2},      {"BF16", 2},    {"I32", 4},
      {"U32", 4},  {"F32", 4},     {"F64", 8},      {"I64", 8},     {"U64", 8}};
  auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

float bf16_to_f32(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16; // bf16 is the top half of an f32
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000 | (mant << 13); // inf / nan
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13); // rebias 15 -> 127
  } else if (mant == 0) {
    bits = sign; // signed zero
  } else {
    // Subnormal half: normalise the mantissa into an f32 normal.
    exp = 113;
    while ((mant & 0x400) == 0) {
      mant <<= 1;
      --exp;
    }
    bits = sign | (exp << 23) | ((mant & 0x3ff) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// numel * bytes, or -1 when it overflows.
int64_t checked_bytes(const std::vector<int64_t> &shape, int64_t bytes) {
  int64_t total = bytes;
  for (int64_t d : shape) {
    if (d < 0)
      return -1;
    if (d != 0 && total > std::numeric_limits<int64_t>::max() / d)
      return -1;
    total *= d;
  }
  return total;
}

} // namespace

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::string shape_string(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

struct SafetensorsFile::Handle {
  int fd = -1;
  ~Handle() {
    if (fd >= 0)
      ::close(fd);
  }
};

SafetensorsFile SafetensorsFile::open(const std::string &path) {
  auto handle = std::make_shared<Handle>();
  handle->fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (handle->fd < 0)
    throw Error(path + ": cannot open safetensors file: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(handle->fd, &st) != 0)
    throw Error(path + ": cannot stat: " + std::strerror(errno));
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);

  auto read_at = [&](uint64_t offset, void *out, uint64_t bytes) {
    char *p = static_cast<char *>(out);
    while (bytes > 0) {
      ssize_t n = ::pread(handle->fd, p, bytes, static_cast<off_t>(offset));
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        throw Error(path + ": read failed at byte " + std::to_string(offset) + ": " +
                    (n == 0 ? std::string("unexpected end of file") : std::strerror(errno)));
      p += n;
      offset += static_cast<uint64_t>(n);
      bytes -= static_cast<uint64_t>(n);
    }
  };

  if (file_size < 8)
    throw Error(path + ": " + std::to_string(file_size) +
                " bytes is too small for a safetensors file, which starts with an 8-byte header "
                "length; the file is truncated or not a safetensors file");
  uint64_t n = 0;
  read_at(0, &n, 8);
  if (n > file_size - 8)
    throw Error(path + ": bad header length: the first 8 bytes say the JSON header has " +
                std::to_string(n) + " bytes, but only " + std::to_string(file_size - 8) +
                " bytes follow; the file is truncated or not a safetensors file");
  if (n > kMaxHeaderBytes)
    throw Error(path + ": bad header length: " + std::to_string(n) + " bytes is more than the " +
                std::to_string(kMaxHeaderBytes) + "-byte limit; the file is corrupt");
  std::string header(n, '\0');
  read_at(8, header.data(), n);

  const std::string what = path + ": header";
  JsonValue root = parse_json(header, what);
  if (!root.is_object())
    throw Error(what + " is a JSON " + JsonValue::kind_name(root.kind) +
                ", expected an object mapping tensor names to {dtype, shape, data_offsets}");

  SafetensorsFile f;
  f.path_ = path;
  f.file_ = handle;
  f.data_start_ = 8 + n;
  const uint64_t data_size = file_size - 8 - n;

  for (const auto &[name, entry] : root.object) {
    if (name == "__metadata__") {
      if (!entry.is_object())
        throw Error(what + ": __metadata__ is a " + JsonValue::kind_name(entry.kind) +
                    ", expected an object of string values");
      for (const auto &[key, value] : entry.object) {
        if (!value.is_string())
          throw Error(what + ": __metadata__[\"" + key + "\"] is " + value.brief() +
                      ", expected a string (the format allows only string metadata)");
        f.metadata_[key] = value.string;
      }
      continue;
    }
    const std::string where = what + ": tensor '" + name + "'";
    if (!entry.is_object())
      throw Error(where + " is " + entry.brief() +
                  ", expected an object {\"dtype\", \"shape\", \"data_offsets\"}");
    TensorInfo info;
    info.name = name;

    const JsonValue *dtype = entry.get("dtype");
    if (!dtype || !dtype->is_string())
      throw Error(where + ": \"dtype\" is " + (dtype ? dtype->brief() : "missing") +
                  ", expected a string such as \"F32\"");
    info.dtype = dtype->string;
    const int elem = dtype_bytes(info.dtype);
    if (elem == 0)
      throw Error(where + ": unknown dtype \"" + info.dtype +
                  "\"; safetensors dtypes are BOOL, U8, I8, F8_E5M2, F8_E4M3, I16, U16, F16, "
                  "BF16, I32, U32, F32, F64, I64, U64");

    const JsonValue *shape = entry.get("shape");
    if (!shape || !shape->is_array())
      throw Error(where + ": \"shape\" is " + (shape ? shape->brief() : "missing") +
                  ", expected an array of non-negative integers");
    for (const JsonValue &d : shape->array) {
      if (!d.is_integer() || d.integer < 0)
        throw Error(where + ": shape " + shape->brief() +
                    " has an entry that is not a non-negative integer");
      info.shape.push_back(d.integer);
    }

    const JsonValue *offsets = entry.get("data_offsets");
    if (!offsets || !offsets->is_array() || offsets->array.size() != 2 ||
        !offsets->array[0].is_integer() || !offsets->array[1].is_integer() ||
        offsets->array[0].integer < 0 || offsets->array[1].integer < offsets->array[0].integer)
      throw Error(where + ": \"data_offsets\" is " + (offsets ? offsets->brief() : "missing") +
                  ", expected [begin, end] with 0 <= begin <= end");
    info.data_begin = static_cast<uint64_t>(offsets->array[0].integer);
    info.data_end = static_cast<uint64_t>(offsets->array[1].integer);
    if (info.data_end > data_size)
      throw Error(where + ": data_offsets [" + std::to_string(info.data_begin) + ", " +
                  std::to_string(info.data_end) + "] run past the end of the data section (" +
                  std::to_string(data_size) + " bytes); the file is truncated");
    const int64_t bytes = checked_bytes(info.shape, elem);
    if (bytes < 0 || static_cast<uint64_t>(bytes) != info.data_end - info.data_begin)
      throw Error(where + ": dtype " + info.dtype + " and shape " + shape_string(info.shape) +
                  " need " + (bytes < 0 ? std::string("more than 2^63") : std::to_string(bytes)) +
                  " bytes, but data_offsets [" + std::to_string(info.data_begin) + ", " +
                  std::to_string(info.data_end) + "] hold " +
                  std::to_string(info.data_end - info.data_begin) + "; the header is corrupt");
    f.tensors_.emplace(name, std::move(info));
  }

  // No two tensors may share bytes (empty tensors occupy none).
  std::vector<const TensorInfo *> by_offset;
  for (const auto &[name, info] : f.tensors_)
    if (info.data_end > info.data_begin)
      by_offset.push_back(&info);
  std::sort(by_offset.begin(), by_offset.end(), [](const TensorInfo *a, const TensorInfo *b) {
    return a->data_begin < b->data_begin;
  });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const TensorInfo &a = *by_offset[i - 1];
    const TensorInfo &b = *by_offset[i];
    if (b.data_begin < a.data_end)
      throw Error(what + ": tensors '" + a.name + "' (bytes " + std::to_string(a.data_begin) +
                  ".." + std::to_string(a.data_end) + ") and '" + b.name + "' (bytes " +
                  std::to_string(b.data_begin) + ".." + std::to_string(b.data_end) +
                  ") overlap; the header is corrupt");
  }
  return f;
}

const TensorInfo *SafetensorsFile::find(const std::string &name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

const TensorInfo &SafetensorsFile::get(const std::string &name) const {
  if (const TensorInfo *info = find(name))
    return *info;
  // Suggest the names that share the longest prefix with the one asked for.
  std::vector<std::pair<size_t, std::string>> ranked;
  for (const auto &[have, info] : tensors_) {
    size_t common = 0;
    while (common < have.size() && common < name.size() && have[common] == name[common])
      ++common;
    ranked.emplace_back(common, have);
  }
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto &a, const auto &b) { return a.first > b.first; });
  std::string some;
  for (size_t i = 0; i < ranked.size() && i < 5; ++i)
    some += (i ? ", '" : "'") + ranked[i].second + "'";
  throw Error(path_ + ": no tensor named '" + name + "'; the file has " +
              std::to_string(tensors_.size()) + " tensors" +
              (tensors_.empty() ? std::string() : ", for example " + some) +
              "; check that the checkpoint matches the model (names follow Hugging Face's)");
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  for (const auto &[name, info] : tensors_)
    out.push_back(name);
  return out;
}

void SafetensorsFile::read_bytes(const TensorInfo &info, void *out) const {
  char *p = static_cast<char *>(out);
  uint64_t offset = data_start_ + info.data_begin;
  uint64_t bytes = info.data_end - info.data_begin;
  while (bytes > 0) {
    ssize_t n = ::pread(file_->fd, p, bytes, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      throw Error(path_ + ": reading tensor '" + info.name + "' failed at byte " +
                  std::to_string(offset) + ": " +
                  (n == 0 ? std::string("unexpected end of file (was it truncated after opening?)")
                          : std::strerror(errno)));
    p += n;
    offset += static_cast<uint64_t>(n);
    bytes -= static_cast<uint64_t>(n);
  }
}

void SafetensorsFile::read_f32(const std::string &name, const std::vector<int64_t> &expected_shape,
                               float *out) const {
  const TensorInfo &info = get(name);
  if (info.shape != expected_shape)
    throw Error(path_ + ": tensor '" + name + "' has shape " + shape_string(info.shape) +
                ", but the model expects " + shape_string(expected_shape) +
                "; the checkpoint was made for a different model configuration");
  if (info.dtype == "F32") {
    read_bytes(info, out);
    return;
  }
  if (info.dtype != "BF16" && info.dtype != "F16")
    throw Error(path_ + ": tensor '" + name + "' has dtype " + info.dtype +
                ", which cannot be read as float32; supported dtypes are F32, BF16 and F16");
  const int64_t count = info.numel();
  std::vector<uint16_t> half(count);
  read_bytes(info, half.data());
  const bool bf16 = info.dtype == "BF16";
  for (int64_t i = 0; i < count; ++i)
    out[i] = bf16 ? bf16_to_f32(half[i]) : f16_to_f32(half[i]);
}

std::vector<float> SafetensorsFile::read_f32(const std::string &name,
                                             const std::vector<int64_t> &expected_shape) const {
  std::vector<float> out(static_cast<size_t>(get(name).numel()));
  read_f32(name, expected_shape, out.data());
  return out;
}

void write_safetensors(const std::string &path, const std::vector<NamedTensor> &given,
                       const std::map<std::string, std::string> &metadata) {
  const std::vector<NamedTensor> tensors = unstacked(given); // one tensor per expert
  // Sorted by name, as the Python library writes them.
  std::vector<const NamedTensor *> order;
  for (const NamedTensor &t : tensors)
    order.push_back(&t);
  std::sort(order.begin(), order.end(),
            [](const NamedTensor *a, const NamedTensor *b) { return a->name < b->name; });

  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    bool first = true;
    for (const auto &[key, value] : metadata) {
      header += (first ? "" : ",") + json_quote(key) + ":" + json_quote(value);
      first = false;
    }
    header += "}";
  }
  uint64_t offset = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    const NamedTensor &t = *order[i];
    if (t.name.empty() || t.name == "__metadata__")
      throw Error(path + ": cannot write a tensor named '" + t.name +
                  "'; names must be non-empty and not \"__metadata__\"");
    if (i > 0 && order[i - 1]->name == t.name)
      throw Error(path + ": tensor '" + t.name + "' is given twice; names must be unique");
    const int64_t bytes = checked_bytes(t.shape, 4);
    if (bytes < 0)
      throw Error(path + ": tensor '" + t.name + "' has shape " + shape_string(t.shape) +
                  "; dimensions must be >= 0 and the size must fit in 64 bits");
    if (bytes > 0 && !t.data)
      throw Error(path + ": tensor '" + t.name + "' has shape " + shape_string(t.shape) +
                  " but no data pointer");
    header += (header.size() > 1 ? "," : "") + json_quote(t.name) +
              ":{\"dtype\":\"F32\",\"shape\":[";
    for (size_t k = 0; k < t.shape.size(); ++k)
      header += (k ? "," : "") + std::to_string(t.shape[k]);
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," +
              std::to_string(offset + bytes) + "]}";
    offset += static_cast<uint64_t>(bytes);
  }
  header += "}";
  // Padding keeps the data 8-byte aligned for readers that map the file.
  header.append((8 - header.size() % 8) % 8, ' ');

  AtomicFile out(path);
  const uint64_t n = header.size();
  out.write(&n, 8);
  out.write(header.data(), header.size());
  for (const NamedTensor *t : order)
    if (t->data)
      out.write(t->data, static_cast<size_t>(checked_bytes(t->shape, 4)));
  out.commit();
}

} // namespace megart
