// bitsandbytes' nearest-code rule (q8_semantics = bnb) against an independent oracle: the binary search of
// bitsandbytes' quantize_2D as its source (0.44.0–0.50.1 csrc/kernels.cu) runs it, re-implemented here from the
// description, never through cgad's threshold table. q8_maps.hpp claims the search equals a threshold table
// (boundary t_k = fl(fl(code[k] + code[k+1])·0.5f) between codes k and k+1, a tie going to whichever of k, k+1
// is even), evaluated by q8_nearest(x, dynamic_map(kind, Q8Semantics::bnb)). And m's sign fix (bnb_sign_fix)
// against its definition, uint8 wrap included.
//
// This file builds two executables (proptests/fastpath/CMakeLists.txt): fastpath_q8_bnb_test (label ci) runs a large
// structured sample; fastpath_q8_bnb_long_test (label long, CGAD_Q8_BNB_LONG defined) runs every binary32 in
// [−1, 1] for the three maps m and v use (signed, unsigned, zero-free) (2·(0x3F800000 + 1) ≈ 2.13e9 values per map)
// plus the specials.
#include "cgad/fastpath/detail/block_step.hpp"
#include "cgad/fastpath/detail/q8.hpp"
#include "cgad/fastpath/detail/q8_maps.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace cgad::fastpath {
namespace {

const Q8Map& bnb_map(Q8MapKind kind) {
  return dynamic_map(kind, Q8Semantics::bnb);
}
const char* name_of(Q8MapKind kind) {
  return kind == Q8MapKind::signed_map ? "signed" : kind == Q8MapKind::unsigned_map ? "unsigned" : "zero-free";
}
// The three maps bnb semantics quantizes with: m's, and v's dynamic and zero-free ones.
constexpr Q8MapKind kKinds[] = {Q8MapKind::signed_map, Q8MapKind::unsigned_map, Q8MapKind::unsigned_zero_free};

// ---- The oracle: bitsandbytes' quantize_2D<SIGNED>, nearest rounding (STOCHASTIC = 0) ----------------------
//
// What the kernel does, in words. It keeps a current index ("pivot", starting in the middle at 127) and the
// code there ("val"), plus the bracket it has narrowed x into: the indices and codes just below and above
// ("lower_pivot"/"lower", "upper_pivot"/"upper"), which start as index 0 with value −1 (signed map) or 0
// (unsigned map) and index 255 with value 1. Seven rounds with step 64, 32, …, 1: if x > val the bracket's
// lower end becomes the pivot and the pivot moves up by the step, otherwise the upper end becomes the pivot
// and the pivot moves down; then val is re-read at the new pivot — after the first round from a table of three
// "quadrant" codes (code[63], code[127], code[191]: the kernel fills quadrants[k] = code[64k + 63]), from the
// code table afterwards. The pivot then is even. Finally x is compared with a float midpoint: if x > val, with
// (upper + val)·0.5f, above which the answer is the upper end, otherwise the pivot; if not, with
// (lower + val)·0.5f, below which the answer is the lower end, otherwise the pivot. So a tie (x exactly on the
// midpoint) goes to the pivot, and every comparison is an ordered float comparison (false for NaN).
//
// Every float operation here is one IEEE binary32 operation (the build has -ffp-contract=off; nothing can
// be contracted in (a + b)·0.5 anyway), as on the GPU, which evaluates these with round-to-nearest.
int bnb_quantize_2d(float x, const float* code, bool is_signed) {
  const float quadrant[3] = {code[63], code[127], code[191]};
  int pivot = 127;
  int lower_pivot = 0;
  int upper_pivot = 255;
  float lower = is_signed ? -1.0f : 0.0f;
  float upper = 1.0f;
  float val = quadrant[1];
  for (int step = 64; step >= 1; step /= 2) {
    if (x > val) {
      lower_pivot = pivot;
      lower = val;
      pivot += step;
    } else {
      upper_pivot = pivot;
      upper = val;
      pivot -= step;
    }
    val = step == 64 ? quadrant[pivot == 191 ? 2 : 0] : code[pivot];
  }
  if (x > val) {
    const float midpoint = (upper + val) * 0.5f;
    return x > midpoint ? upper_pivot : pivot;
  }
  const float midpoint = (lower + val) * 0.5f;
  return x < midpoint ? lower_pivot : pivot;
}

[[maybe_unused]] int oracle(float x, Q8MapKind kind) {
  return bnb_quantize_2d(x, bnb_map(kind).code, kind == Q8MapKind::signed_map);
}

// Values just outside [−1, 1], the specials, ±0 and subnormals of both signs: the ends of the search.
std::vector<float> specials() {
  const float denorm = std::numeric_limits<float>::denorm_min();
  const float tiny = std::numeric_limits<float>::min();
  return {0.0f,
          -0.0f,
          denorm,
          -denorm,
          2 * denorm,
          -2 * denorm,
          std::nextafter(tiny, 0.0f),  // largest subnormal
          -std::nextafter(tiny, 0.0f),
          tiny,
          -tiny,
          std::nextafter(1.0f, 2.0f),
          std::nextafter(-1.0f, -2.0f),
          1.5f,
          -1.5f,
          2.0f,
          -2.0f,
          std::numeric_limits<float>::max(),
          -std::numeric_limits<float>::max(),
          INFINITY,
          -INFINITY,
          std::numeric_limits<float>::quiet_NaN(),
          -std::numeric_limits<float>::quiet_NaN(),
          std::bit_cast<float>(0x7F800001u),  // signalling NaN payloads, both signs
          std::bit_cast<float>(0xFF800001u),
          std::bit_cast<float>(0x7FFFFFFFu),
          std::bit_cast<float>(0xFFFFFFFFu)};
}

// The structured sample of the ci test: every float of [−1, 1] with a stride (a prime, so that the sample
// meets every low-bit pattern), every code and its two float neighbours, every bnb float midpoint
// fl(fl(code[k] + code[k+1])·0.5f) and its two float neighbours (the boundaries, where a defect in the tie rule
// or the midpoint would show), and the specials.
[[maybe_unused]] std::vector<float> structured_sample(const Q8Map& map, std::uint32_t stride) {
  std::vector<float> xs = specials();
  for (std::uint32_t bits = 0; bits <= 0x3F800000u; bits += stride) {
    xs.push_back(std::bit_cast<float>(bits));
    xs.push_back(std::bit_cast<float>(bits | 0x80000000u));
  }
  for (int k = 0; k < kQ8Codes; ++k) {
    const float c = map.code[k];
    xs.insert(xs.end(), {c, std::nextafter(c, -INFINITY), std::nextafter(c, INFINITY)});
    if (k + 1 < kQ8Codes) {
      const float mid = (map.code[k] + map.code[k + 1]) * 0.5f;
      xs.insert(xs.end(), {mid, std::nextafter(mid, -INFINITY), std::nextafter(mid, INFINITY)});
    }
  }
  return xs;
}

std::string show(float x) {
  std::ostringstream out;
  out << std::hexfloat << x << " (bits 0x" << std::hex << std::bit_cast<std::uint32_t>(x) << ")";
  return out.str();
}

#ifndef CGAD_Q8_BNB_LONG

// The oracle itself, on facts that follow from the search's definition alone, so that a slip in it cannot
// make the comparisons below agree by accident: it returns every code's own index for the code itself (the lower
// one of the zero-free map's repeated code 0 = code 1), 0 for NaN and for everything at or below code[0], 255 for
// everything at or above 1.
TEST(FastpathQ8BnbOracle, ReturnsEveryCodeForItselfAndTheEndsForTheEnds) {
  for (const Q8MapKind kind : kKinds) {
    const Q8Map& map = bnb_map(kind);
    for (int k = 0; k < kQ8Codes; ++k) {
      const int lowest = k > 0 && map.code[k - 1] == map.code[k] ? k - 1 : k;
      ASSERT_EQ(oracle(map.code[k], kind), lowest) << name_of(kind) << " code " << k;
    }
    for (const float x : {-INFINITY, -2.0f, std::nextafter(-1.0f, -2.0f), -1.0f, std::nextafter(map.code[0], -2.0f)}) {
      EXPECT_EQ(oracle(x, kind), 0) << name_of(kind) << " x = " << show(x);
    }
    for (const float x : {1.0f, std::nextafter(1.0f, 2.0f), 2.0f, INFINITY}) {
      EXPECT_EQ(oracle(x, kind), 255) << name_of(kind) << " x = " << show(x);
    }
    EXPECT_EQ(oracle(std::numeric_limits<float>::quiet_NaN(), kind), 0) << name_of(kind);
  }
}

// (a) The ci comparison, over the structured sample (stride 1021: about 1.04e6 strided floats per sign, plus
// 6·256 codes/midpoints/neighbours and the specials), for both maps. It must exercise the tie rule (the bnb
// float midpoints are themselves in the sample, so x == t_k happens for every k) and must be able to tell bnb's
// rule from cgad's: it counts the sample points where cgad's exact nearest code (ties to the lower) differs
// from the search, and requires some — otherwise this test could not detect a table built with cgad's rule.
TEST(FastpathQ8Bnb, NearestCodeIsBitsandbytesSearchOnAStructuredSample) {
  for (const Q8MapKind kind : kKinds) {
    const Q8Map& map = bnb_map(kind);
    const Q8Map& cgad_map = dynamic_map(kind, Q8Semantics::cgad);
    const std::vector<float> xs = structured_sample(map, 1021);
    std::vector<float> midpoints;
    for (int k = 0; k + 1 < kQ8Codes; ++k) midpoints.push_back((map.code[k] + map.code[k + 1]) * 0.5f);
    std::size_t ties = 0, differs_from_cgad = 0, mismatches = 0;
    for (const float x : xs) {
      const int expected = oracle(x, kind);
      const int got = q8_nearest(x, map);
      if (got != expected && ++mismatches <= 10) {
        ADD_FAILURE() << name_of(kind) << " map: x = " << show(x) << " q8_nearest " << got << " (code " << std::hexfloat
                      << map.code[got] << "), quantize_2D " << expected << " (code " << map.code[expected] << ")";
      }
      differs_from_cgad += q8_nearest(x, cgad_map) != expected;
      ties += std::binary_search(midpoints.begin(), midpoints.end(), x);
    }
    EXPECT_EQ(mismatches, 0u) << name_of(kind) << " map";
    EXPECT_GE(ties, static_cast<std::size_t>(kQ8Codes - 1)) << "every float midpoint is in the sample";
    EXPECT_GT(differs_from_cgad, 0u) << "the sample cannot tell bnb's rule from cgad's";
    std::printf("bnb %s map: %zu sample points, %zu on a float midpoint, %zu where cgad's rule differs\n",
                name_of(kind), xs.size(), ties, differs_from_cgad);
  }
}

// The tie rule the table encodes, stated on its own (q8_maps.hpp): exactly on t_k the search goes to the
// even one of k, k+1; one float either side it goes to k below and k+1 above (the codes are far apart
// compared with one float ulp: the smallest gap, at the map's smallest codes, is ~2^-22 wide against ulps of
// ~2^-44 there, so pred(t_k) > code[k] and succ(t_k) < code[k+1]) — but for the zero-free map's repeated code,
// where t_0 is code[0] = code[1] itself and the rule holds all the same (0 is even).
TEST(FastpathQ8Bnb, TieOnAFloatMidpointGoesToTheEvenCode) {
  for (const Q8MapKind kind : kKinds) {
    const Q8Map& map = bnb_map(kind);
    for (int k = 0; k + 1 < kQ8Codes; ++k) {
      const float t = (map.code[k] + map.code[k + 1]) * 0.5f;
      if (map.code[k] != map.code[k + 1]) {
        ASSERT_LT(map.code[k], std::nextafter(t, -INFINITY));
        ASSERT_GT(map.code[k + 1], std::nextafter(t, INFINITY));
      } else {
        ASSERT_EQ(t, map.code[k]) << name_of(kind) << " k = " << k;
      }
      const int even = k % 2 == 0 ? k : k + 1;
      EXPECT_EQ(oracle(t, kind), even) << name_of(kind) << " k = " << k << " t = " << show(t);
      EXPECT_EQ(q8_nearest(t, map), even) << name_of(kind) << " k = " << k << " t = " << show(t);
      EXPECT_EQ(q8_nearest(std::nextafter(t, -INFINITY), map), k) << name_of(kind) << " k = " << k;
      EXPECT_EQ(q8_nearest(std::nextafter(t, INFINITY), map), k + 1) << name_of(kind) << " k = " << k;
    }
  }
}

// ---- m's sign fix ------------------------------------------------------------------------------------------
//
// bnb's definition (kOptimizerStatic8bit2StateBlockwise, 0.50.1 csrc/kernels.cu): c is an unsigned char; if
// signbit(code[c]) != signbit(value) then c += 1 when value > 0.0f, else c −= 1 — both modulo 256. Written
// here with the standard library's signbit and explicit modular arithmetic, not with cgad's bit tests.
std::uint8_t sign_fix_definition(std::uint8_t c, float value, const Q8Map& map) {
  if (std::signbit(map.code[c]) == std::signbit(value)) return c;
  const int moved = value > 0.0f ? c + 1 : c - 1;
  return static_cast<std::uint8_t>((moved % 256 + 256) % 256);
}

std::vector<float> sign_fix_values(const Q8Map& map) {
  std::vector<float> values = specials();
  for (int k = 0; k < kQ8Codes; ++k) {
    values.insert(values.end(), {map.code[k], -map.code[k], std::nextafter(map.code[k], -INFINITY),
                                 std::nextafter(map.code[k], INFINITY)});
  }
  std::mt19937 rng(0xB5B5);
  for (int i = 0; i < 2000; ++i) {
    values.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(rng())));  // every class, NaNs included
    values.push_back(std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng));
  }
  return values;
}

