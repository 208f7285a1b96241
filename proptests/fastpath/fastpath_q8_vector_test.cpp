// The line model of the nearest code (q8_nearest_fast in q8.hpp, which the CUDA kernel and the CPU's generic
// version run) and the CPU's block encoder and decoder (q8_vector.hpp, its vector versions) against the
// definition — the bucket search q8_nearest, and q8_dequantize — bit for bit, under every ISA this machine and
// build can run, for the six maps (signed/unsigned/zero-free × cgad/bnb semantics; q8_maps.hpp).
//
// This file builds two executables (proptests/fastpath/CMakeLists.txt): fastpath_q8_vector_test (label ci) encodes a
// sample — every 251st binary32 pattern, the specials, and every float within 64 ulps of each threshold of each
// map and of its negation, where a decision could go wrong; fastpath_q8_vector_long_test (label long,
// CGAD_Q8_VECTOR_LONG defined) encodes every one of the 2^32 binary32 patterns for each map, split over the
// hardware threads, one test per map (--gtest_filter=*EveryFloat/4:*EveryFloat/5 runs the zero-free maps alone).
// The decoder is checked on all 256 codes with absmax values across the whole float range.
#include "cgad/core/errors.hpp"
#include "cgad/fastpath/detail/block_step.hpp"
#include "cgad/fastpath/cpu_isa.hpp"
#include "cgad/fastpath/detail/q8_maps.hpp"
#include "cgad/fastpath/detail/q8_vector.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace cgad::fastpath {
namespace {

struct MapCase {
  Q8MapKind kind;
  Q8Semantics semantics;
};
const MapCase kMaps[] = {
    {Q8MapKind::signed_map, Q8Semantics::cgad},         {Q8MapKind::unsigned_map, Q8Semantics::cgad},
    {Q8MapKind::signed_map, Q8Semantics::bnb},          {Q8MapKind::unsigned_map, Q8Semantics::bnb},
    {Q8MapKind::unsigned_zero_free, Q8Semantics::cgad}, {Q8MapKind::unsigned_zero_free, Q8Semantics::bnb}};

std::string name_of(const MapCase& c) {
  const char* kind = c.kind == Q8MapKind::signed_map     ? "signed"
                     : c.kind == Q8MapKind::unsigned_map ? "unsigned"
                                                         : "zero-free";
  return std::string(kind) + "/" + (c.semantics == Q8Semantics::cgad ? "cgad" : "bnb");
}

// What is checked against q8_nearest: the scalar line model, or the block encoder under a vector ISA.
struct Encoder {
  bool scalar_model;
  CpuIsa isa;
  std::string name() const {
    return scalar_model ? "q8_nearest_fast" : "block encoder, " + std::string(to_string(isa));
  }
};

std::vector<Encoder> encoders() {
  std::vector<Encoder> all{{true, CpuIsa::generic}};
  for (CpuIsa isa : supported_cpu_isas()) {
    if (isa != CpuIsa::generic) all.push_back({false, isa});
  }
  return all;
}

// Encodes `inputs` with `encoder` and compares every code with q8_nearest; returns the number of mismatches and
// keeps the first few, in hexfloat, in `examples`.
std::uint64_t mismatches(const std::vector<float>& inputs, const Q8Map& map, const Encoder& encoder,
                         std::string& examples) {
  std::vector<std::uint8_t> codes(inputs.size());
  if (encoder.scalar_model) {
    for (std::size_t i = 0; i < inputs.size(); ++i) codes[i] = q8_nearest_fast(inputs[i], map);
  } else {
    q8_encode_nearest(inputs.data(), inputs.size(), map, codes.data(), encoder.isa);
  }
  std::uint64_t bad = 0;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const std::uint8_t expected = q8_nearest(inputs[i], map);
    if (codes[i] != expected) {
      if (++bad <= 5) {
        std::ostringstream s;
        s << std::hexfloat << " x=" << inputs[i] << " encoder " << int(codes[i]) << " q8_nearest " << int(expected)
          << ";";
        examples += s.str();
      }
    }
  }
  return bad;
}

