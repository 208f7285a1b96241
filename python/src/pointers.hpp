#pragma once
// Tensor data pointers as the Python side passes them: integers (torch's data_ptr()), checked there for dtype,
// device and contiguity (cgad/torch/_tensors.py). 0 stands for a tensor that has no storage (an empty one, or
// one the step does not touch).
#include <cstdint>
#include <vector>

namespace cgad::python {

template <class T>
std::vector<T*> pointers(const std::vector<std::uintptr_t>& addresses) {
  std::vector<T*> out;
  out.reserve(addresses.size());
  for (const std::uintptr_t a : addresses) out.push_back(reinterpret_cast<T*>(a));
  return out;
}

}  // namespace cgad::python