TEST(FastpathQ8Bnb, SignFixIsItsDefinitionOnEveryCode) {
  const Q8Map& map = bnb_map(Q8MapKind::signed_map);
  const std::vector<float> values = sign_fix_values(map);
  for (int c = 0; c < kQ8Codes; ++c) {
    for (const float value : values) {
      const auto code = static_cast<std::uint8_t>(c);
      ASSERT_EQ(bnb_sign_fix(code, value, map), sign_fix_definition(code, value, map))
          << "code " << c << " (" << std::hexfloat << map.code[c] << ") value " << show(value);
    }
  }
  // The cases the definition singles out, spelled out: code 127 is +0, so −0 moves it down to the smallest
  // negative code (126), as does any negative value, while +0 and positive values keep it; code 0 (−0.99…)
  // under +0 — the all-zero block's 0/0 = NaN → code 0 — wraps to 255 (which decodes to 0 under absmax 0);
  // code 0 under a positive value moves up to 1, under a negative value it stays.
  ASSERT_EQ(map.code[127], 0.0f);
  ASSERT_FALSE(std::signbit(map.code[127]));
  EXPECT_EQ(bnb_sign_fix(127, -0.0f, map), 126);
  EXPECT_EQ(bnb_sign_fix(127, -0x1p-149f, map), 126);
  EXPECT_EQ(bnb_sign_fix(127, 0.0f, map), 127);
  EXPECT_EQ(bnb_sign_fix(127, 0x1p-149f, map), 127);
  EXPECT_EQ(bnb_sign_fix(0, 0.0f, map), 255) << "uint8 wrap";
  EXPECT_EQ(bnb_sign_fix(0, 0x1p-149f, map), 1);
  EXPECT_EQ(bnb_sign_fix(0, -0.5f, map), 0);
  EXPECT_EQ(bnb_sign_fix(255, -0.0f, map), 254);
  EXPECT_EQ(bnb_sign_fix(128, -0.25f, map), 127) << "the smallest positive code under a negative value";
}

