// A zero-initialised, 64-byte-aligned heap array: parameter, gradient and optimizer-state
// buffers and the step arena. 64 bytes is a cache line and the widest vector register, which
// is what ProgramDesc promises generated code for the arena.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

namespace megart {

constexpr std::size_t kBufferAlignment = 64;

// `bytes` of zeroed memory aligned to kBufferAlignment (a valid pointer also for 0 bytes);
// throws std::bad_alloc. Free with std::free.
inline void *allocate_aligned_zeroed(std::size_t bytes) {
  // aligned_alloc needs a size that is a multiple of the alignment, and never 0 here.
  bytes = (bytes + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment;
  if (bytes == 0)
    bytes = kBufferAlignment;
  void *p = std::aligned_alloc(kBufferAlignment, bytes);
  if (!p)
    throw std::bad_alloc();
  std::memset(p, 0, bytes);
  return p;
}

template <typename T> class AlignedBuffer {
public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(std::size_t count)
      : data_(static_cast<T *>(allocate_aligned_zeroed(count * sizeof(T)))), count_(count) {}

  T *data() { return data_.get(); }
  const T *data() const { return data_.get(); }
  std::size_t size() const { return count_; }
  T &operator[](std::size_t i) { return data_.get()[i]; }
  const T &operator[](std::size_t i) const { return data_.get()[i]; }

private:
  struct Free {
    void operator()(T *p) const { std::free(p); }
  };
  std::unique_ptr<T, Free> data_;
  std::size_t count_ = 0;
};

} // namespace megart
