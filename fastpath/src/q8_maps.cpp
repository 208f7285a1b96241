#include "cgad/fastpath/detail/q8_maps.hpp"

#include "cgad/core/errors.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <cmath>
#include <cstring>
#include <string>
#include <limits>
#include <stdexcept>
#include <vector>

namespace cgad::fastpath {

void torch_linspace_f32(float start, float end, int points, float* out) {
  if (points == 1) {
    out[0] = start;
    return;
  }
  // ATen: step = (end − start) / (steps − 1) in float, the integer converted to float.
  const float step = (end - start) / static_cast<float>(points - 1);
  const int halfway = points / 2;
  for (int idx = 0; idx < points; ++idx) {
    out[idx] =
        idx < halfway ? start + step * static_cast<float>(idx) : end - step * static_cast<float>(points - idx - 1);
  }
}

namespace {

// How many thresholds lie strictly below x (the index q8_nearest must return for a non-NaN x).
int thresholds_below(const Q8Map& map, float x) {
  return static_cast<int>(std::lower_bound(map.threshold, map.threshold + kQ8Codes, x) - map.threshold);
}

// q8_nearest's bucket table (q8.hpp). Bucket b of a sign holds the magnitudes whose clamped bits lie in
// [low + b·2^shift, low + (b+1)·2^shift): the first bucket also takes every magnitude below 2^-23 (down to 0),
// the last one every magnitude above 1 (up to Inf). For the floats x_min..x_max of a bucket the exact count
// thresholds_below(x) runs from thresholds_below(x_min) to thresholds_below(x_max); the table stores the first
// and the build refuses a map where the two differ by more than the kQ8BucketSearch compares q8_nearest makes.
void fill_buckets(Q8Map& map) {
  for (int sign = 0; sign < 2; ++sign) {
    for (int bucket = 0; bucket < kQ8BucketsPerSign; ++bucket) {
      const std::uint32_t first = kQ8BucketLowBits + (static_cast<std::uint32_t>(bucket) << kQ8BucketShift);
      const std::uint32_t smallest = bucket == 0 ? 0u : first;
      const std::uint32_t largest = bucket == kQ8BucketsPerSign - 1 ? 0x7F800000u : first + (1u << kQ8BucketShift) - 1;
      const float a = std::bit_cast<float>(smallest), b = std::bit_cast<float>(largest);
      const float x_min = sign == 0 ? a : -b, x_max = sign == 0 ? b : -a;
      const int below = thresholds_below(map, x_min);
      if (thresholds_below(map, x_max) - below > kQ8BucketSearch) {
        throw core::InputError(
            "q8 map: codes too close together for the nearest-code table (more than one boundary between codes in "
            "1/256 of a binade, q8.hpp)");
      }
      map.below[sign * kQ8BucketsPerSign + bucket] = below;
    }
  }
  if (map.below[q8_bucket(0xFF800000u)] != 0) {
    throw std::logic_error("dynamic map: a threshold below -Inf's bucket (q8_nearest sends NaN there for index 0)");
  }
}

// The nearest-code rule counts the thresholds below x (q8.hpp); the count is the code only when they are sorted,
// which the bucket table (thresholds_below) and the AVX-512 encoder's binary search both rely on. bnb's tie rule
// can cross two thresholds whose float midpoints are equal (codes a float apart): such a map is refused.
void check_sorted(const Q8Map& map) {
  if (!std::is_sorted(map.threshold, map.threshold + kQ8Codes - 1)) {
    throw core::InputError(
        "q8 map: codes too close together for the nearest-code rule (two boundaries between codes out of order, "
        "q8.hpp)");
  }
}

// The AVX-512 encoder's search tree (Q8Map::search_key), of sorted thresholds (check_sorted).
void fill_search(Q8Map& map) {
  map.search_key[0] = 0;
  for (int level = 0; level < 8; ++level) {
    for (int n = 1 << level; n < 2 << level; ++n) {
      const float t = map.threshold[((n - (1 << level)) << (8 - level)) + (1 << (7 - level)) - 1];
      map.search_key[n] = q8_search_key(std::bit_cast<std::uint32_t>(t == 0.0f ? 0.0f : t));
    }
  }
}

// q8_nearest_fast's line model (q8.hpp) of a map built as above (zero at index 127 or 0 — or, zero-free, index 0
// repeating index 1 —, 1 at 255, groups of 2^g or 2^(g+1) codes), or has_model = 0 when the map is not of that
// shape or a threshold lies farther than δ/4 from its line. The thresholds' own distance from the line (the maps' float
// roundings) and pos's float evaluation are ~1e-5 in units of positions; δ = 2^-12 leaves a factor > 10 and sends
// ~2^-11 of the elements to the search.
void fill_model(Q8Map& map) {
  map.has_model = 0;
  int zero = map.code[0] > 0.0f && map.code[0] == map.code[1] ? 0 : -1;  // the zero-free map counts from its slot 0
  for (int k = 0; k < kQ8Codes; ++k) {
    if (map.code[k] == 0.0f) zero = k;
  }
  if ((zero != 0 && zero != 127) || map.code[kQ8Codes - 1] != 1.0f) return;
  const bool is_signed = zero == 127;
  constexpr int groups = kQ8ModelGroups;
  int size[groups], first[groups];
  int rank = 0;
  for (int g = 0; g < groups; ++g) {
    size[g] = g == groups - 1 ? 1 : (is_signed ? 1 << g : 2 << g);
    first[g] = rank;
    rank += size[g];
  }
  if (rank != kQ8Codes - 1 - zero) return;
  // Thresholds from zero outward: positive(r) lies below the r-th code above 0; negative(r), mirrored and compared
  // with ≤, is stored as its predecessor for <.
  const auto positive = [&](int r) { return map.threshold[zero + r]; };
  const auto negative = [&](int r) {
    return std::nextafter(-map.threshold[zero - 1 - r], -std::numeric_limits<float>::infinity());
  };
  const auto bits = [](float x) { return static_cast<std::int32_t>(std::bit_cast<std::uint32_t>(x)); };
  if (static_cast<std::uint32_t>(bits(positive(first[0]))) <= kQ8ModelLowBits) return;  // the clamp must change nothing
  Q8Model& model = map.model;
  model.zero_index = zero;
  model.negative_groups = is_signed ? groups - 1 : 0;
  for (int g = 0; g < groups; ++g) {
    const int f = first[g], n = size[g];
    model.boundary[g] = bits(positive(f));
    // The negative boundary is the positive one or one float below it (q8.hpp). In 64 bits: a map whose mirrored
    // threshold is a negative float (a threshold of −0 in a given map) has bit patterns 2^31 apart.
    const std::int64_t shift =
        is_signed && g < groups - 1 ? std::int64_t{bits(positive(f))} - std::int64_t{bits(negative(f))} : 0;
    if (shift != 0 && shift != 1) return;
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
        const float pos = t * model.k[g] - model.c[g];  // q8_model_index's float evaluation
        if (!(std::fabs(pos - static_cast<float>(j)) <= kQ8ModelNearness / 4)) return;
      }
    }
  }
  map.has_model = 1;
}

