#pragma once
// The CPU backend's q8 encoder and decoder for whole blocks: the same codes as the per-element rule
// (q8_nearest, q8_dequantize in q8.hpp, which the CUDA kernel runs), computed without table lookups where an
// ISA allows it. proptests/fastpath_q8_vector_test.cpp checks them against that rule on every one of the 2^32
// floats for each of the four maps (label long; a sampled version runs under ci).
//
// The encoder is q8_nearest_fast's line model (q8.hpp), 8 lanes at a time, with the bucket search for the
// elements the model leaves undecided: no table read per element otherwise. The decoder keeps the code table in
// 16 registers with AVX-512 and gathers it with AVX2.
#include "cgad/fastpath/cpu_isa.hpp"
#include "cgad/fastpath/q8.hpp"

#include <cstddef>
#include <cstdint>

namespace cgad::fastpath {

// out[j] = q8_nearest(x[j], map) (= q8_nearest_fast) for j < count.
void q8_encode_nearest(const float* x, std::size_t count, const Q8Map& map, std::uint8_t* out, CpuIsa isa);

// out[j] = q8_dequantize(codes[j], absmax, map) for j < count.
void q8_decode(const std::uint8_t* codes, std::size_t count, float absmax, const Q8Map& map, float* out, CpuIsa isa);

}  // namespace cgad::fastpath