// The whole bnb quantization of a moment as block_step.hpp composes it (quantize_moment with bnb = true):
// m → sign_fix(quantize_2D<1>(m / absmax)), v → quantize_2D<0>(v / absmax), the division unguarded (IEEE,
// where the GPU uses __fdividef): an all-zero block's 0/0 = NaN goes to code 0 and, for m = +0, wraps to 255.
TEST(FastpathQ8Bnb, QuantizeMomentIsTheSearchThenTheSignFix) {
  using Bnb = FixedFormats<UpdateFamily::adam, ParamFormat::bf16, StateFormat::q8, false, true>;
  const StepArgs a;
  MomentView views[3];  // m, v under the dynamic map, v under the zero-free map
  views[0].map = &bnb_map(Q8MapKind::signed_map);
  views[1].map = &bnb_map(Q8MapKind::unsigned_map);
  views[2].map = &bnb_map(Q8MapKind::unsigned_zero_free);
  const RandomWords no_random{{0, 0, 0, 0}};
  std::mt19937 rng(314159);
  std::vector<std::pair<float, float>> cases = {{0.0f, 0.0f},      {-0.0f, 0.0f},      {0.0f, 1.0f}, {-0.0f, 1.0f},
                                                {0x1p-149f, 1.0f}, {-0x1p-149f, 1.0f}, {1.0f, 1.0f}, {-1.0f, 1.0f}};
  for (int i = 0; i < 200000; ++i) {
    const float absmax = std::ldexp(std::uniform_real_distribution<float>(1.0f, 2.0f)(rng),
                                    std::uniform_int_distribution<int>(-60, 60)(rng));
    float value = absmax * std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng);
    if (i % 4 == 0) value = std::ldexp(value, -std::uniform_int_distribution<int>(0, 30)(rng));
    cases.emplace_back(value, absmax);
  }
  for (const auto& [value, absmax] : cases) {
    const float x = value / absmax;
    const auto m_expected =
        sign_fix_definition(static_cast<std::uint8_t>(oracle(x, Q8MapKind::signed_map)), value, *views[0].map);
    ASSERT_EQ(quantize_moment<Bnb>(a, views[0], 0, value, absmax, no_random), m_expected)
        << "m = " << show(value) << " absmax " << show(absmax);
    const float magnitude = std::fabs(value);
    ASSERT_EQ(quantize_moment<Bnb>(a, views[1], 1, magnitude, absmax, no_random),
              oracle(magnitude / absmax, Q8MapKind::unsigned_map))
        << "v = " << show(magnitude) << " absmax " << show(absmax);
    ASSERT_EQ(quantize_moment<Bnb>(a, views[2], 1, magnitude, absmax, no_random),
              oracle(magnitude / absmax, Q8MapKind::unsigned_zero_free))
        << "zero-free v = " << show(magnitude) << " absmax " << show(absmax);
  }
  EXPECT_EQ(quantize_moment<Bnb>(a, views[0], 0, 0.0f, 0.0f, no_random), 255) << "0/0 = NaN → code 0 → wraps to 255";
  EXPECT_EQ(quantize_moment<Bnb>(a, views[1], 1, 0.0f, 0.0f, no_random), 0) << "0/0 = NaN → code 0 (= 0)";
  EXPECT_EQ(quantize_moment<Bnb>(a, views[2], 1, 0.0f, 0.0f, no_random), 0) << "0/0 = NaN → code 0 (0 under absmax 0)";
}

