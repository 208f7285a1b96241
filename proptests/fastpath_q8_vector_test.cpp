// The CPU's block encoder and decoder (q8_vector.hpp) against the per-element rule the CUDA kernel runs
// (q8_nearest, q8_dequantize in q8.hpp), bit for bit, under every ISA this machine and build can run, for the
// four maps (signed/unsigned × cgad/bnb semantics).
//
// This file builds two executables (proptests/CMakeLists.txt): fastpath_q8_vector_test (label ci) encodes a
// sample — every 251st binary32 pattern, the specials, and every float within 64 ulps of each threshold of each
// map and of its negation, where a decision could go wrong; fastpath_q8_vector_long_test (label long,
// CGAD_Q8_VECTOR_LONG defined) encodes every one of the 2^32 binary32 patterns for each map, split over the
// hardware threads. The decoder is checked on all 256 codes with absmax values across the whole float range.
#include "cgad/fastpath/cpu_isa.hpp"
#include "cgad/fastpath/q8_maps.hpp"
#include "cgad/fastpath/q8_vector.hpp"

#include <gtest/gtest.h>

#include <algorithm>
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
const MapCase kMaps[] = {{Q8MapKind::signed_map, Q8Semantics::cgad}, {Q8MapKind::unsigned_map, Q8Semantics::cgad},
                         {Q8MapKind::signed_map, Q8Semantics::bnb}, {Q8MapKind::unsigned_map, Q8Semantics::bnb}};

std::string name_of(const MapCase& c) {
  return std::string(c.kind == Q8MapKind::signed_map ? "signed" : "unsigned") + "/" +
         (c.semantics == Q8Semantics::cgad ? "cgad" : "bnb");
}

std::vector<CpuIsa> vector_isas() {
  std::vector<CpuIsa> isas = supported_cpu_isas();
  isas.erase(std::remove(isas.begin(), isas.end(), CpuIsa::generic), isas.end());
  return isas;
}

// Encodes `inputs` with the block encoder under `isa` and compares every code with q8_nearest; returns the number
// of mismatches and keeps the first few, in hexfloat, in `examples`.
std::uint64_t mismatches(const std::vector<float>& inputs, const Q8Map& map, CpuIsa isa, std::string& examples) {
  std::vector<std::uint8_t> codes(inputs.size());
  q8_encode_nearest(inputs.data(), inputs.size(), map, codes.data(), isa);
  std::uint64_t bad = 0;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const std::uint8_t expected = q8_nearest(inputs[i], map);
    if (codes[i] != expected) {
      if (++bad <= 5) {
        std::ostringstream s;
        s << std::hexfloat << " x=" << inputs[i] << " vector " << int(codes[i]) << " rule " << int(expected) << ";";
        examples += s.str();
      }
    }
  }
  return bad;
}

TEST(FastpathQ8Vector, EveryDynamicMapHasAVectorModel) {
  for (const MapCase& c : kMaps) EXPECT_TRUE(q8_has_vector_model(dynamic_map(c.kind, c.semantics))) << name_of(c);
}

TEST(FastpathQ8Vector, EncoderEqualsThePerElementRuleOnTheSample) {
  const std::vector<CpuIsa> isas = vector_isas();
  if (isas.empty()) GTEST_SKIP() << "this CPU or build runs only the generic ISA, which is the per-element rule";
  for (const MapCase& c : kMaps) {
    const Q8Map& map = dynamic_map(c.kind, c.semantics);
    std::vector<float> inputs;
    for (std::uint64_t bits = 0; bits < (1ull << 32); bits += 251) inputs.push_back(std::bit_cast<float>(std::uint32_t(bits)));
    for (float special : {0.0f, -0.0f, 1.0f, -1.0f, std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
                          -std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::denorm_min(),
                          std::numeric_limits<float>::max()}) {
      inputs.push_back(special);
    }
    for (int k = 0; k + 1 < kQ8Codes; ++k) {
      for (float t : {map.threshold[k], -map.threshold[k], map.code[k], -map.code[k]}) {
        const auto center = static_cast<std::int64_t>(std::bit_cast<std::uint32_t>(t));
        for (std::int64_t d = -64; d <= 64; ++d) inputs.push_back(std::bit_cast<float>(std::uint32_t(center + d)));
      }
    }
    for (CpuIsa isa : isas) {
      std::string examples;
      EXPECT_EQ(mismatches(inputs, map, isa, examples), 0u) << name_of(c) << " " << to_string(isa) << ":" << examples;
    }
    std::printf("q8 vector encoder, %s: %zu sampled inputs equal the per-element rule under", name_of(c).c_str(),
                inputs.size());
    for (CpuIsa isa : isas) std::printf(" %s", std::string(to_string(isa)).c_str());
    std::printf("\n");
  }
}

#if defined(CGAD_Q8_VECTOR_LONG)
TEST(FastpathQ8Vector, EncoderEqualsThePerElementRuleOnEveryFloat) {
  const std::vector<CpuIsa> isas = vector_isas();
  if (isas.empty()) GTEST_SKIP() << "this CPU or build runs only the generic ISA, which is the per-element rule";
  const unsigned workers = std::max(1u, std::thread::hardware_concurrency());
  constexpr std::uint64_t kSlice = 1u << 16;
  for (const MapCase& c : kMaps) {
    const Q8Map& map = dynamic_map(c.kind, c.semantics);
    for (CpuIsa isa : isas) {
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
            bad += mismatches(inputs, map, isa, mine);
          }
          const std::lock_guard<std::mutex> guard(lock);
          examples += mine;
        });
      }
      for (std::thread& t : pool) t.join();
      EXPECT_EQ(bad.load(), 0u) << name_of(c) << " " << to_string(isa) << ":" << examples;
      std::printf("q8 vector encoder, %s, %s: all 2^32 floats equal the per-element rule (%llu mismatches)\n",
                  name_of(c).c_str(), std::string(to_string(isa)).c_str(), static_cast<unsigned long long>(bad.load()));
    }
  }
}
#endif

TEST(FastpathQ8Vector, DecoderEqualsThePerElementRuleOnEveryCode) {
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
          EXPECT_EQ(std::bit_cast<std::uint32_t>(out[static_cast<std::size_t>(k)]), std::bit_cast<std::uint32_t>(expected))
              << name_of(c) << " " << to_string(isa) << std::hexfloat << " code " << k << " absmax " << absmax;
        }
      }
    }
  }
}

}  // namespace
}  // namespace cgad::fastpath
