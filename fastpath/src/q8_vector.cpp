#include "cgad/fastpath/detail/q8_vector.hpp"

#include "cgad/fastpath/detail/q8_maps.hpp"

#if defined(CGAD_CPU_VECTOR_ISAS)
#include <immintrin.h>
#endif

namespace cgad::fastpath {
namespace {

// The bucket search element by element: on a CPU core its two table reads (L1 hits) cost ~2 ns per element where
// q8_nearest_fast's scalar arithmetic costs ~11 (measured on Zen 4, GCC 12, baseline x86-64); the model pays off
// only 8 lanes at a time here, and on the GPU, where the table's reads are what it saves.
void encode_per_element(const float* x, std::size_t count, const Q8Map& map, std::uint8_t* out) {
  for (std::size_t j = 0; j < count; ++j) out[j] = q8_nearest(x[j], map);
}

#if defined(CGAD_CPU_VECTOR_ISAS)
// q8_nearest_fast's model (q8.hpp) for 8 lanes with AVX2, and the bucket search where it does not decide (the AVX-512
// build runs it too: a 16-lane version was no faster on Zen 4, whose 512-bit units are two 256-bit halves).
__attribute__((target("avx2"))) void encode_avx2(const float* x, std::size_t count, const Q8Map& map, const Q8Model& m,
                                                 std::uint8_t* out) {
  const __m256 nearness = _mm256_set1_ps(kQ8ModelNearness), sign_bit = _mm256_set1_ps(-0.0f);
  const __m256i magnitude_mask = _mm256_set1_epi32(0x7FFFFFFF), inf_bits = _mm256_set1_epi32(0x7F800000);
  const __m256i one_bits = _mm256_set1_epi32(0x3F800000), low_bits = _mm256_set1_epi32(kQ8ModelLowBits);
  const __m256i minus_all = _mm256_set1_epi32(-kQ8ModelGroups);
  const __m256i zeros = _mm256_setzero_si256(), all_ones = _mm256_set1_epi32(-1), ones = _mm256_set1_epi32(1);
  const __m256i missing_negative = _mm256_set1_epi32(kQ8ModelGroups - m.negative_groups);
  const __m256i boundary_table = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(m.boundary));
  const __m256 k_table = _mm256_loadu_ps(m.k), c_table = _mm256_loadu_ps(m.c);
  const __m256i base_table = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(m.base));
  const __m256i max_table = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(m.max_internal));
  const __m256i zero_index = _mm256_set1_epi32(m.zero_index);
  __m256i boundary[kQ8ModelGroups];
  for (int g = 0; g < kQ8ModelGroups; ++g) boundary[g] = _mm256_set1_epi32(m.boundary[g]);
  // Byte 0 of each dword to the bottom of its 128-bit lane, then the two lanes' 4 bytes together.
  const __m256i low_bytes = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,  //
                                             0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
  const __m256i gather_lanes = _mm256_setr_epi32(0, 4, 0, 0, 0, 0, 0, 0);
  std::size_t j = 0;
  for (; j + 8 <= count; j += 8) {
    const __m256i bits = _mm256_castps_si256(_mm256_loadu_ps(x + j));
    const __m256i negative = _mm256_srai_epi32(bits, 31);
    const __m256i magnitude = _mm256_and_si256(bits, magnitude_mask);
    const __m256i is_nan = _mm256_cmpgt_epi32(magnitude, inf_bits);
    // |x| clamped to [2^-30, 1] as q8_model_index does, as bits: non-negative floats order as their bit patterns.
    const __m256i clamped = _mm256_max_epi32(_mm256_min_epi32(magnitude, one_bits), low_bits);
    const __m256 y = _mm256_castsi256_ps(clamped);
    // P < |x| on the positive side, P ≤ |x| (P < |x| + one float) on the negative side (q8.hpp).
    const __m256i compared = _mm256_add_epi32(clamped, _mm256_and_si256(negative, ones));
    __m256i minus_groups = zeros;  // −G
    for (int g = 0; g < kQ8ModelGroups; ++g)
      minus_groups = _mm256_add_epi32(minus_groups, _mm256_cmpgt_epi32(compared, boundary[g]));
    minus_groups =
        _mm256_max_epi32(minus_groups, _mm256_add_epi32(minus_all, _mm256_and_si256(negative, missing_negative)));
    const __m256i group = _mm256_xor_si256(minus_groups, all_ones);  // G − 1 (−1 for G = 0: blended out below)
    const __m256i on_boundary =
        _mm256_and_si256(negative, _mm256_cmpeq_epi32(clamped, _mm256_permutevar8x32_epi32(boundary_table, group)));
    const __m256 pos = _mm256_sub_ps(_mm256_mul_ps(y, _mm256_permutevar8x32_ps(k_table, group)),
                                     _mm256_permutevar8x32_ps(c_table, group));
    const __m256 offset = _mm256_sub_ps(pos, _mm256_round_ps(pos, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    const __m256 near = _mm256_or_ps(_mm256_cmp_ps(_mm256_andnot_ps(sign_bit, offset), nearness, _CMP_LT_OQ),
                                     _mm256_castsi256_ps(on_boundary));
    __m256i internal = _mm256_cvttps_epi32(_mm256_floor_ps(pos));
    internal = _mm256_min_epi32(_mm256_max_epi32(internal, zeros), _mm256_permutevar8x32_epi32(max_table, group));
    __m256i below = _mm256_add_epi32(_mm256_permutevar8x32_epi32(base_table, group), internal);
    below = _mm256_andnot_si256(_mm256_cmpeq_epi32(minus_groups, zeros), below);
    const __m256i signed_below = _mm256_sub_epi32(_mm256_xor_si256(below, negative), negative);
    const __m256i index = _mm256_andnot_si256(is_nan, _mm256_add_epi32(zero_index, signed_below));
    const __m256i packed = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(index, low_bytes), gather_lanes);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out + j), _mm256_castsi256_si128(packed));
    const int near_lanes = _mm256_movemask_ps(near);
    if (near_lanes != 0) {
      for (int lane = 0; lane < 8; ++lane) {
        if ((near_lanes >> lane) & 1) out[j + lane] = q8_nearest(x[j + lane], map);
      }
    }
  }
  encode_per_element(x + j, count - j, map, out + j);
}

