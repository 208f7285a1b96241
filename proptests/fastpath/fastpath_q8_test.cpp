// The q8 blockwise quantizer: the maps against bitsandbytes' formula as PyTorch evaluates it, nearest rounding
// against the exact argmin over the map, the quantize→dequantize error bound, stochastic rounding's mean.
#include "cgad/fastpath/detail/q8.hpp"
#include "cgad/fastpath/detail/q8_maps.hpp"
#include "cgad/fastpath/detail/random_bits.hpp"

#include <gtest/gtest.h>
#include <mpfr.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace cgad::fastpath {
namespace {

const Q8Map& signed_map() {
  return dynamic_map(Q8MapKind::signed_map);
}
const Q8Map& unsigned_map() {
  return dynamic_map(Q8MapKind::unsigned_map);
}
const Q8Map& zero_free_map() {
  return dynamic_map(Q8MapKind::unsigned_zero_free);
}

std::vector<float> read_torch_maps(const std::string& file) {
  std::ifstream in(std::string(CGAD_FASTPATH_DATA_DIR) + "/" + file);
  std::vector<float> codes;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    codes.push_back(static_cast<float>(std::stod(line)));
  }
  return codes;
}

std::int64_t ulps_between(float a, float b) {
  // Distance in representable floats, for values of one sign (the maps' codes never straddle zero pairwise).
  return std::llabs(static_cast<std::int64_t>(std::bit_cast<std::int32_t>(a)) - std::bit_cast<std::int32_t>(b));
}

// The structure the formula promises (fastpath/include/cgad/fastpath/detail/q8_maps.hpp): strictly increasing codes,
// exact midpoints and their round-down float thresholds (q8.hpp),
// an exact 0 in both maps, 1 as the last code, the signed map's lowest code the negation of its largest below 1.
TEST(FastpathQ8Map, StructureOfBothMaps) {
  for (const Q8Map* map : {&signed_map(), &unsigned_map()}) {
    for (int k = 0; k + 1 < kQ8Codes; ++k) ASSERT_LT(map->code[k], map->code[k + 1]) << k;
    EXPECT_EQ(map->code[kQ8Codes - 1], 1.0f);
    for (int k = 0; k + 1 < kQ8Codes; ++k) {
      EXPECT_EQ(map->midpoint[k], (static_cast<double>(map->code[k]) + map->code[k + 1]) / 2);
      EXPECT_LE(static_cast<double>(map->threshold[k]), map->midpoint[k]);
      EXPECT_GT(static_cast<double>(std::nextafter(map->threshold[k], INFINITY)), map->midpoint[k]);
    }
  }
  EXPECT_EQ(signed_map().code[127], 0.0f);
  EXPECT_EQ(unsigned_map().code[0], 0.0f);
  EXPECT_EQ(signed_map().code[0], -signed_map().code[254]);
  // The smallest nonzero magnitude is 10^-6 · (0.1 + 0.9/2)/... : the first decade's first mean, ≈ 5.5e-7.
  EXPECT_NEAR(signed_map().code[128], 0.55e-6, 1e-12);
  EXPECT_NEAR(unsigned_map().code[1], 0.325e-6, 1e-12);
}

// The maps PyTorch 1.13 builds from the same formula (fastpath/tools/bnb_dynamic_map.py) differ among ATen's
// vector paths by up to 2 ulps (q8_maps.hpp explains why); ours use torch's element-by-element linspace rule.
// Each of our codes must lie within 2 ulps of each PyTorch variant: linspace's vector path rounds
// (start + step·i0) + j·step where the element rule rounds start + step·(i0 + j), at most one rounding apart
// at each of the point, the mean and the product — observed: never more than 2 ulps.
TEST(FastpathQ8Map, WithinTwoUlpsOfEveryPyTorchBuildOfTheFormula) {
  for (const char* file :
       {"bnb_maps_torch1.13_default.txt", "bnb_maps_torch1.13_avx2.txt", "bnb_maps_torch1.13_avx512.txt"}) {
    const std::vector<float> torch_codes = read_torch_maps(file);
    ASSERT_EQ(torch_codes.size(), 512u) << file;
    int differing = 0;
    std::int64_t worst = 0;
    for (int k = 0; k < 512; ++k) {
      const float ours = k < 256 ? signed_map().code[k] : unsigned_map().code[k - 256];
      const float theirs = torch_codes[static_cast<std::size_t>(k)];
      const std::int64_t ulps = ulps_between(ours, theirs);
      EXPECT_LE(ulps, 2) << file << " code " << k << std::hexfloat << ": ours " << ours << " torch " << theirs;
      differing += ulps != 0;
      worst = std::max(worst, ulps);
    }
    std::printf("q8 maps vs %s: %d of 512 codes differ, by at most %lld ulps\n", file, differing,
                static_cast<long long>(worst));
  }
}

