#pragma once
// What the fast-path tests share: configurations over every format combination, random inputs, and exact
// snapshots of an optimizer (parameter bits, state bytes, counters) for bit-identity checks.
#include "cgad/fastpath/fastpath.hpp"
#include "cgad/fastpath/detail/cpu_optimizer_internals.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace cgad::fastpath::testing {

// A float as hexfloat text ("%a"), for failure messages that can be replayed exactly.
inline std::string hex(float x) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%a", static_cast<double>(x));
  return buffer;
}

// Two reports agree in every field, σ bit for bit.
inline void expect_same_report(const StepReport& got, const StepReport& want, const std::string& where) {
  EXPECT_EQ(got.applied, want.applied) << where;
  EXPECT_EQ(got.reason, want.reason) << where;
  EXPECT_EQ(got.nonfinite_index, want.nonfinite_index) << where;
  EXPECT_EQ(got.tau_effective, want.tau_effective) << where;
  EXPECT_EQ(std::bit_cast<std::uint32_t>(got.sigma), std::bit_cast<std::uint32_t>(want.sigma)) << where;
}

// CGAD_CPU_ISA (cpu_isa.hpp) for the scope of a test: set() or clear() it; the value it had is restored on every
// exit, an early return of a failed ASSERT included, so that no later test runs under another ISA.
class CpuIsaEnvironment {
 public:
  CpuIsaEnvironment() {
    if (const char* now = std::getenv(kName)) before_ = now;
  }
  ~CpuIsaEnvironment() { before_ ? (void)setenv(kName, before_->c_str(), 1) : (void)unsetenv(kName); }
  CpuIsaEnvironment(const CpuIsaEnvironment&) = delete;
  CpuIsaEnvironment& operator=(const CpuIsaEnvironment&) = delete;
  void set(const std::string& value) const { setenv(kName, value.c_str(), 1); }
  void clear() const { unsetenv(kName); }

 private:
  static constexpr const char* kName = "CGAD_CPU_ISA";
  std::optional<std::string> before_;
};

inline std::vector<StepConfig> all_format_configs(core::OptimizerKind kind) {
  std::vector<StepConfig> configs;
  for (const ParamFormat params : {ParamFormat::fp32, ParamFormat::bf16}) {
    for (const StateFormat state : {StateFormat::fp32, StateFormat::bf16, StateFormat::q8}) {
      for (const Rounding rounding : {Rounding::nearest, Rounding::stochastic}) {
        StepConfig c;
        c.optimizer = kind;
        c.params = params;
        c.state = state;
        c.rounding = rounding;
        c.seed = 0x1234'5678'9ABCull;
        c.adam.lr = 0.01f;
        c.adam.weight_decay = 0.01f;
        configs.push_back(c);
      }
    }
  }
  // bitsandbytes' semantics (Adam family, nearest rounding, fp32 or q8 state) after cgad's, so that the
  // indices above stay what the tests name.
  if (core::is_adam_family(kind)) {
    for (const ParamFormat params : {ParamFormat::fp32, ParamFormat::bf16}) {
      for (const StateFormat state : {StateFormat::fp32, StateFormat::q8}) {
        StepConfig c = configs.front();
        c.params = params;
        c.state = state;
        c.q8_semantics = Q8Semantics::bnb;
        configs.push_back(c);
      }
    }
  }
  return configs;
}

// all_format_configs(kind)'s q8 configurations with the zero-free v map (none outside the Adam family), kept apart
// so that the indices and the fingerprint of the configurations above stay what they were; min_q8_size 0, so that
// bnb semantics too keeps small test tensors in 8-bit state, where the map acts.
inline std::vector<StepConfig> zero_free_configs(core::OptimizerKind kind) {
  std::vector<StepConfig> configs;
  if (!core::is_adam_family(kind)) return configs;
  for (StepConfig c : all_format_configs(kind)) {
    if (c.state != StateFormat::q8) continue;
    c.v_map = VMap::zero_free;
    c.min_q8_size = 0;
    configs.push_back(c);
  }
  return configs;
}