// The AVX-512 encoder: the count of thresholds below x (q8.hpp) by a binary search over integer keys, the
// thresholds' keys held in 16 registers as the levels of a search tree (Q8Map::search_key). Node n starts at 1;
// each level compares x's key with node n's threshold and goes to 2n + [threshold < x], so after the 8 levels
// n − 256 is the count, the index q8_nearest returns. Levels 0–3 read one register (nodes 1–15), level 4 one
// (16–31), 5 two, 6 four and 7 eight, by permutes on n's low bits. A level is three instructions: the permute,
// threshold − key (negative exactly where threshold < x), and VBMI2's double shift, which appends that sign bit to
// n. The difference cannot overflow: x's key is first clamped to those of ±2, which changes no comparison (every
// threshold lies in [−1, 1), the codes in [−1, 1]). Exact for every non-NaN x by the key's order (q8_search_key); NaN's
// lanes are stored as index 0, as q8_nearest sends it. No table read per element and no undecided elements, where the
// line model (encode_avx2) sends ~2^-11 of them to the bucket search. About 0.55 ns per element against encode_avx2's
// 0.75 on Zen 4 (Q8Encode in bench/fastpath_cpu_bench.cpp; docs/results/performance.md).
#define CGAD_Q8_SEARCH_TARGET __attribute__((target("arch=x86-64-v4,avx512vbmi2")))

struct SearchTree {
  __m512i level[16];
};

CGAD_Q8_SEARCH_TARGET __attribute__((always_inline)) inline __m512i search_level(__m512i n, __m512i key,
                                                                                 __m512i threshold) {
  return _mm512_shldi_epi32(n, _mm512_sub_epi32(threshold, key), 1);
}