// Every 251st binary32 pattern, the specials, and every float within 64 ulps of each threshold and code of `map` and
// of their negations, where a decision could go wrong.
std::vector<float> sample_inputs(const Q8Map& map) {
  std::vector<float> inputs;
  for (std::uint64_t bits = 0; bits < (1ull << 32); bits += 251)
    inputs.push_back(std::bit_cast<float>(std::uint32_t(bits)));
  for (float special :
       {0.0f, -0.0f, 1.0f, -1.0f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
        std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
        std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::max()}) {
    inputs.push_back(special);
  }
  for (int k = 0; k + 1 < kQ8Codes; ++k) {
    for (float t : {map.threshold[k], -map.threshold[k], map.code[k], -map.code[k]}) {
      const auto center = static_cast<std::int64_t>(std::bit_cast<std::uint32_t>(t));
      for (std::int64_t d = -64; d <= 64; ++d) inputs.push_back(std::bit_cast<float>(std::uint32_t(center + d)));
    }
  }
  return inputs;
}

TEST(FastpathQ8Vector, EveryDynamicMapHasALineModel) {
  for (const MapCase& c : kMaps) EXPECT_EQ(dynamic_map(c.kind, c.semantics).has_model, 1) << name_of(c);
}

TEST(FastpathQ8Vector, EncodersEqualTheBucketSearchOnTheSample) {
  for (const MapCase& c : kMaps) {
    const Q8Map& map = dynamic_map(c.kind, c.semantics);
    const std::vector<float> inputs = sample_inputs(map);
    for (const Encoder& e : encoders()) {
      std::string examples;
      EXPECT_EQ(mismatches(inputs, map, e, examples), 0u) << name_of(c) << " " << e.name() << ":" << examples;
      std::printf("%s, %s: %zu sampled inputs equal q8_nearest\n", name_of(c).c_str(), e.name().c_str(), inputs.size());
    }
  }
}

// A given map (StepConfig::q8_codes) with a threshold of −0, bnb semantics: the float midpoint of −2^-149 and 0
// rounds to it. The search tree must rank it as float compares do, equal to +0 (Q8Map::search_key), so that +0
// and −0 both stay below it.
TEST(FastpathQ8Vector, EncodersEqualTheBucketSearchOnAMapWithAThresholdOfMinusZero) {
  std::array<float, kQ8Codes> codes;
  std::copy(dynamic_map(Q8MapKind::signed_map).code, dynamic_map(Q8MapKind::signed_map).code + kQ8Codes, codes.begin());
  codes[126] = -std::numeric_limits<float>::denorm_min();
  const Q8Map map = q8_map_of_codes(codes, false, Q8Semantics::bnb);
  ASSERT_EQ(std::bit_cast<std::uint32_t>(map.threshold[126]), 0x80000000u);
  const std::vector<float> inputs = sample_inputs(map);
  for (const Encoder& e : encoders()) {
    std::string examples;
    EXPECT_EQ(mismatches(inputs, map, e, examples), 0u) << e.name() << ":" << examples;
  }
}

