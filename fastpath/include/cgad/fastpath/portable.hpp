#pragma once
// What lets one header compile both as plain C++ (g++, the CPU backend) and as CUDA (nvcc, the kernel):
// CGAD_HD marks the per-element functions __host__ __device__ under nvcc and expands to nothing otherwise.
// Public, beside bf16.hpp, whose conversions the kernel and the users' code both call (docs/design.md §2).
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define CGAD_HD __host__ __device__
#else
#define CGAD_HD
#endif

namespace cgad::fastpath {

CGAD_HD inline std::uint32_t float_to_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
#endif
}

CGAD_HD inline float bits_to_float(std::uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
#endif
}

}  // namespace cgad::fastpath