// The nodes after the 8 levels (256 + the count) for V vectors of 16 floats' bit patterns, level by level across
// the V vectors: each vector's levels are a chain of dependent permutes and subtractions, which the V interleave.
// The shifts, clamps and one-register permutes are the zero-masking forms under an all-ones mask (the same
// instructions): GCC 12's unmasked ones start from _mm512_undefined_epi32, which -Wmaybe-uninitialized reports once
// inlined here.
template <int V>
CGAD_Q8_SEARCH_TARGET __attribute__((always_inline)) inline void search(const SearchTree& t, const __m512i* bits,
                                                                        __m512i* n) {
  constexpr __mmask16 all = 0xFFFF;
  const __m512i lowest = _mm512_set1_epi32(q8_search_key(0xC0000000u));   // −2
  const __m512i highest = _mm512_set1_epi32(q8_search_key(0x40000000u));  // 2
  __m512i key[V];
  for (int v = 0; v < V; ++v) {
    const __m512i flip = _mm512_maskz_srli_epi32(all, _mm512_maskz_srai_epi32(all, bits[v], 31), 1);
    const __m512i unclamped = _mm512_xor_si512(bits[v], flip);
    key[v] = _mm512_maskz_min_epi32(all, _mm512_maskz_max_epi32(all, unclamped, lowest), highest);
    n[v] = _mm512_set1_epi32(1);
  }
  for (int l = 0; l < 4; ++l) {
    for (int v = 0; v < V; ++v)
      n[v] = search_level(n[v], key[v], _mm512_maskz_permutexvar_epi32(all, n[v], t.level[0]));
  }
  for (int v = 0; v < V; ++v) n[v] = search_level(n[v], key[v], _mm512_maskz_permutexvar_epi32(all, n[v], t.level[1]));
  for (int v = 0; v < V; ++v) {
    n[v] = search_level(n[v], key[v], _mm512_permutex2var_epi32(t.level[2], n[v], t.level[3]));
  }
  const __m512i bit5 = _mm512_set1_epi32(32), bit6 = _mm512_set1_epi32(64);
  for (int v = 0; v < V; ++v) {
    const __m512i low = _mm512_permutex2var_epi32(t.level[4], n[v], t.level[5]);
    const __m512i high = _mm512_permutex2var_epi32(t.level[6], n[v], t.level[7]);
    n[v] = search_level(n[v], key[v], _mm512_mask_blend_epi32(_mm512_test_epi32_mask(n[v], bit5), low, high));
  }
  for (int v = 0; v < V; ++v) {
    __m512i pick[4];
    for (int p = 0; p < 4; ++p) pick[p] = _mm512_permutex2var_epi32(t.level[8 + 2 * p], n[v], t.level[9 + 2 * p]);
    const __mmask16 leaf5 = _mm512_test_epi32_mask(n[v], bit5), leaf6 = _mm512_test_epi32_mask(n[v], bit6);
    const __m512i low = _mm512_mask_blend_epi32(leaf5, pick[0], pick[1]);
    const __m512i high = _mm512_mask_blend_epi32(leaf5, pick[2], pick[3]);
    n[v] = search_level(n[v], key[v], _mm512_mask_blend_epi32(leaf6, low, high));
  }
}

// The index's byte of the node (n − 256 ≡ n mod 256) to the `lanes` of `to`, 0 where x is NaN: a negative NaN's key
// lies below every threshold's and needs nothing, a positive one's above them all (bits > +Inf's as signed integers).
CGAD_Q8_SEARCH_TARGET __attribute__((always_inline)) inline void store_index(std::uint8_t* to, __m512i bits, __m512i n,
                                                                             __mmask16 lanes) {
  const __mmask16 number = _mm512_cmple_epi32_mask(bits, _mm512_set1_epi32(0x7F800000));
  _mm_mask_storeu_epi8(to, lanes, _mm512_maskz_cvtepi32_epi8(number, n));
}

CGAD_Q8_SEARCH_TARGET void encode_avx512(const float* x, std::size_t count, const Q8Map& map, std::uint8_t* out) {
  SearchTree t;
  for (int r = 0; r < 16; ++r) t.level[r] = _mm512_loadu_si512(map.search_key + 16 * r);
  constexpr int kVectors = 4;
  constexpr std::size_t kLanes = 16, kRound = kVectors * kLanes;
  std::size_t j = 0;
  for (; j + kRound <= count; j += kRound) {
    __m512i bits[kVectors], n[kVectors];
    for (int v = 0; v < kVectors; ++v) bits[v] = _mm512_castps_si512(_mm512_loadu_ps(x + j + kLanes * v));
    search<kVectors>(t, bits, n);
    for (int v = 0; v < kVectors; ++v) store_index(out + j + kLanes * v, bits[v], n[v], 0xFFFF);
  }
  for (; j < count; j += kLanes) {
    const auto lanes = static_cast<__mmask16>(count - j >= kLanes ? 0xFFFF : (1u << (count - j)) - 1);
    const __m512i bits = _mm512_castps_si512(_mm512_maskz_loadu_ps(lanes, x + j));
    __m512i n;
    search<1>(t, &bits, &n);
    store_index(out + j, bits, n, lanes);
  }
}