// The built-in codes (q8_maps.hpp): bitsandbytes' formula with the element-by-element linspace.
std::array<float, kQ8Codes> built_in_codes(bool is_signed) {
  std::vector<float> values;
  for (int i = 0; i < 7; ++i) {
    const int points = is_signed ? (1 << i) + 1 : (1 << (i + 1)) + 1;
    std::vector<float> grid(static_cast<std::size_t>(points));
    torch_linspace_f32(0.1f, 1.0f, points, grid.data());
    // Python's 10 ** (i − 6) is a double; the tensor product casts it to float32 before multiplying.
    const float scale = static_cast<float>(std::pow(10.0, i - 6));
    for (int j = 0; j + 1 < points; ++j) {
      const float mean = (grid[j] + grid[j + 1]) / 2.0f;
      values.push_back(scale * mean);
      if (is_signed) values.push_back(-(scale * mean));
    }
  }
  values.push_back(0.0f);
  values.push_back(1.0f);
  std::sort(values.begin(), values.end());
  if (values.size() != kQ8Codes || std::adjacent_find(values.begin(), values.end()) != values.end()) {
    throw std::logic_error("dynamic map: expected 256 distinct codes");
  }
  std::array<float, kQ8Codes> codes;
  std::copy(values.begin(), values.end(), codes.begin());
  return codes;
}

}  // namespace

Q8Map q8_map_of_codes(std::span<const float, kQ8Codes> codes, bool zero_free, Q8Semantics semantics) {
  Q8Map map{};
  std::copy(codes.begin(), codes.end(), map.code);
  if (zero_free) map.code[0] = map.code[1];  // DE-0 (q8_maps.hpp): the 0 at index 0 becomes the smallest code
  constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
  for (int k = 0; k + 1 < kQ8Codes; ++k) {
    if (semantics == Q8Semantics::cgad) {
      map.midpoint[k] = (static_cast<double>(map.code[k]) + static_cast<double>(map.code[k + 1])) / 2.0;
      float below = static_cast<float>(map.midpoint[k]);
      if (static_cast<double>(below) > map.midpoint[k]) below = std::nextafter(below, kMinusInf);
      map.threshold[k] = below;
    } else {
      const float midpoint = (map.code[k] + map.code[k + 1]) * 0.5f;  // bnb's float midpoint (see q8_maps.hpp)
      map.midpoint[k] = midpoint;
      map.threshold[k] = k % 2 == 0 ? midpoint : std::nextafter(midpoint, kMinusInf);
    }
  }
  map.midpoint[kQ8Codes - 1] = std::numeric_limits<double>::infinity();
  for (int k = kQ8Codes - 1; k < kQ8Codes + kQ8BucketSearch - 1; ++k) {
    map.threshold[k] = std::numeric_limits<float>::infinity();
  }
  check_sorted(map);
  fill_buckets(map);
  fill_model(map);
  fill_search(map);
  return map;
}

