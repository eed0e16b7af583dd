#include "core/tensor.h"

#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "core/error.h"
#include "core/packed_layout.h"

namespace dg {

Shape::Shape(std::initializer_list<int64_t> d) {
  DG_CHECK(d.size() <= dims.size(), "tensor rank {} exceeds 4", d.size());
  for (int64_t v : d) dims[static_cast<size_t>(rank++)] = v;
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < rank; ++i) n *= dims[static_cast<size_t>(i)];
  return n;
}

bool Shape::operator==(const Shape& o) const {
  if (rank != o.rank) return false;
  for (int i = 0; i < rank; ++i)
    if (dims[static_cast<size_t>(i)] != o.dims[static_cast<size_t>(i)]) return false;
  return true;
}

std::string Shape::str() const {
  std::string s = "[";
  for (int i = 0; i < rank; ++i) s += fmt::format("{}{}", i ? ", " : "", dims[static_cast<size_t>(i)]);
  return s + "]";
}

size_t Tensor::nbytes() const {
  if (dtype_is_packed(dtype)) {
    const char* why = packed_shape_error(dtype, shape);
    DG_CHECK(why == nullptr, "a {} tensor cannot have shape {}: {}", dtype_name(dtype), shape.str(), why);
    return static_cast<size_t>(packed_layout(dtype, shape).total);
  }
  return static_cast<size_t>(numel()) * dtype_size(dtype);
}

Tensor Tensor::reshaped(Shape s) const {
  DG_CHECK(s.numel() == numel(), "reshape {} -> {} changes the element count", shape.str(), s.str());
  DG_CHECK(!dtype_is_packed(dtype), "a packed {} tensor {} cannot be reshaped", dtype_name(dtype), shape.str());
  Tensor t = *this;
  t.shape = s;
  return t;
}

Tensor host_tensor(DType t, Shape s) {
  Tensor out;
  out.dtype = t;
  out.shape = s;
  const size_t bytes = out.nbytes();
  // 64-byte alignment keeps vector loads aligned; zero-filled so reads of unwritten slots are deterministic.
  const size_t alloc = ((bytes + 63) / 64) * 64 + 64;
  void* p = std::aligned_alloc(64, alloc);
  DG_CHECK(p != nullptr, "out of host memory allocating {} bytes for a {} tensor", bytes, s.str());
  std::memset(p, 0, alloc);
  out.data = p;
  out.owner = std::shared_ptr<void>(p, [](void* q) { std::free(q); });
  return out;
}

Tensor host_view(const void* data, DType t, Shape s) {
  Tensor out;
  out.data = const_cast<void*>(data);
  out.dtype = t;
  out.shape = s;
  return out;
}

Tensor row_slice(const Tensor& t, int64_t row0, int64_t rows) {
  DG_CHECK(!dtype_is_packed(t.dtype) && t.shape.rank >= 1, "row_slice: {} tensor {} has no plain rows",
           dtype_name(t.dtype), t.shape.str());
  DG_CHECK(row0 >= 0 && rows >= 0 && row0 + rows <= t.shape[0], "row_slice: rows [{}, {}) of a tensor {}", row0,
           row0 + rows, t.shape.str());
  Tensor v = t;
  const int64_t per_row = t.shape[0] == 0 ? 0 : t.numel() / t.shape[0];
  v.data = static_cast<char*>(t.data) + static_cast<size_t>(row0 * per_row) * dtype_size(t.dtype);
  v.shape.dims[0] = rows;
  return v;
}

}  // namespace dg
