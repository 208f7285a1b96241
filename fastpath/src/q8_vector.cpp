#include "cgad/fastpath/q8_vector.hpp"

#include "cgad/fastpath/q8_maps.hpp"

#include <array>
#include <cmath>
#include <limits>
#include <optional>

#if defined(CGAD_CPU_VECTOR_ISAS)
#include <immintrin.h>
#endif

namespace cgad::fastpath {
namespace {

// δ of q8_vector.hpp: how close to an integer pos may come before the element takes the per-element rule. The
// thresholds' own distance from the line (the maps' float roundings) and pos's float evaluation are ~1e-5;
// δ = 2^-12 leaves a factor > 10, and sends ~2^-11 of the elements (one 8-wide vector in ~250) to the rule.
constexpr float kNearness = 0x1p-12f;
constexpr int kGroups = 8;  // 7 decades of codes, then the code 1 alone

// The vector encoder's description of one map (q8_vector.hpp): per group g, the boundary below its first code
// (the positive side's, as float bits), the line pos = y·K − C, the count of thresholds below the group's first
// code (base), and the number of its internal thresholds (max_internal). The negative side's boundaries
// (mirrored and compared with ≤, i.e. "<" with their predecessors) are the positive ones or one float below
// them (a cgad midpoint that is a float is its own mirror; one that is not rounds down on one side and up on
// the other; bnb's tie rule alternates with the index's parity, which mirroring flips, so its are the positive
// ones): a negative lane compares |x| ≤ P, which differs from |x| < P only where |x| is a boundary, and such
// lanes take the per-element rule. negative_groups: the groups the negative side has (7 signed: no code −1; 0).
struct VectorModel {
  std::int32_t zero_index = 0;
  std::int32_t negative_groups = 0;
  std::int32_t boundary[kGroups] = {};
  float k[kGroups] = {}, c[kGroups] = {};
  std::int32_t base[kGroups] = {}, max_internal[kGroups] = {};
};

float predecessor(float x) { return std::nextafter(x, -std::numeric_limits<float>::infinity()); }

// The model of a map built as q8_maps.hpp says (zero at index 127 or 0, 1 at 255, groups of 2^g or 2^(g+1)
// codes), or none when the map is not of that shape or a threshold lies farther than δ/4 from its line.
std::optional<VectorModel> build_model(const Q8Map& map) {
  int zero = -1;
  for (int k = 0; k < kQ8Codes; ++k) {
    if (map.code[k] == 0.0f) zero = k;
  }
  if ((zero != 0 && zero != 127) || map.code[kQ8Codes - 1] != 1.0f) return std::nullopt;
  const bool is_signed = zero == 127;
  int size[kGroups], first[kGroups];
  int rank = 0;
  for (int g = 0; g < kGroups; ++g) {
    size[g] = g == kGroups - 1 ? 1 : (is_signed ? 1 << g : 2 << g);
    first[g] = rank;
    rank += size[g];
  }
  if (rank != kQ8Codes - 1 - zero) return std::nullopt;
  // Thresholds from zero outward: positive[r] lies below the r-th code above 0, negative[r] (mirrored, compared
  // with ≤, so stored as its predecessor for <) above the r-th code below 0.
  const auto positive = [&](int r) { return map.threshold[zero + r]; };
  const auto negative = [&](int r) { return predecessor(-map.threshold[zero - 1 - r]); };
  VectorModel model;
  model.zero_index = zero;
  const auto bits = [](float x) { return static_cast<std::int32_t>(float_to_bits(x)); };
  model.negative_groups = is_signed ? kGroups - 1 : 0;
  for (int g = 0; g < kGroups; ++g) {
    const int f = first[g], n = size[g];
    model.boundary[g] = bits(positive(f));
    const std::int32_t shift = is_signed && g < kGroups - 1 ? bits(positive(f)) - bits(negative(f)) : 0;
    if (shift != 0 && shift != 1) return std::nullopt;
    model.base[g] = f + 1;
    model.max_internal[g] = n - 1;
    double k = 0, c = -0.5;  // one code: no internal threshold, pos = 0.5 (never near an integer)
    if (n == 2) {
      k = 1.0 / (static_cast<double>(positive(f + 1)) - positive(f));
      c = positive(f + 1) * k - 1;
    } else if (n > 2) {
      k = (n - 2) / (static_cast<double>(positive(f + n - 1)) - positive(f + 1));
      c = positive(f + 1) * k - 1;
    }
    model.k[g] = static_cast<float>(k);
    model.c[g] = static_cast<float>(c);
    for (int side = 0; side < (is_signed ? 2 : 1); ++side) {
      for (int j = 1; j < n; ++j) {
        const float t = side == 0 ? positive(f + j) : negative(f + j);
        const float pos = t * model.k[g] - model.c[g];  // the kernel's float evaluation
        if (!(std::fabs(pos - static_cast<float>(j)) <= kNearness / 4)) return std::nullopt;
      }
    }
  }
  return model;
}

const VectorModel* model_for(const Q8Map& map) {
  struct Entry {
    const Q8Map* map;
    std::optional<VectorModel> model;
  };
  static const std::array<Entry, 4> models = [] {
    std::array<Entry, 4> all;
    int n = 0;
    for (Q8Semantics semantics : {Q8Semantics::cgad, Q8Semantics::bnb}) {
      for (Q8MapKind kind : {Q8MapKind::signed_map, Q8MapKind::unsigned_map}) {
        const Q8Map& m = dynamic_map(kind, semantics);
        all[static_cast<std::size_t>(n++)] = {&m, build_model(m)};
      }
    }
    return all;
  }();
  for (const Entry& e : models) {
    if (e.map == &map) return e.model ? &*e.model : nullptr;
  }
  return nullptr;
}

void encode_per_element(const float* x, std::size_t count, const Q8Map& map, std::uint8_t* out) {
  for (std::size_t j = 0; j < count; ++j) out[j] = q8_nearest(x[j], map);
}

#if defined(CGAD_CPU_VECTOR_ISAS)
// q8_vector.hpp's encoder, 8 lanes of AVX2 (the AVX-512 build runs it too: Zen 4's 512-bit units are two
// 256-bit halves, and the permutes here index 8-entry tables).
__attribute__((target("avx2"))) void encode_avx2(const float* x, std::size_t count, const Q8Map& map,
                                                 const VectorModel& m, std::uint8_t* out) {
  const __m256 nearness = _mm256_set1_ps(kNearness), sign_bit = _mm256_set1_ps(-0.0f);
  const __m256i magnitude_mask = _mm256_set1_epi32(0x7FFFFFFF), inf_bits = _mm256_set1_epi32(0x7F800000);
  const __m256i one_bits = _mm256_set1_epi32(0x3F800000), minus_all = _mm256_set1_epi32(-kGroups);
  const __m256i zeros = _mm256_setzero_si256(), all_ones = _mm256_set1_epi32(-1), ones = _mm256_set1_epi32(1);
  const __m256i missing_negative = _mm256_set1_epi32(kGroups - m.negative_groups);
  const __m256i boundary_table = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(m.boundary));
  const __m256 k_table = _mm256_loadu_ps(m.k), c_table = _mm256_loadu_ps(m.c);
  const __m256i base_table = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(m.base));
  const __m256i max_table = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(m.max_internal));
  const __m256i zero_index = _mm256_set1_epi32(m.zero_index);
  __m256i boundary[kGroups];
  for (int g = 0; g < kGroups; ++g) boundary[g] = _mm256_set1_epi32(m.boundary[g]);
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
    // |x| clamped to 1 (no threshold lies above it), as bits: non-negative floats order as their bit patterns.
    const __m256i clamped = _mm256_min_epi32(magnitude, one_bits);
    const __m256 y = _mm256_castsi256_ps(clamped);
    // P < |x| on the positive side, P ≤ |x| (P < |x| + one float) on the negative side (see VectorModel).
    const __m256i compared = _mm256_add_epi32(clamped, _mm256_and_si256(negative, ones));
    __m256i minus_groups = zeros;  // −G
    for (int g = 0; g < kGroups; ++g) minus_groups = _mm256_add_epi32(minus_groups, _mm256_cmpgt_epi32(compared, boundary[g]));
    minus_groups = _mm256_max_epi32(minus_groups, _mm256_add_epi32(minus_all, _mm256_and_si256(negative, missing_negative)));
    const __m256i group = _mm256_xor_si256(minus_groups, all_ones);  // G − 1 (−1 for G = 0: blended out below)
    const __m256i on_boundary = _mm256_and_si256(negative, _mm256_cmpeq_epi32(clamped, _mm256_permutevar8x32_epi32(boundary_table, group)));
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

bool q8_has_vector_model(const Q8Map& map) { return model_for(map) != nullptr; }

void q8_encode_nearest(const float* x, std::size_t count, const Q8Map& map, std::uint8_t* out, CpuIsa isa) {
#if defined(CGAD_CPU_VECTOR_ISAS)
  if (isa != CpuIsa::generic) {
    if (const VectorModel* model = model_for(map)) return encode_avx2(x, count, map, *model, out);
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
