#pragma once
// NumPy arrays made through NumPy's Python API (numpy.frombuffer), never through pybind11's py::array: Debian's
// pybind11 2.10 carries its own copy of NumPy 1's C structures, and an array it allocates under NumPy 2 (whose
// dtype descriptor is laid out anew) gets the wrong strides -- every element read from the first few bytes. The
// buffer protocol and numpy.frombuffer mean the same thing under NumPy 1 and 2 (docs/python.md, "Packaging").
#include <pybind11/pybind11.h>

#include <cstddef>
#include <cstring>
#include <span>
#include <string>
#include <utility>

namespace cgad::python {

// A one-dimensional buffer over memory that `owner` keeps alive (the fast path's state of an optimizer): the
// object numpy.frombuffer views, so the array's base holds the owner.
struct OwnedBuffer {
  pybind11::object owner;
  void* data;
  pybind11::ssize_t count;
  pybind11::ssize_t itemsize;
  std::string format;  // the buffer protocol's struct format ("f", "h", "B", ...)
};

void bind_arrays(pybind11::module_& m);  // arrays.cpp: registers OwnedBuffer's buffer protocol

// numpy.frombuffer(buffer, dtype=format): an array over the buffer's memory, writable if the buffer is.
pybind11::object numpy_frombuffer(const pybind11::object& buffer, const std::string& format);

// A NumPy array of `count` uninitialized T in memory of its own (a bytearray), and a span to fill it through.
template <class T>
std::pair<pybind11::object, std::span<T>> numpy_empty(std::size_t count) {
  pybind11::object bytes = pybind11::reinterpret_steal<pybind11::object>(
      PyByteArray_FromStringAndSize(nullptr, static_cast<pybind11::ssize_t>(count * sizeof(T))));
  if (!bytes) throw pybind11::error_already_set();
  T* data = reinterpret_cast<T*>(PyByteArray_AsString(bytes.ptr()));
  return {numpy_frombuffer(bytes, pybind11::format_descriptor<T>::format()), std::span<T>(data, count)};
}

// A NumPy array holding a copy of `values`.
template <class T>
pybind11::object numpy_copy(std::span<const T> values) {
  auto [array, memory] = numpy_empty<T>(values.size());
  if (!values.empty()) std::memcpy(memory.data(), values.data(), values.size_bytes());
  return array;
}

// A NumPy array of As over `span` (no copy), whose base keeps `owner` alive.
template <class As, class T>
pybind11::object numpy_view(std::span<T> span, const pybind11::object& owner) {
  static_assert(sizeof(As) == sizeof(T));
  pybind11::object buffer = pybind11::cast(
      OwnedBuffer{owner, static_cast<void*>(span.data()), static_cast<pybind11::ssize_t>(span.size()),
                  static_cast<pybind11::ssize_t>(sizeof(As)), pybind11::format_descriptor<As>::format()});
  return numpy_frombuffer(buffer, pybind11::format_descriptor<As>::format());
}

}  // namespace cgad::python