// q8_dequantize for 8 codes at a time with AVX2's gather: 0.41–0.47 ns per element against 0.60 for scalar loads
// on this Zen 4 (one core, a 256-element block in L1; the issue that asked for this measured them equal on Zen 3).
__attribute__((target("avx2"))) void decode_avx2(const std::uint8_t* codes, std::size_t count, float absmax,
                                                 const Q8Map& map, float* out) {
  const __m256 scale = _mm256_set1_ps(absmax);
  std::size_t j = 0;
  for (; j + 8 <= count; j += 8) {
    const __m256i index = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes + j)));
    _mm256_storeu_ps(out + j, _mm256_mul_ps(_mm256_i32gather_ps(map.code, index, 4), scale));
  }
  for (; j < count; ++j) out[j] = q8_dequantize(codes[j], absmax, map);
}

// q8_dequantize for 16 codes at a time with AVX-512: the 256-entry code table lives in 16 registers; a two-table
// permute picks from 32 codes by an index's low 5 bits, and its bits 5–7 then select among the 8 results
// (0.25–0.29 ns per element, measured as above).
__attribute__((target("arch=x86-64-v4"))) void decode_avx512(const std::uint8_t* codes, std::size_t count, float absmax,
                                                             const Q8Map& map, float* out) {
  __m512 table[16];
  for (int t = 0; t < 16; ++t) table[t] = _mm512_loadu_ps(map.code + 16 * t);
  const __m512 scale = _mm512_set1_ps(absmax);
  std::size_t j = 0;
  for (; j + 16 <= count; j += 16) {
    const __m512i index = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + j)));
    __m512 pick[8];
    for (int p = 0; p < 8; ++p) pick[p] = _mm512_permutex2var_ps(table[2 * p], index, table[2 * p + 1]);
    const __mmask16 bit5 = _mm512_test_epi32_mask(index, _mm512_set1_epi32(32));
    const __mmask16 bit6 = _mm512_test_epi32_mask(index, _mm512_set1_epi32(64));
    const __mmask16 bit7 = _mm512_test_epi32_mask(index, _mm512_set1_epi32(128));
    for (int p = 0; p < 4; ++p) pick[p] = _mm512_mask_blend_ps(bit5, pick[2 * p], pick[2 * p + 1]);
    for (int p = 0; p < 2; ++p) pick[p] = _mm512_mask_blend_ps(bit6, pick[2 * p], pick[2 * p + 1]);
    const __m512 code = _mm512_mask_blend_ps(bit7, pick[0], pick[1]);
    _mm512_storeu_ps(out + j, _mm512_mul_ps(code, scale));  // q8_dequantize's one product
  }
  for (; j < count; ++j) out[j] = q8_dequantize(codes[j], absmax, map);
}
#endif

}  // namespace

void q8_encode_nearest(const float* x, std::size_t count, const Q8Map& map, std::uint8_t* out, CpuIsa isa) {
#if defined(CGAD_CPU_VECTOR_ISAS)
  // VBMI2 is not part of x86-64-v4 (Ice Lake and Zen 4 have it, Skylake-X has not): asked of the CPU once.
  static const bool vbmi2 = __builtin_cpu_supports("avx512vbmi2") != 0;
  if (isa == CpuIsa::avx512 && vbmi2) return encode_avx512(x, count, map, out);
  if (isa != CpuIsa::generic) {
    if (map.has_model != 0) return encode_avx2(x, count, map, map.model, out);
  }
#else
  (void)isa;
#endif
  encode_per_element(x, count, map, out);
}

namespace {
// The baseline: a table read per element (GCC would emulate a gather lane by lane, slower still, so the loop is
// kept scalar).
__attribute__((optimize("no-tree-vectorize"))) void decode_per_element(const std::uint8_t* codes, std::size_t count,
                                                                       float absmax, const Q8Map& map, float* out) {
  for (std::size_t j = 0; j < count; ++j) out[j] = q8_dequantize(codes[j], absmax, map);
}
}  // namespace

void q8_decode(const std::uint8_t* codes, std::size_t count, float absmax, const Q8Map& map, float* out, CpuIsa isa) {
#if defined(CGAD_CPU_VECTOR_ISAS)
  if (isa == CpuIsa::avx512) return decode_avx512(codes, count, absmax, map, out);
  if (isa == CpuIsa::avx2) return decode_avx2(codes, count, absmax, map, out);
#else
  (void)isa;
#endif
  decode_per_element(codes, count, absmax, map, out);
}

}  // namespace cgad::fastpath
