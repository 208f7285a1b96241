// The bit-exact fingerprint of the fast-path CPU step: FNV-1a over the parameter bits and every state byte after
// 50 steps (3001 parameters, gradients of mixed scales plus steps at 1e-30, 1e30 and 1e-42 for the v = 0 guard,
// overflow and subnormals), for every optimizer × params × state × rounding × q8 semantics
// (all_format_configs), with 1 and 2 threads, under every ISA this CPU and build run (cpu_isa.hpp).
//
// What it pins: the step's bits do not depend on the thread count or the ISA, and they are the recorded ones
// (docs/design.md §5: both backends compute the same bits). A change that is meant to move bits (a semantics
// change) must say so in its commit and replace kRecordedTotal with the new total, printed by this test; the
// git history of kRecordedTotal says which changes moved it and why.
#include "support/fastpath_test_support.hpp"

#include "cgad/fastpath/cpu_isa.hpp"
#include "cgad/fastpath/detail/q8_maps.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>

namespace cgad::fastpath {
namespace {

using namespace cgad::fastpath::testing;
namespace core = cgad::core;

// Both with σ the float nearest the reference's σ of the user's α
// (fastpath/include/cgad/fastpath/detail/staleness.hpp), and cgad semantics' 1 − β and bias corrections from the
// decimal β (fastpath/include/cgad/fastpath/detail/derived_constants.hpp); the commits that recorded them say which
// bits changed from the totals before.
constexpr std::uint64_t kRecordedTotal = 0xe3fc3ad30425810full;
constexpr std::uint64_t kRecordedZeroFreeTotal = 0x26d02fbe69702aceull;

std::uint64_t fnv(std::uint64_t h, const std::vector<unsigned char>& bytes) {
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

// The fingerprint of one configuration with `threads` threads under the ISA CGAD_CPU_ISA names.
std::uint64_t fingerprint(StepConfig c, unsigned threads) {
  const std::size_t n = 3001;
  CpuOptimizer opt(c, n, threads);
  Params p(c, random_vector(n, 7));
  for (int s = 0; s < 50; ++s) {
    const std::size_t fragment = c.fragments > 1 ? static_cast<std::size_t>(s) % c.fragments : 0;
    const std::size_t size = opt.fragment_size(fragment);
    float scale = 1.0f;
    if (s == 20) scale = 1e-30f;  // v underflow / guard
    if (s == 30) scale = 1e30f;   // overflow to inf
    if (s == 31) scale = 1e-42f;  // subnormal gradients
    const auto grad = random_vector(size, 100 + static_cast<unsigned>(s), scale);
    p.step(opt, grad, (s * 7) % 41, fragment);
    if (s % 10 == 9) opt.advance_round();
  }
  return fnv(fnv(0xcbf29ce484222325ull, p.bytes()), state_bytes(opt));
}

TEST(FastpathFingerprint, TheStepsBitsDependOnNeitherThreadsNorIsaAndAreTheRecordedOnes) {
  const CpuIsaEnvironment environment;
  for (CpuIsa isa : supported_cpu_isas()) {
    environment.set(std::string(to_string(isa)));
    std::uint64_t total = 0xcbf29ce484222325ull;
    for (auto kind : {core::OptimizerKind::cgad, core::OptimizerKind::pa_cgad, core::OptimizerKind::adam_decay,
                      core::OptimizerKind::adam, core::OptimizerKind::nesterov, core::OptimizerKind::sdm}) {
      for (StepConfig c : all_format_configs(kind)) {
        if (kind == core::OptimizerKind::pa_cgad) c.fragments = 3;
        const std::uint64_t one = fingerprint(c, 1), two = fingerprint(c, 2);
        EXPECT_EQ(one, two) << describe(c) << " under " << to_string(isa) << ": 1 and 2 threads differ";
        total = total * 31 + one;
      }
    }
    std::printf("fingerprint under %s: TOTAL %016llx\n", std::string(to_string(isa)).c_str(),
                static_cast<unsigned long long>(total));
    EXPECT_EQ(total, kRecordedTotal) << "under " << to_string(isa) << std::hex << ": TOTAL " << total;
  }
}

// The same for the zero-free v map (zero_free_configs: the q8 configurations of the Adam family), with a total of
// its own, recorded when the map was added, so the one above is untouched. Each configuration must also differ
// from its dynamic-map twin: the steps at 1e-30 and 1e-42 store v as 0 in the dynamic map, not in this one.
TEST(FastpathFingerprint, ZeroFreeVMapStepsDependOnNeitherThreadsNorIsaAndAreTheRecordedOnes) {
  const CpuIsaEnvironment environment;
  for (CpuIsa isa : supported_cpu_isas()) {
    environment.set(std::string(to_string(isa)));
    std::uint64_t total = 0xcbf29ce484222325ull;
    for (auto kind : {core::OptimizerKind::cgad, core::OptimizerKind::pa_cgad, core::OptimizerKind::adam_decay,
                      core::OptimizerKind::adam}) {
      for (StepConfig c : zero_free_configs(kind)) {
        if (kind == core::OptimizerKind::pa_cgad) c.fragments = 3;
        const std::uint64_t one = fingerprint(c, 1), two = fingerprint(c, 2);
        EXPECT_EQ(one, two) << describe(c) << " under " << to_string(isa) << ": 1 and 2 threads differ";
        StepConfig dynamic = c;
        dynamic.v_map = VMap::dynamic;
        EXPECT_NE(one, fingerprint(dynamic, 1)) << describe(c) << ": the v map changed no bit";
        total = total * 31 + one;
      }
    }
    std::printf("zero-free fingerprint under %s: TOTAL %016llx\n", std::string(to_string(isa)).c_str(),
                static_cast<unsigned long long>(total));
    EXPECT_EQ(total, kRecordedZeroFreeTotal) << "under " << to_string(isa) << std::hex << ": TOTAL " << total;
  }
}

// The built-in maps' codes given as data (StepConfig::q8_codes, q8_maps.hpp) to every q8 configuration give the
// recorded totals: a map built from given codes is the built-in one, bit for bit, in every step and state byte.
TEST(FastpathFingerprint, TheBuiltInCodesGivenAsDataGiveTheRecordedTotals) {
  Q8Codes codes;
  std::copy_n(dynamic_map(Q8MapKind::signed_map).code, kQ8Codes, codes.signed_codes.begin());
  std::copy_n(dynamic_map(Q8MapKind::unsigned_map).code, kQ8Codes, codes.unsigned_codes.begin());
  std::uint64_t total = 0xcbf29ce484222325ull, zero_free_total = 0xcbf29ce484222325ull;
  for (auto kind : {core::OptimizerKind::cgad, core::OptimizerKind::pa_cgad, core::OptimizerKind::adam_decay,
                    core::OptimizerKind::adam, core::OptimizerKind::nesterov, core::OptimizerKind::sdm}) {
    for (const bool zero_free : {false, true}) {
      for (StepConfig c : zero_free ? zero_free_configs(kind) : all_format_configs(kind)) {
        if (kind == core::OptimizerKind::pa_cgad) c.fragments = 3;
        if (c.state == StateFormat::q8) c.q8_codes = codes;
        std::uint64_t& into = zero_free ? zero_free_total : total;
        into = into * 31 + fingerprint(c, 1);
      }
    }
  }
  EXPECT_EQ(total, kRecordedTotal) << std::hex << "TOTAL " << total;
  EXPECT_EQ(zero_free_total, kRecordedZeroFreeTotal) << std::hex << "TOTAL " << zero_free_total;
}

}  // namespace
}  // namespace cgad::fastpath
