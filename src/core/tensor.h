// Tensor: a contiguous, row-major view of typed memory with a shape, plus an optional owner that keeps the
// storage alive. Weights view mmap'd checkpoint bytes; activations own their buffers.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>

#include "core/dtype.h"

namespace dg {

enum class Device : uint8_t { kCpu, kCuda };

struct Shape {
  std::array<int64_t, 4> dims{};
  int rank = 0;

  Shape() = default;
  Shape(std::initializer_list<int64_t> d);
  int64_t operator[](int i) const { return dims[static_cast<size_t>(i)]; }
  int64_t numel() const;
  bool operator==(const Shape& o) const;
  std::string str() const;  // "[4, 16, 32]"
};

struct Tensor {
  void* data = nullptr;
  DType dtype = DType::kF32;
  Shape shape;
  Device device = Device::kCpu;
  std::shared_ptr<void> owner;

  int64_t numel() const { return shape.numel(); }
  size_t nbytes() const;  // for a packed dtype: the planes of src/core/packed_layout.h, padding included
  bool empty() const { return data == nullptr; }
  template <typename T> T* as() { return static_cast<T*>(data); }
  template <typename T> const T* as() const { return static_cast<const T*>(data); }
  float* f32() { return as<float>(); }
  const float* f32() const { return as<float>(); }
  Tensor reshaped(Shape s) const;  // same storage, new shape of equal numel
};

// Host tensor with owned, zero-initialised storage (a packed dtype gets its planes' bytes).
Tensor host_tensor(DType t, Shape s);
// Non-owning view of host memory.
Tensor host_view(const void* data, DType t, Shape s);
// Rows [row0, row0 + rows) of a [rows, ...] tensor of an unpacked dtype, sharing its storage.
Tensor row_slice(const Tensor& t, int64_t row0, int64_t rows);

}  // namespace dg
