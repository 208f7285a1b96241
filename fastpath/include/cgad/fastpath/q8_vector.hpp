#pragma once
// The CPU backend's q8 encoder and decoder for whole blocks: the same codes as the per-element rule
// (q8_nearest, q8_dequantize in q8.hpp, which the CUDA kernel runs), computed without table lookups where an
// ISA allows it. proptests/fastpath_q8_vector_test.cpp checks them against that rule on every one of the 2^32
// floats for each of the four maps (label long; a sampled version runs under ci).
//
// Why not the bucket table: a table read per lane costs ~1.5 cycles on the x86 cores here, gather or not, and
// the nearest search makes two per moment. The vector encoder instead uses the maps' construction (q8_maps.hpp):
// each side of zero is 7 groups of codes, group g spanning one decade with its codes means of a linspace, so
// its thresholds lie almost exactly on a line. For |x| (clamped to 1):
//   G = the number of group boundaries (the thresholds below each group's first code, and below the code 1)
//       strictly below |x| — exact compares with the map's own thresholds;
//   pos = |x|·K_g − C_g in float, the line through the group's internal thresholds, which puts the j-th one
//       within δ/4 of the integer j (checked when the model is built, for both sides and both semantics);
//   the count below |x| = base_g + clamp(⌊pos⌋, 0, size_g − 1), and the code is zero_index ± that count.
// That is exact whenever pos lies at least δ from an integer (pos is monotone in |x|, so every threshold at
// position ≤ j + δ/4 lies below |x| and every one at ≥ j + 1 − δ/4 above it). Elements closer than δ — about
// 2δ = 2^-11 of them — and NaN take the per-element rule. The negative side's "≤ mirrored threshold" is a "<"
// with the threshold's float predecessor, so both semantics' tie rules (the thresholds encode them) survive.
#include "cgad/fastpath/cpu_isa.hpp"
#include "cgad/fastpath/q8.hpp"

#include <cstddef>
#include <cstdint>

namespace cgad::fastpath {

// out[j] = q8_nearest(x[j], map) for j < count.
void q8_encode_nearest(const float* x, std::size_t count, const Q8Map& map, std::uint8_t* out, CpuIsa isa);

// out[j] = q8_dequantize(codes[j], absmax, map) for j < count.
void q8_decode(const std::uint8_t* codes, std::size_t count, float absmax, const Q8Map& map, float* out, CpuIsa isa);

// Whether the vector encoder has a model of this map (the four dynamic maps do; any other map is encoded by the
// per-element rule on every ISA).
bool q8_has_vector_model(const Q8Map& map);

}  // namespace cgad::fastpath