// Codes a float apart around 0.5 at an odd index, bnb semantics: both float midpoints round to 0.5 and the odd one's
// tie rule takes its predecessor, so two thresholds cross. No count of thresholds below x is the nearest code then;
// the map is refused with one line that says so.
TEST(FastpathQ8Vector, AMapWhoseThresholdsCrossIsRefusedWithOneLine) {
  std::array<float, kQ8Codes> codes;
  std::copy(dynamic_map(Q8MapKind::signed_map).code, dynamic_map(Q8MapKind::signed_map).code + kQ8Codes, codes.begin());
  int half = 1;  // the odd index whose code is nearest 0.5
  for (int k = 1; k < kQ8Codes; k += 2) {
    if (std::fabs(codes[k] - 0.5f) < std::fabs(codes[half] - 0.5f)) half = k;
  }
  codes[half - 1] = std::nextafter(0.5f, 0.0f);
  codes[half] = 0.5f;
  codes[half + 1] = std::nextafter(0.5f, 1.0f);
  try {
    q8_map_of_codes(codes, false, Q8Semantics::bnb);
    FAIL() << "a map whose thresholds cross was built";
  } catch (const core::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("out of order"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
  }
}

#if defined(CGAD_Q8_VECTOR_LONG)
class FastpathQ8VectorLong : public ::testing::TestWithParam<int> {};

TEST_P(FastpathQ8VectorLong, EncodersEqualTheBucketSearchOnEveryFloat) {
  const unsigned workers = std::max(1u, std::thread::hardware_concurrency());
  constexpr std::uint64_t kSlice = 1u << 16;
  const MapCase& c = kMaps[GetParam()];
  const Q8Map& map = dynamic_map(c.kind, c.semantics);
  for (const Encoder& encoder : encoders()) {
    std::atomic<std::uint64_t> next{0}, bad{0};
    std::mutex lock;
    std::string examples;
    std::vector<std::thread> pool;
    for (unsigned w = 0; w < workers; ++w) {
      pool.emplace_back([&] {
        std::vector<float> inputs(kSlice);
        std::string mine;
        for (std::uint64_t start = next.fetch_add(kSlice); start < (1ull << 32); start = next.fetch_add(kSlice)) {
          for (std::uint64_t i = 0; i < kSlice; ++i) inputs[i] = std::bit_cast<float>(std::uint32_t(start + i));
          bad += mismatches(inputs, map, encoder, mine);
        }
        const std::lock_guard<std::mutex> guard(lock);
        examples += mine;
      });
    }
    for (std::thread& t : pool) t.join();
    EXPECT_EQ(bad.load(), 0u) << name_of(c) << " " << encoder.name() << ":" << examples;
    std::printf("%s, %s: all 2^32 floats equal q8_nearest (%llu mismatches)\n", name_of(c).c_str(),
                encoder.name().c_str(), static_cast<unsigned long long>(bad.load()));
  }
}
INSTANTIATE_TEST_SUITE_P(EveryMap, FastpathQ8VectorLong, ::testing::Range(0, static_cast<int>(std::size(kMaps))));
#endif

TEST(FastpathQ8Vector, DecoderEqualsQ8DequantizeOnEveryCode) {
  std::vector<std::uint8_t> codes(kQ8Codes);
  for (int k = 0; k < kQ8Codes; ++k) codes[static_cast<std::size_t>(k)] = static_cast<std::uint8_t>(k);
  for (const MapCase& c : kMaps) {
    const Q8Map& map = dynamic_map(c.kind, c.semantics);
    for (float absmax : {0.0f, 1.0f, 0x1.8p-3f, 3.0e-39f, std::numeric_limits<float>::denorm_min(), 1.0e-20f, 7.5e20f,
                         std::numeric_limits<float>::max(), std::numeric_limits<float>::infinity()}) {
      for (CpuIsa isa : supported_cpu_isas()) {
        std::vector<float> out(kQ8Codes);
        q8_decode(codes.data(), codes.size(), absmax, map, out.data(), isa);
        for (int k = 0; k < kQ8Codes; ++k) {
          const float expected = q8_dequantize(static_cast<std::uint8_t>(k), absmax, map);
          EXPECT_EQ(std::bit_cast<std::uint32_t>(out[static_cast<std::size_t>(k)]),
                    std::bit_cast<std::uint32_t>(expected))
              << name_of(c) << " " << to_string(isa) << std::hexfloat << " code " << k << " absmax " << absmax;
        }
      }
    }
  }
}

TEST(FastpathQ8Vector, BnbSignFixOfABlockEqualsBnbSignFixForEveryCodeAndValueClass) {
  const Q8Map& map = dynamic_map(Q8MapKind::signed_map, Q8Semantics::bnb);
  ASSERT_EQ(map.has_model, 1);
  const float values[] = {0.0f,
                          -0.0f,
                          0x1p-149f,
                          -0x1p-149f,
                          1e-30f,
                          -1e-30f,
                          0.5f,
                          -0.5f,
                          1.0f,
                          -1.0f,
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN(),
                          -std::numeric_limits<float>::quiet_NaN()};
  for (float value : values) {
    std::vector<std::uint8_t> codes(kQ8Codes);
    std::vector<float> block(kQ8Codes, value);
    for (int k = 0; k < kQ8Codes; ++k) codes[static_cast<std::size_t>(k)] = static_cast<std::uint8_t>(k);
    bnb_sign_fix_block(codes.data(), block.data(), codes.size(), map);
    for (int k = 0; k < kQ8Codes; ++k) {
      EXPECT_EQ(codes[static_cast<std::size_t>(k)], bnb_sign_fix(static_cast<std::uint8_t>(k), value, map))
          << std::hexfloat << "code " << k << " value " << value;
    }
  }
}

}  // namespace
}  // namespace cgad::fastpath