// The exact argmin over the map, by brute force: distances |x − code| computed in MPFR at 320 bits, where
// the difference of any two floats is exact (their bits span at most 24 + 277 positions); the lowest index
// among the nearest codes, the tie rule q8.hpp documents.
int brute_force_nearest(float x, const Q8Map& map) {
  if (std::isnan(x)) return 0;
  if (std::isinf(x)) return x > 0 ? kQ8Codes - 1 : 0;  // every distance is infinite; q8.hpp: the end codes
  mpfr_t distance, best_distance;
  mpfr_inits2(320, distance, best_distance, static_cast<mpfr_ptr>(nullptr));
  int best = -1;
  for (int k = 0; k < kQ8Codes; ++k) {
    mpfr_set_flt(distance, x, MPFR_RNDN);
    mpfr_sub_d(distance, distance, static_cast<double>(map.code[k]), MPFR_RNDN);
    mpfr_abs(distance, distance, MPFR_RNDN);
    if (best < 0 || mpfr_less_p(distance, best_distance)) {
      best = k;
      mpfr_set(best_distance, distance, MPFR_RNDN);
    }
  }
  mpfr_clears(distance, best_distance, static_cast<mpfr_ptr>(nullptr));
  return best;
}

// Every class of float the quantizer can meet: specials, zeros, subnormals, every code exactly, every midpoint
// and the floats either side of it, the ends of the range and beyond, and random bit patterns.
std::vector<float> pattern_classes(const Q8Map& map) {
  std::vector<float> xs = {0.0f,
                           -0.0f,
                           INFINITY,
                           -INFINITY,
                           std::numeric_limits<float>::denorm_min(),
                           -std::numeric_limits<float>::denorm_min(),
                           std::numeric_limits<float>::min(),
                           -std::numeric_limits<float>::min(),
                           1.0f,
                           -1.0f,
                           1.5f,
                           -1.5f,
                           std::numeric_limits<float>::max(),
                           -std::numeric_limits<float>::max()};
  for (int k = 0; k < kQ8Codes; ++k) {
    const float c = map.code[k];
    xs.insert(xs.end(), {c, std::nextafter(c, -INFINITY), std::nextafter(c, INFINITY)});
    if (k + 1 < kQ8Codes) {
      const double mid = map.midpoint[k];
      const float near_mid = static_cast<float>(mid);
      xs.insert(xs.end(), {near_mid, std::nextafter(near_mid, -INFINITY), std::nextafter(near_mid, INFINITY)});
    }
  }
  std::mt19937 rng(20261129);
  for (int i = 0; i < 20000; ++i) {
    const float x = std::bit_cast<float>(static_cast<std::uint32_t>(rng()));
    if (!std::isnan(x)) xs.push_back(x);
    xs.push_back(std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng));
  }
  return xs;
}