const Q8Map& dynamic_map(Q8MapKind kind, Q8Semantics semantics) {
  const auto build = [](Q8Semantics s) {
    const std::array<float, kQ8Codes> signed_codes = built_in_codes(true), unsigned_codes = built_in_codes(false);
    return std::array<Q8Map, 3>{q8_map_of_codes(signed_codes, false, s), q8_map_of_codes(unsigned_codes, false, s),
                                q8_map_of_codes(unsigned_codes, true, s)};
  };
  static const std::array<Q8Map, 3> maps[2] = {build(Q8Semantics::cgad), build(Q8Semantics::bnb)};
  return maps[semantics == Q8Semantics::bnb][static_cast<std::size_t>(kind)];
}

void validate_q8_codes(const Q8Codes& codes) {
  const auto check = [](const std::array<float, kQ8Codes>& c, const char* name, int zero_index) {
    const auto fail = [&](const std::string& why) {
      throw core::InputError(std::string("q8 maps: the ") + name + " map " + why);
    };
    for (int k = 0; k < kQ8Codes; ++k) {
      if (!std::isfinite(c[k])) fail("has a code that is not finite (code " + std::to_string(k) + ")");
      if (k > 0 && !(c[k - 1] < c[k])) {
        fail("is not strictly increasing (code " + std::to_string(k - 1) + " = " + core::show(c[k - 1]) + ", code " +
             std::to_string(k) + " = " + core::show(c[k]) + ")");
      }
    }
    if (std::bit_cast<std::uint32_t>(c[zero_index]) != 0u) {
      fail("must hold +0 at code " + std::to_string(zero_index) + ", not " + core::show(c[zero_index]));
    }
    if (c[kQ8Codes - 1] != 1.0f) fail("must end at 1, not " + core::show(c[kQ8Codes - 1]));
    if (!(c[0] >= -1.0f)) fail("must start at -1 or above, not " + core::show(c[0]));
  };
  check(codes.signed_codes, "signed", 127);
  check(codes.unsigned_codes, "unsigned", 0);
  // The nearest-code table's bound (fill_buckets), under both rules and the zero-free map alike.
  for (const Q8Semantics semantics : {Q8Semantics::cgad, Q8Semantics::bnb}) {
    q8_map_of_codes(codes.signed_codes, false, semantics);
    q8_map_of_codes(codes.unsigned_codes, false, semantics);
    q8_map_of_codes(codes.unsigned_codes, true, semantics);
  }
}

bool is_built_in(const Q8Codes& codes) {
  const auto same = [](const std::array<float, kQ8Codes>& c, const Q8Map& map) {
    return std::memcmp(c.data(), map.code, sizeof map.code) == 0;
  };
  return same(codes.signed_codes, dynamic_map(Q8MapKind::signed_map)) &&
         same(codes.unsigned_codes, dynamic_map(Q8MapKind::unsigned_map));
}

bool same_q8_codes(const StepConfig& a, const StepConfig& b) {
  if (a.q8_codes && b.q8_codes) {
    return std::memcmp(a.q8_codes->signed_codes.data(), b.q8_codes->signed_codes.data(), sizeof(float) * kQ8Codes) ==
               0 &&
           std::memcmp(a.q8_codes->unsigned_codes.data(), b.q8_codes->unsigned_codes.data(),
                       sizeof(float) * kQ8Codes) == 0;
  }
  if (a.q8_codes) return is_built_in(*a.q8_codes);
  return !b.q8_codes || is_built_in(*b.q8_codes);
}

Q8Maps::Q8Maps(const StepConfig& config) {
  const Q8Semantics semantics = config.q8_semantics;
  if (!config.q8_codes) {
    moment_ = {&dynamic_map(Q8MapKind::signed_map, semantics),
               &dynamic_map(second_moment_map(config.v_map), semantics)};
    return;
  }
  const Q8Codes& codes = *config.q8_codes;
  owned_ = std::make_shared<const std::array<Q8Map, 2>>(
      std::array<Q8Map, 2>{q8_map_of_codes(codes.signed_codes, false, semantics),
                           q8_map_of_codes(codes.unsigned_codes, config.v_map == VMap::zero_free, semantics)});
  moment_ = {&(*owned_)[0], &(*owned_)[1]};
}

Q8MapKind second_moment_map(VMap map) {
  return map == VMap::zero_free ? Q8MapKind::unsigned_zero_free : Q8MapKind::unsigned_map;
}

}  // namespace cgad::fastpath
