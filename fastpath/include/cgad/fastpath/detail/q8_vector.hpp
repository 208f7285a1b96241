#pragma once
// The CPU backend's q8 encoder and decoder for whole blocks: the same codes as the per-element rule
// (q8_nearest, q8_dequantize in q8.hpp; the CUDA kernel runs q8_nearest_fast, which equals q8_nearest), computed
// without per-element table reads where an ISA allows it. proptests/fastpath/fastpath_q8_vector_test.cpp checks them
// against that rule on every one of the 2^32 floats for each of the six maps (q8_maps.hpp) (label long; a sampled
// version runs under ci).
//
// The encoder is, under AVX-512 on a CPU with VBMI2, a binary search over the thresholds' integer keys held in 16
// registers (Q8Map::search_key); otherwise (AVX2, or AVX-512 without VBMI2) q8_nearest_fast's line model (q8.hpp),
// 8 lanes at a time, with the bucket search for the elements the model leaves undecided. Neither reads a table per
// element. The decoder keeps the code table in 16 registers with AVX-512 and gathers it with AVX2.
#include "cgad/fastpath/cpu_isa.hpp"
#include "cgad/fastpath/detail/q8.hpp"

#include <cstddef>
#include <cstdint>

namespace cgad::fastpath {

// out[j] = q8_nearest(x[j], map) (= q8_nearest_fast) for j < count.
void q8_encode_nearest(const float* x, std::size_t count, const Q8Map& map, std::uint8_t* out, CpuIsa isa);

// codes[j] = bnb_sign_fix(codes[j], values[j], map) (block_step.hpp) for j < count, with the code's sign read
// from its index rather than from map.code: in a signed dynamic map the codes below zero_index are negative and
// the one at it is +0 (q8_maps.hpp), so the loop reads no table and vectorizes. Requires map.has_model
// (proptests/fastpath/fastpath_q8_vector_test.cpp checks it against bnb_sign_fix for every code and value class).
inline void bnb_sign_fix_block(std::uint8_t* codes, const float* values, std::size_t count, const Q8Map& map) {
  const std::int32_t zero = map.model.zero_index;
  for (std::size_t j = 0; j < count; ++j) {
    const std::uint32_t code_negative = codes[j] < zero ? 1u : 0u;
    const std::uint32_t value_negative = float_to_bits(values[j]) >> 31;
    const auto moved = static_cast<std::uint8_t>(values[j] > 0.0f ? codes[j] + 1 : codes[j] - 1);
    codes[j] = code_negative != value_negative ? moved : codes[j];
  }
}

// out[j] = q8_dequantize(codes[j], absmax, map) for j < count.
void q8_decode(const std::uint8_t* codes, std::size_t count, float absmax, const Q8Map& map, float* out, CpuIsa isa);

}  // namespace cgad::fastpath