TEST(FastpathQ8, NearestIsTheExactArgminForEveryPatternClass) {
  for (const Q8Map* map : {&signed_map(), &unsigned_map()}) {
    int exact_midpoints = 0;
    for (const float x : pattern_classes(*map)) {
      ASSERT_EQ(q8_nearest(x, *map), brute_force_nearest(x, *map)) << std::hexfloat << "x = " << x;
      for (int k = 0; k + 1 < kQ8Codes; ++k) exact_midpoints += static_cast<double>(x) == map->midpoint[k];
    }
    // The tie rule must actually have been exercised: some midpoints are floats themselves.
    EXPECT_GT(exact_midpoints, 0);
    EXPECT_EQ(q8_nearest(std::numeric_limits<float>::quiet_NaN(), *map), 0) << "NaN maps to index 0";
  }
}

// Quantize→dequantize error: for |value| ≤ absmax, the dequantized value differs from the value by at most
// absmax·(half the gap between the two codes around value/absmax), plus the roundings of the normalization
// (value/absmax, relative 2^-24) and of code·absmax (relative 2^-24 of the result): each adds at most
// 2^-24·absmax since both quantities are ≤ 1 in normalized units.
TEST(FastpathQ8, QuantizeDequantizeErrorWithinHalfTheLocalGap) {
  std::mt19937 rng(7);
  for (const Q8Map* map : {&signed_map(), &unsigned_map(), &zero_free_map()}) {
    const bool has_negatives = map->code[0] < 0;
    double worst_ratio = 0;
    for (int trial = 0; trial < 200000; ++trial) {
      const float absmax = std::ldexp(1.0f + std::uniform_real_distribution<float>(0, 1)(rng),
                                      std::uniform_int_distribution<int>(-120, 120)(rng));
      float value = absmax * std::uniform_real_distribution<float>(has_negatives ? -1.0f : 0.0f, 1.0f)(rng);
      if (trial % 3 == 0) value = absmax * std::ldexp(value / absmax, -std::uniform_int_distribution<int>(0, 24)(rng));
      const float x = q8_normalize(value, absmax);
      const int q = q8_nearest(x, *map);
      const float back = q8_dequantize(static_cast<std::uint8_t>(q), absmax, *map);
      int low = q;
      if (map->code[low] > x && low > 0) --low;
      if (low == kQ8Codes - 1) --low;
      const double half_gap = (static_cast<double>(map->code[low + 1]) - map->code[low]) / 2;
      // Below the lowest signed code (-0.99297) the error is the distance to it, at most 1 − 0.99297.
      const double outside = std::max(0.0, static_cast<double>(map->code[0]) - x);
      const double bound = absmax * (half_gap + outside + 2 * 0x1p-24);
      const double error = std::fabs(static_cast<double>(back) - value);
      ASSERT_LE(error, bound) << std::hexfloat << "value " << value << " absmax " << absmax;
      worst_ratio = std::max(worst_ratio, error / bound);
    }
    std::printf("q8 %s map: worst quantization error = %.6f of its bound\n",
                has_negatives ? "signed" : (map->code[0] == 0.0f ? "unsigned" : "zero-free"), worst_ratio);
  }
}

// Stochastic rounding over the map: the mean of N = 2^18 rounded values equals x within 6 standard deviations
// of the mean (sqrt(p(1−p)/N)·gap) plus the 2^-24·gap quantization of the probability (q8.hpp).
TEST(FastpathQ8, StochasticRoundingIsUnbiased) {
  constexpr std::uint64_t kDraws = 1u << 18;
  const Q8Map& map = signed_map();
  for (const int k : {3, 60, 126, 127, 128, 200, 253}) {
    for (const double fraction : {0.001, 0.25, 0.5, 0.9}) {
      const double lo = map.code[k];
      const double hi = map.code[k + 1];
      const float x = static_cast<float>(lo + fraction * (hi - lo));
      const double p = (static_cast<double>(x) - lo) / (hi - lo);
      double sum = 0;
      for (std::uint64_t i = 0; i < kDraws; ++i) {
        const int q = q8_stochastic(x, map, philox_words(99, 1, i).word[kWordFirstMoment]);
        ASSERT_TRUE(q == k || q == k + 1) << q;
        sum += map.code[q];
      }
      const double mean = sum / kDraws;
      const double bound = (6 * std::sqrt(p * (1 - p) / kDraws) + 0x1p-24) * (hi - lo);
      EXPECT_LE(std::fabs(mean - x), bound) << "code " << k << " fraction " << fraction;
    }
  }
  // Exact codes never move; values beyond the ends clamp.
  for (int k = 0; k < kQ8Codes; ++k) EXPECT_EQ(q8_stochastic(map.code[k], map, 0xFFFFFFFFu), k);
  EXPECT_EQ(q8_stochastic(-1.0f, map, 0), 0);
  EXPECT_EQ(q8_stochastic(2.0f, map, 0xFFFFFFFFu), 255);
}

