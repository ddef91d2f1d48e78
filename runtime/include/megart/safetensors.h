// safetensors checkpoints (the Hugging Face format): an 8-byte little-endian header length N,
// N bytes of JSON {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {..}},
// then the raw tensor data (offsets relative to its start). The header is validated completely
// when the file is opened; tensor data is read on demand.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace megart {

struct TensorInfo {
  std::string name;
  std::string dtype; // as in the file: "F32", "BF16", "F16", "I64", ...
  std::vector<int64_t> shape;
  uint64_t data_begin = 0; // data_offsets, relative to the data section
  uint64_t data_end = 0;
  int64_t numel() const;
};

// "[768, 2304]"
std::string shape_string(const std::vector<int64_t> &shape);

class SafetensorsFile {
public:
  static SafetensorsFile open(const std::string &path);

  const std::string &path() const { return path_; }
  // nullptr when absent.
  const TensorInfo *find(const std::string &name) const;
  // Throws when absent, naming the tensor and a few names the file does have.
  const TensorInfo &get(const std::string &name) const;
  std::vector<std::string> names() const; // sorted
  const std::map<std::string, std::string> &metadata() const { return metadata_; }

  // Reads tensor `name` as float32 into out[numel], converting from BF16 or F16. Throws if the
  // tensor is missing, its shape differs from `expected_shape`, or its dtype is not one of
  // F32/BF16/F16.
  void read_f32(const std::string &name, const std::vector<int64_t> &expected_shape,
                float *out) const;
  std::vector<float> read_f32(const std::string &name,
                              const std::vector<int64_t> &expected_shape) const;

private:
  struct Handle;
  SafetensorsFile() = default;
  void read_bytes(const TensorInfo &info, void *out) const;

  std::string path_;
  std::shared_ptr<const Handle> file_; // open descriptor, shared by copies
  uint64_t data_start_ = 0;            // 8 + N
  std::map<std::string, TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

struct NamedTensor {
  std::string name;
  std::vector<int64_t> shape;
  const float *data = nullptr; // numel floats, row-major
};

// Writes F32 tensors like the Python library does: keys sorted, data in that order, header
// padded with spaces to a multiple of 8. Atomic: the file appears complete or not at all. A
// stacked tensor (`*` in its name, megart/stacked_tensors.h) is written as its members.
void write_safetensors(const std::string &path, const std::vector<NamedTensor> &tensors,
                       const std::map<std::string, std::string> &metadata = {});

} // namespace megart