// Tensor layouts that reach every chunking case: one tensor, tensors whose boundaries fall inside 256-blocks,
// an empty tensor, and tensors on both sides of min_q8_size (set to 300 where the tests use these).
inline std::vector<std::vector<std::size_t>> tensor_layouts() {
  return {{3 * 256 + 17}, {257, 0, 300, 1, 512, 45}, {1000, 299}};
}

inline std::string describe(const StepConfig& c) {
  return std::string(core::to_string(c.optimizer)) + "/" + std::string(to_string(c.params)) + "/" +
         std::string(to_string(c.state)) + "/" + std::string(to_string(c.rounding)) + "/" +
         std::string(to_string(c.q8_semantics)) + (c.v_map == VMap::zero_free ? "/zero-free" : "") +
         (c.min_q8_size ? "/min" + std::to_string(*c.min_q8_size) : "");
}

// Pseudo-gradients of mixed scales and signs, with some exact zeros.
inline std::vector<float> random_vector(std::size_t n, std::uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::vector<float> out(n);
  for (auto& x : out) {
    const int kind = static_cast<int>(rng() % 16);
    const float magnitude = std::ldexp(std::uniform_real_distribution<float>(1.0f, 2.0f)(rng),
                                       std::uniform_int_distribution<int>(-12, 2)(rng));
    x = kind == 0 ? 0.0f : ((rng() & 1) ? magnitude : -magnitude) * scale;
  }
  return out;
}

// Parameters held in either format, stepped through the matching overload.
struct Params {
  std::vector<float> fp32;
  std::vector<bf16> bf16_values;

  Params(const StepConfig& config, const std::vector<float>& initial) {
    if (config.params == ParamFormat::fp32) {
      fp32 = initial;
    } else {
      for (float x : initial) bf16_values.push_back(round_nearest_even_bf16(x));
    }
  }
  StepReport step(CpuOptimizer& opt, const std::vector<float>& grad, std::int64_t tau, std::size_t fragment = 0) {
    if (opt.config().params == ParamFormat::bf16) return opt.step(std::span<bf16>(bf16_values), grad, tau, fragment);
    return opt.step(std::span<float>(fp32), grad, tau, fragment);
  }
  std::vector<unsigned char> bytes() const {
    std::vector<unsigned char> out(fp32.size() * 4 + bf16_values.size() * 2);
    if (!fp32.empty()) std::memcpy(out.data(), fp32.data(), fp32.size() * 4);
    if (!bf16_values.empty()) std::memcpy(out.data(), bf16_values.data(), bf16_values.size() * 2);
    return out;
  }
};

// Every byte of the optimizer's state and its counters; without the synchronization rounds (PA-CGAD's record
// of which fragment the server last synchronized, which every event of it updates) when `with_sync` is false.
inline std::vector<unsigned char> state_bytes(const CpuOptimizer& opt, bool with_sync = true) {
  std::vector<unsigned char> out;
  const auto append = [&out](const void* p, std::size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    out.insert(out.end(), b, b + n);
  };
  const HostState& s = detail::host_state_of(opt);
  for (int k = 0; k < 2; ++k) {
    append(s.fp32[k].data(), s.fp32[k].size() * 4);
    append(s.bf16_values[k].data(), s.bf16_values[k].size() * 2);
    append(s.codes[k].data(), s.codes[k].size());
    append(s.absmax[k].data(), s.absmax[k].size() * 4);
  }
  const auto& c = opt.raw_counters();
  append(c.t.data(), c.t.size() * 8);
  if (with_sync) append(c.last_sync.data(), c.last_sync.size() * 8);
  append(&c.round, 8);
  append(&c.steps, 8);
  return out;
}

}  // namespace cgad::fastpath::testing