// The zero-free map (q8_maps.hpp, Li, Chen & Zhu's DE-0): the unsigned map with its code 0 (= 0.0) replaced by its
// smallest positive code, under both semantics — no code is 0, and the rest of bitsandbytes' map is unchanged.
TEST(FastpathQ8Map, ZeroFreeMapIsTheUnsignedMapWithItsZeroSetToItsSmallestCode) {
  for (const Q8Semantics semantics : {Q8Semantics::cgad, Q8Semantics::bnb}) {
    const Q8Map& map = dynamic_map(Q8MapKind::unsigned_zero_free, semantics);
    const Q8Map& dynamic = dynamic_map(Q8MapKind::unsigned_map, semantics);
    EXPECT_EQ(dynamic.code[0], 0.0f);
    EXPECT_EQ(std::bit_cast<std::uint32_t>(map.code[0]), std::bit_cast<std::uint32_t>(dynamic.code[1]));
    for (int k = 1; k < kQ8Codes; ++k) {
      ASSERT_EQ(std::bit_cast<std::uint32_t>(map.code[k]), std::bit_cast<std::uint32_t>(dynamic.code[k])) << k;
      ASSERT_GT(map.code[k], 0.0f) << k;
    }
    // Between the repeated code and itself the boundary is the code (exact and float midpoint alike), and from
    // code 1 on every threshold is the dynamic map's.
    EXPECT_EQ(map.threshold[0], map.code[1]);
    for (int k = 1; k < kQ8Codes; ++k) ASSERT_EQ(map.threshold[k], dynamic.threshold[k]) << k;
    EXPECT_EQ(map.has_model, 1);
  }
  std::printf("zero-free map: smallest code %a (dynamic map: values below %a of absmax store 0)\n",
              static_cast<double>(zero_free_map().code[0]), static_cast<double>(unsigned_map().threshold[0]));
}

// Its nearest code is the exact nearest value (the argmin's value; of the two indices holding code[1] it takes
// index 0 up to and including code[1], index 1 above, which decode alike), every x in [0, code[1]] decodes to
// code[1]·absmax > 0, and stochastic rounding never reaches 0 either.
TEST(FastpathQ8, ZeroFreeMapStoresNoValueAsZero) {
  const Q8Map& map = zero_free_map();
  for (const float x : pattern_classes(map)) {
    ASSERT_EQ(map.code[q8_nearest(x, map)], map.code[brute_force_nearest(x, map)]) << std::hexfloat << "x = " << x;
  }
  const float smallest = map.code[0];
  for (const float x : {0.0f, 0x1p-149f, std::numeric_limits<float>::min(), 1e-30f, 1e-10f, smallest / 2, smallest}) {
    EXPECT_EQ(q8_nearest(x, map), 0) << std::hexfloat << x;
    for (const std::uint32_t random : {0u, 0x80000000u, 0xFFFFFFFFu}) EXPECT_EQ(q8_stochastic(x, map, random), 0);
    const float absmax = 1e-3f;
    EXPECT_GT(q8_dequantize(q8_nearest(q8_normalize(x * absmax, absmax), map), absmax, map), 0.0f);
  }
  EXPECT_EQ(q8_nearest(std::nextafter(smallest, 1.0f), map), 1);
  EXPECT_EQ(q8_nearest(0.0f, unsigned_map()), 0) << "the dynamic map stores 0 as 0";
  EXPECT_EQ(unsigned_map().code[0], 0.0f);
}

}  // namespace
}  // namespace cgad::fastpath