#else  // CGAD_Q8_BNB_LONG

// (b) Every binary32 in [−1, 1] — the bit patterns 0x00000000..0x3F800000 and the same with the sign bit,
// 2,130,706,434 values per map — plus the specials, for the three maps, against the search. Split over a few
// threads by contiguous ranges, one test per map (…/2 is the zero-free map); a failure prints the first
// mismatches in hexfloat.
class FastpathQ8BnbExhaustive : public ::testing::TestWithParam<int> {};

TEST_P(FastpathQ8BnbExhaustive, NearestCodeIsBitsandbytesSearchOnEveryFloatOfMinusOneToOne) {
  const unsigned threads = std::max(1u, std::min(4u, std::thread::hardware_concurrency()));
  constexpr std::uint64_t kPerSign = 0x3F800000ull + 1;  // +0 … 1.0
  constexpr std::uint64_t kTotal = 2 * kPerSign;
  const auto start = std::chrono::steady_clock::now();
  const Q8MapKind kind = kKinds[GetParam()];
  const Q8Map& map = bnb_map(kind);
  const bool is_signed = kind == Q8MapKind::signed_map;
  std::atomic<std::uint64_t> mismatches{0}, checked{0};
  std::vector<std::vector<std::uint32_t>> first_bad(threads);
  std::vector<std::thread> pool;
  for (unsigned p = 0; p < threads; ++p) {
    pool.emplace_back([&, p] {
      const std::uint64_t begin = kTotal * p / threads, end = kTotal * (p + 1) / threads;
      std::uint64_t bad = 0;
      for (std::uint64_t j = begin; j < end; ++j) {
        const std::uint32_t bits =
            j < kPerSign ? static_cast<std::uint32_t>(j) : static_cast<std::uint32_t>(j - kPerSign) | 0x80000000u;
        const float x = std::bit_cast<float>(bits);
        if (q8_nearest(x, map) != bnb_quantize_2d(x, map.code, is_signed)) {
          if (++bad <= 10) first_bad[p].push_back(bits);
        }
      }
      mismatches += bad;
      checked += end - begin;
    });
  }
  for (auto& t : pool) t.join();
  for (const float x : specials()) {
    checked += 1;
    if (q8_nearest(x, map) != bnb_quantize_2d(x, map.code, is_signed)) {
      mismatches += 1;
      first_bad[0].push_back(std::bit_cast<std::uint32_t>(x));
    }
  }
  for (const auto& list : first_bad) {
    for (const std::uint32_t bits : list) {
      const float x = std::bit_cast<float>(bits);
      ADD_FAILURE() << name_of(kind) << " map: x = " << show(x) << " q8_nearest " << int(q8_nearest(x, map))
                    << ", quantize_2D " << bnb_quantize_2d(x, map.code, is_signed);
    }
  }
  EXPECT_EQ(mismatches.load(), 0u) << name_of(kind) << " map";
  EXPECT_EQ(checked.load(), kTotal + specials().size());
  std::printf("bnb %s map: %llu values checked, %llu mismatches\n", name_of(kind),
              static_cast<unsigned long long>(checked.load()), static_cast<unsigned long long>(mismatches.load()));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("exhaustive bnb nearest-code check: %.1f s on %u threads\n", seconds, threads);
}
INSTANTIATE_TEST_SUITE_P(EveryMap, FastpathQ8BnbExhaustive, ::testing::Range(0, static_cast<int>(std::size(kKinds))));

#endif  // CGAD_Q8_BNB_LONG

}  // namespace
}  // namespace cgad::fastpath
