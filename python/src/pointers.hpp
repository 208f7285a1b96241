#pragma once
// Tensor data pointers as the Python side passes them: integers (torch's data_ptr()), checked there for dtype,
// device and contiguity (cgad/torch/_tensors.py). 0 stands for a tensor that has no storage (an empty one, or
// one the step does not touch).
#include "cgad/core/errors.hpp"

#include <pybind11/buffer_info.h>

#include <cstdint>
#include <span>
#include <vector>

namespace cgad::python {

template <class T>
std::vector<T*> pointers(const std::vector<std::uintptr_t>& addresses) {
  std::vector<T*> out;
  out.reserve(addresses.size());
  for (const std::uintptr_t a : addresses) out.push_back(reinterpret_cast<T*>(a));
  return out;
}

// A one-dimensional, contiguous buffer of bytes (bytes, bytearray, a uint8 NumPy array) as a span.
inline std::span<const unsigned char> byte_span(const pybind11::buffer_info& info) {
  if (info.itemsize != 1 || info.ndim != 1 || (info.size > 1 && info.strides[0] != 1)) {
    throw core::InputError("state bytes must be a one-dimensional contiguous buffer of bytes (uint8)");
  }
  return {static_cast<const unsigned char*>(info.ptr), static_cast<std::size_t>(info.size)};
}

}  // namespace cgad::python
