// The overflow rule (docs/design.md §3; fastpath/src/cpu_optimizer.cpp `overflows`, reference/detail/gated_adam.hpp):
// an Adam-family event with |σ·Δ_i| ≥ 2^63 for some i — whose square would overflow float — is refused whole, like a
// NaN/Inf one: StepReport applied = false, reason overflowing_gradient, nonfinite_index = the first such i, and
// no byte of the parameters, the state or the counters changes. The fast path decides on its float product
// fl(σ·Δ_i); the reference on the exact one.
//
//  - at the exact threshold, both signs: fl(σΔ) = ±2^63 refused, ±pred(2^63) (= ±0x1.fffffep62) applied with
//    every m, v and θ finite afterwards — for σ = 1 (τ = 0) and for σ < 1 (CGAD at τ = 1, Adam-Decay at τ = 3,
//    where the boundary Δ is the smallest float whose float product with the fast path's σ reaches 2^63), for
//    every Adam-family optimizer, every format configuration (cgad's and bnb's semantics, fp32/bf16/q8 state,
//    fp32/bf16 params, both roundings), with the overflowing element inside a q8 block (where an applied
//    event would decode the whole block as NaN) and in a tensor that keeps fp32 state;
//  - the first index wins when several overflow, whatever the thread split;
//  - the reference refuses the same events (σ = 1, or far from the edge for σ < 1);
//  - a NaN/Inf in the same event is reported as nonfinite-gradient (NaN wins), wherever it is;
//  - with on_zero_gate = skip and τ ≥ τ_cut the event is a zero-gate skip, not an overflow (and with apply,
//    σ = 0 makes σΔ = 0: applied);
//  - Nesterov and SDM follow the same rule on their σ·Δ (σ = 1, or 1/(1 + τ) for SDM), where an applied Δ near
//    float's range would give −Inf on the first event in every format; below the threshold they apply and stay
//    finite.
#include "support/fastpath_test_support.hpp"

#include "cgad/fastpath/fastpath.hpp"
#include "cgad/reference/optimizers.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

namespace cgad::fastpath {
namespace {

namespace ref = cgad::reference;
namespace core = cgad::core;
using core::OptimizerKind;
using core::SkipReason;
using ref::mpfr_real;
using testing::all_format_configs;
using testing::describe;
using testing::Params;
using testing::random_vector;
using testing::state_bytes;

constexpr float kLimit = 0x1p63f;                         // 2^kRefusedGradientExponent (core/overflow_rule.hpp)
const float kBelowLimit = std::nextafter(0x1p63f, 0.0f);  // 0x1.fffffep62

constexpr OptimizerKind kAdamFamily[] = {OptimizerKind::cgad, OptimizerKind::pa_cgad, OptimizerKind::adam_decay,
                                         OptimizerKind::adam};

std::string hex(float x) {
  std::ostringstream out;
  out << std::hexfloat << x;
  return out.str();
}

// An optimizer, its parameters, and two warm-up events at `tau` so that the state is not all zero. PA-CGAD gets
// P = 2 (the event then goes to fragment 1, and nonfinite_index counts inside the fragment's slice).
struct Rig {
  StepConfig config;
  CpuOptimizer opt;
  Params params;
  std::size_t fragment;
  float sigma = 0;  // the fast path's σ at `tau`, from a warm-up report

  Rig(StepConfig c, const std::vector<std::size_t>& tensors, std::int64_t tau, unsigned threads = 3)
      : config(with_fragments(c)),
        opt(config, tensors, threads),
        params(config, random_vector(opt.parameters(), 21)),
        fragment(config.fragments - 1) {
    for (std::uint32_t k = 0; k < 2; ++k) {
      for (std::size_t f = 0; f < config.fragments; ++f) {
        const StepReport r = params.step(opt, random_vector(size(f), 30 + k), tau, f);
        EXPECT_TRUE(r.applied);
        sigma = r.sigma;
      }
      opt.advance_round();
    }
  }
  static StepConfig with_fragments(StepConfig c) {
    if (c.optimizer == OptimizerKind::pa_cgad) c.fragments = 2;
    return c;
  }
  std::size_t size(std::size_t f) const { return opt.fragment_size(f); }
  std::vector<unsigned char> snapshot() const {
    std::vector<unsigned char> out = params.bytes();
    const auto s = state_bytes(opt);
    out.insert(out.end(), s.begin(), s.end());
    return out;
  }
  StepReport step(const std::vector<float>& grad, std::int64_t tau) { return params.step(opt, grad, tau, fragment); }
  // Every parameter and every decoded moment is finite.
  std::string first_nonfinite() const {
    std::vector<float> theta = params.fp32;
    for (const bf16 h : params.bf16_values) theta.push_back(to_float(h));
    for (std::size_t i = 0; i < theta.size(); ++i) {
      if (!std::isfinite(theta[i])) return "theta[" + std::to_string(i) + "] = " + hex(theta[i]);
    }
    for (const auto& name : opt.buffer_names()) {
      std::vector<float> buffer(opt.parameters());
      opt.read_buffer(name, buffer);
      for (std::size_t i = 0; i < buffer.size(); ++i) {
        if (!std::isfinite(buffer[i])) return name + "[" + std::to_string(i) + "] = " + hex(buffer[i]);
      }
    }
    return "";
  }
};

// Configurations × layouts: one 600-element tensor in q8 blocks for both semantics (min_q8_size = 0: bnb's
// default 4096 would keep it in fp32), and the multi-tensor layout whose tensors lie on both sides of
// min_q8_size = 300 (its tensor of 300 elements — indices 258..557 — is q8, the 257-element one keeps fp32 state).
struct Layout {
  std::vector<std::size_t> tensors;
  std::size_t min_q8_size;
  std::vector<std::size_t> positions;  // where to put the overflowing element, as indices into the event's slice
};
std::vector<Layout> layouts() {
  return {{{600}, 0, {0, 300, 599}}, {{257, 0, 300, 1, 512, 45}, 300, {100, 400}}};
}

// σ = 1 (τ = 0) for every Adam-family optimizer; σ < 1: CGAD at τ = 1, Adam-Decay at τ = 3.
struct Gate {
  OptimizerKind kind;
  std::int64_t tau;
};
std::vector<Gate> gates() {
  std::vector<Gate> out;
  for (const OptimizerKind kind : kAdamFamily) out.push_back({kind, 0});
  out.push_back({OptimizerKind::cgad, 1});
  out.push_back({OptimizerKind::adam_decay, 3});
  return out;
}

// The smallest positive float Δ with fl(σ·Δ) ≥ 2^63 (found by walking from fl(2^63/σ); the product is monotone
// in Δ). Its float predecessor has fl(σ·pred(Δ)) < 2^63.
float threshold_for(float sigma) {
  float d = static_cast<float>(0x1p63 / static_cast<double>(sigma));
  while (sigma * d >= kLimit) d = std::nextafter(d, 0.0f);
  while (sigma * d < kLimit) d = std::nextafter(d, INFINITY);
  return d;
}

TEST(OverflowFastPath, RefusedWholeAtTheExactThresholdAppliedJustBelow) {
  int refused = 0, applied = 0;
  for (const Gate& gate : gates()) {
    for (StepConfig config : all_format_configs(gate.kind)) {
      for (const Layout& layout : layouts()) {
        config.min_q8_size = layout.min_q8_size;
        for (const std::size_t position : layout.positions) {
          for (const float sign : {1.0f, -1.0f}) {
            // Refused: fl(σΔ) = ±2^63 exactly (σ = 1: Δ = 2^63; σ < 1: the threshold Δ).
            Rig rig(config, layout.tensors, gate.tau);
            const std::size_t at = position % rig.size(rig.fragment);  // PA-CGAD's fragment is a slice
            const float edge = gate.tau == 0 ? kLimit : threshold_for(rig.sigma);
            ASSERT_GE(rig.sigma * edge, kLimit) << hex(rig.sigma) << " " << hex(edge);
            const std::string where = std::string(core::to_string(gate.kind)) + " tau " + std::to_string(gate.tau) +
                                      " sigma " + hex(rig.sigma) + " " + describe(rig.config) + " at " +
                                      std::to_string(at) + " delta " + hex(sign * edge);
            std::vector<float> grad = random_vector(rig.size(rig.fragment), 77);
            grad[at] = sign * edge;
            const auto before = rig.snapshot();
            const StepReport report = rig.step(grad, gate.tau);
            EXPECT_FALSE(report.applied) << where;
            EXPECT_EQ(report.reason, SkipReason::overflowing_gradient) << where;
            EXPECT_EQ(report.nonfinite_index, at) << where;
            ASSERT_EQ(rig.snapshot(), before) << where << ": a refused event changed a byte";
            ++refused;

            // Applied: Δ one float below, so |fl(σΔ)| ≤ pred(2^63); afterwards every θ, m and v is finite —
            // the whole q8 block of that element included.
            const float below = std::nextafter(edge, 0.0f);
            ASSERT_LT(rig.sigma * below, kLimit);
            grad[at] = sign * below;
            const StepReport ok = rig.step(grad, gate.tau);
            EXPECT_TRUE(ok.applied) << where << " (predecessor " << hex(sign * below) << ")";
            EXPECT_EQ(ok.reason, SkipReason::none) << where;
            EXPECT_EQ(rig.first_nonfinite(), "") << where << " (predecessor " << hex(sign * below) << ")";
            std::vector<float> v(rig.opt.parameters());
            rig.opt.read_buffer("v", v);
            const std::size_t global = rig.opt.layout().offset(rig.fragment) + at;
            EXPECT_GT(v[global], 0x1p100f) << where << ": v of the large element is (1−β2)·g² ≈ 2^118";
            ++applied;
          }
        }
      }
    }
  }
  std::printf("%d events refused at the threshold, %d applied just below it\n", refused, applied);
}

// The σ < 1 edges the test above walks to, printed (hexfloat) with where the exact product lies: the fast path
// refuses on fl(σΔ) ≥ 2^63, so a Δ whose exact product is a hair below 2^63 but rounds up to it is refused there
// while the reference, deciding on the exact product, would apply it (gated_adam.hpp: "within one rounding").
TEST(OverflowFastPath, ThresholdsForSigmaBelowOne) {
  for (const Gate& gate : gates()) {
    if (gate.tau == 0) continue;
    StepConfig config = all_format_configs(gate.kind)[0];
    Rig rig(config, {600}, gate.tau);
    const float edge = threshold_for(rig.sigma);
    const double exact = static_cast<double>(rig.sigma) * static_cast<double>(edge);  // exact: 24 × 24 bits
    std::printf("%s tau %lld: sigma %a, threshold delta %a, exact sigma*delta %a (%s 2^63)\n",
                std::string(core::to_string(gate.kind)).c_str(), static_cast<long long>(gate.tau),
                static_cast<double>(rig.sigma), static_cast<double>(edge), exact,
                exact >= 0x1p63 ? ">=" : "<, rounds up to");
    EXPECT_LT(rig.sigma, 1.0f);
    EXPECT_GE(exact, 0x1p63 * (1 - 0x1p-24)) << "within one rounding of 2^63";
    EXPECT_LT(static_cast<double>(rig.sigma) * std::nextafter(edge, 0.0f), 0x1p63);
  }
}

// Several overflowing elements (both signs) in different blocks and thread ranges: the first index is reported,
// for 1, 2, 3 and 7 threads.
TEST(OverflowFastPath, FirstOverflowingIndexIsReported) {
  for (const unsigned threads : {1u, 2u, 3u, 7u}) {
    for (const StepConfig& config : all_format_configs(OptimizerKind::cgad)) {
      Rig rig(config, {1000}, 0, threads);
      std::vector<float> grad = random_vector(1000, 5);
      grad[700] = kLimit;
      grad[450] = -std::numeric_limits<float>::max();
      grad[301] = -kLimit;
      grad[999] = 0x1p100f;
      const auto before = rig.snapshot();
      const StepReport report = rig.step(grad, 0);
      EXPECT_EQ(report.reason, SkipReason::overflowing_gradient) << describe(config) << " threads " << threads;
      EXPECT_EQ(report.nonfinite_index, 301u) << describe(config) << " threads " << threads;
      EXPECT_EQ(rig.snapshot(), before) << describe(config) << " threads " << threads;
    }
  }
}

// NaN (or ±Inf) wins: in the same event as an overflowing element, before or after it, the event is reported as
// nonfinite-gradient at the first NaN/Inf, with σ = 0 and τ_effective = τ as the reference reports it; and
// nothing changes either way.
TEST(OverflowFastPath, NanInTheSameEventIsReportedAsNonfinite) {
  for (const Gate& gate : gates()) {
    for (const StepConfig& config : all_format_configs(gate.kind)) {
      for (const float bad : {std::numeric_limits<float>::quiet_NaN(), INFINITY, -INFINITY}) {
        for (const bool last : {false, true}) {
          Rig rig(config, {600}, gate.tau);
          const std::size_t n = rig.size(rig.fragment);
          const std::size_t bad_at = last ? n - 1 : 5;  // before and after the overflowing elements
          std::vector<float> grad = random_vector(n, 9);
          grad[10] = kLimit;
          grad[11] = -kLimit;
          grad[bad_at] = bad;
          const auto before = rig.snapshot();
          const StepReport report = rig.step(grad, gate.tau);
          const std::string where = describe(rig.config) + " bad " + hex(bad) + " at " + std::to_string(bad_at);
          EXPECT_FALSE(report.applied) << where;
          EXPECT_EQ(report.reason, SkipReason::nonfinite_gradient) << where;
          EXPECT_EQ(report.nonfinite_index, bad_at) << where;
          EXPECT_EQ(rig.snapshot(), before) << where;
        }
      }
    }
  }
}

// With `skip`, an event at τ ≥ τ_cut is a zero-gate skip whatever its size (only the PA-CGAD synchronization
// record may change, as for any zero-gate skip); with `apply`, σ = 0 makes every σΔ = 0 and the event is the
// pure-decay step, applied.
TEST(OverflowFastPath, ZeroGateComesBeforeOverflow) {
  for (const OptimizerKind kind : {OptimizerKind::cgad, OptimizerKind::pa_cgad}) {
    for (StepConfig config : all_format_configs(kind)) {
      for (const auto policy : {core::ZeroGatePolicy::skip, core::ZeroGatePolicy::apply}) {
        config.on_zero_gate = policy;
        for (const std::int64_t tau : {32, 33, 1000}) {
          Rig rig(config, {600}, 0);
          std::vector<float> grad = random_vector(rig.size(rig.fragment), 13);
          grad[3] = kLimit;
          grad[4] = -std::numeric_limits<float>::max();
          const auto params_before = rig.params.bytes();
          const auto state_before = state_bytes(rig.opt, /*with_sync=*/false);
          const StepReport report = rig.step(grad, tau);
          const std::string where = describe(rig.config) + " tau " + std::to_string(tau);
          EXPECT_EQ(report.sigma, 0.0f) << where;
          if (policy == core::ZeroGatePolicy::skip) {
            EXPECT_FALSE(report.applied) << where;
            EXPECT_EQ(report.reason, SkipReason::zero_gate) << where;
            EXPECT_EQ(rig.params.bytes(), params_before) << where;
            EXPECT_EQ(state_bytes(rig.opt, false), state_before) << where;
          } else {
            EXPECT_TRUE(report.applied) << where;
            EXPECT_EQ(report.reason, SkipReason::none) << where;
            EXPECT_EQ(rig.first_nonfinite(), "") << where;
          }
        }
      }
    }
  }
}

// Nesterov and SDM: an event with |σΔ| ≥ 2^63 somewhere is refused whole (it gave −Inf on its
// first event at Δ = 2e38, in every format), one just below the threshold is applied and leaves b and θ finite.
TEST(OverflowFastPath, NesterovAndSdmFollowTheRuleOnTheirSigmaDelta) {
  for (const OptimizerKind kind : {OptimizerKind::nesterov, OptimizerKind::sdm}) {
    for (const StepConfig& config : all_format_configs(kind)) {
      for (const std::int64_t tau : {0, 3}) {
        Rig rig(config, {600}, tau);
        const float sigma = rig.sigma;  // 1, or the fast path's float 1/(1 + τ)
        std::vector<float> grad = random_vector(600, 17);
        grad[300] = -0x1p100f;
        grad[450] = 2e38f;
        const auto before = rig.snapshot();
        StepReport report = rig.step(grad, tau);
        EXPECT_FALSE(report.applied) << describe(config) << " tau " << tau;
        EXPECT_EQ(report.reason, SkipReason::overflowing_gradient) << describe(config);
        EXPECT_EQ(report.nonfinite_index, 300u) << describe(config);
        EXPECT_TRUE(rig.snapshot() == before) << describe(config);
        // The largest Δ whose float product with σ stays below 2^63 is applied; the next float up is refused.
        float edge = kBelowLimit / sigma;
        while ((sigma * edge) >= kLimit) edge = std::nextafter(edge, 0.0f);
        while ((sigma * std::nextafter(edge, INFINITY)) < kLimit) edge = std::nextafter(edge, INFINITY);
        grad = random_vector(600, 18);
        grad[0] = std::nextafter(edge, INFINITY);
        EXPECT_EQ(rig.step(grad, tau).reason, SkipReason::overflowing_gradient)
            << describe(config) << " " << hex(grad[0]);
        grad[0] = -edge;
        report = rig.step(grad, tau);
        EXPECT_TRUE(report.applied) << describe(config) << " tau " << tau << " " << hex(edge);
        EXPECT_EQ(rig.first_nonfinite(), "") << describe(config);
      }
    }
  }
}

// ---- just below the threshold, everything the update derives from g² stays finite -------------------------
//
// Found by these tests with a first threshold of 2^64, where g² ≤ pred(2^64)² = 0x1.fffffcp127 is one float below
// FLT_MAX but the quantities the update derives from it are not:
//  (A) bf16 state rounds v to 8 bits: any v ≥ 0x1.ffp127 rounds to +Inf. One event Δ = 0x1.fffffep63 at β2 = 0 (a
//      valid β2) stored v = +Inf and the next ordinary event (Δ = 1) made θ and v NaN (0·Inf); at β2 = 0.25 the
//      fifth such event stored v = +Inf for good and every later step of that element was 0 (θ frozen).
//  (B) cgad semantics divide v by b2 = 1 − β2^t: at defaults and Δ = 0x1.fffffep63 every event, at t = 44
//      v = 0x1.60cd22p+123, b2 = 0x1.60cd22p-5, v/b2 = +Inf and θ did not move (reference: by η).
// With the threshold at 2^63 (g² < 2^126) both hold with a factor 4 of headroom; these pin it at pred(2^63).
TEST(OverflowFastPath, JustBelowTheThresholdBf16SecondMomentStaysFinite) {
  for (const Rounding rounding : {Rounding::nearest, Rounding::stochastic}) {
    for (const float beta2 : {0.0f, 0.25f}) {
      StepConfig config;
      config.optimizer = OptimizerKind::adam;
      config.params = ParamFormat::fp32;
      config.state = StateFormat::bf16;
      config.rounding = rounding;
      config.adam.beta2 = beta2;
      CpuOptimizer opt(config, 1, 1);
      Params params(config, {1.0f});
      for (int k = 0; k < 8; ++k) {
        const float delta = k < 5 ? kBelowLimit : 1.0f;
        const StepReport report = params.step(opt, {delta}, 0);
        std::vector<float> v(1);
        opt.read_buffer("v", v);
        const std::string where = "beta2 " + hex(beta2) + " " + std::string(to_string(rounding)) + " event " +
                                  std::to_string(k + 1) + " delta " + hex(delta);
        ASSERT_TRUE(report.applied) << where;
        ASSERT_TRUE(std::isfinite(v[0])) << where << ": v = " << hex(v[0]);
        ASSERT_TRUE(std::isfinite(params.fp32[0])) << where << ": theta = " << hex(params.fp32[0]);
      }
    }
  }
}

TEST(OverflowFastPath, JustBelowTheThresholdTheAdamStepIsNotZeroed) {
  for (const StateFormat state : {StateFormat::fp32, StateFormat::bf16}) {
    StepConfig config;
    config.optimizer = OptimizerKind::adam;
    config.params = ParamFormat::fp32;
    config.state = state;
    CpuOptimizer opt(config, 1, 1);
    Params params(config, {1.0f});
    for (int t = 1; t <= 60; ++t) {
      const float before = params.fp32[0];
      ASSERT_TRUE(params.step(opt, {kBelowLimit}, 0).applied);
      // m̂/(√v̂ + ε) = 1 in exact arithmetic for a constant Δ: θ moves by η; half of it is far outside rounding.
      ASSERT_GT(before - params.fp32[0], 0.5f * config.adam.lr)
          << to_string(state) << " state, t = " << t << ": theta " << hex(before) << " -> " << hex(params.fp32[0]);
    }
  }
}

// ---- the reference -----------------------------------------------------------------------------------------

class OverflowReference : public ::testing::Test {
 protected:
  void SetUp() override { ref::set_working_precision_bits(256); }
};

template <class Real>
struct RefRig {
  core::OptimizerConfig<Real> config;
  std::unique_ptr<ref::OuterOptimizer<Real>> opt;
  std::vector<Real> params;

  RefRig(OptimizerKind kind, std::size_t n, std::int64_t tau,
         core::ZeroGatePolicy policy = core::ZeroGatePolicy::apply) {
    config.optimizer = kind;
    config.on_zero_gate = policy;
    if (kind == OptimizerKind::pa_cgad) config.fragments = 2;
    opt = ref::make_optimizer(config, n);
    for (const float x : random_vector(n, 21)) params.push_back(Real(x));
    for (std::uint32_t k = 0; k < 2; ++k) {
      for (std::size_t f = 0; f < config.fragments; ++f) {
        const auto grad = slice_grad(random_vector(opt->layout().size(f), 30 + k));
        EXPECT_TRUE(opt->apply(params, {grad, tau, f}).applied);
      }
      opt->advance_round();
    }
  }
  static std::vector<Real> slice_grad(const std::vector<float>& g) { return std::vector<Real>(g.begin(), g.end()); }
  std::size_t fragment() const { return config.fragments - 1; }
  std::size_t size() const { return opt->layout().size(fragment()); }
  core::StepReport<Real> step(const std::vector<float>& g, std::int64_t tau) {
    const auto grad = slice_grad(g);
    return opt->apply(params, {grad, tau, fragment()});
  }
  // Parameters, buffers and counters, compared with == (exact for MPFR and double).
  struct Snapshot {
    std::vector<Real> params;
    std::vector<std::vector<Real>> buffers;
    std::vector<std::vector<std::int64_t>> counters;
    bool operator==(const Snapshot&) const = default;
  };
  Snapshot snapshot() const {
    Snapshot s{params, {}, {}};
    for (const auto& b : opt->buffers()) s.buffers.emplace_back(b.values.begin(), b.values.end());
    for (const auto& c : opt->counters()) s.counters.push_back(c.values);
    return s;
  }
  bool all_finite() const {
    for (const Real& x : params) {
      if (!core::is_finite(x)) return false;
    }
    for (const auto& b : opt->buffers()) {
      for (const Real& x : b.values) {
        if (!core::is_finite(x)) return false;
      }
    }
    return true;
  }
};

// The events the fast path refuses at σ = 1 (Δ = ±2^63 exactly) the reference refuses too, whole, at the same
// index; ±pred(2^63) it applies. For σ < 1 the two decide on different products (exact vs float), so they are
// compared far from the edge: |σΔ| = 2^64 refused, 2^62 applied, by both, with the same report.
template <class Real>
void check_reference_agrees() {
  for (const Gate& gate : gates()) {
    for (const float sign : {1.0f, -1.0f}) {
      for (const std::size_t position : {0u, 7u, 299u}) {
        RefRig<Real> rig(gate.kind, 600, gate.tau);
        Rig fast(all_format_configs(gate.kind)[0], {600}, gate.tau);  // fp32 params, fp32 state, cgad
        ASSERT_EQ(rig.size(), fast.size(fast.fragment));
        const double sigma = static_cast<double>(core::sigma(Real(gate.tau), core::gate_of(rig.config)));
        const std::vector<std::pair<float, bool>> cases =
            gate.tau == 0 ? std::vector<std::pair<float, bool>>{{kLimit, false}, {kBelowLimit, true}}
                          : std::vector<std::pair<float, bool>>{{static_cast<float>(0x1p64 / sigma), false},
                                                                {static_cast<float>(0x1p62 / sigma), true}};
        for (const auto& [magnitude, applies] : cases) {
          std::vector<float> grad = random_vector(rig.size(), 77);
          grad[position] = sign * magnitude;
          const std::string where = std::string(core::to_string(gate.kind)) + " tau " + std::to_string(gate.tau) +
                                    " at " + std::to_string(position) + " delta " + hex(sign * magnitude) + " (" +
                                    std::to_string(ref::precision_bits<Real>()) + " bits)";
          const auto before = rig.snapshot();
          const auto report = rig.step(grad, gate.tau);
          const StepReport fast_report = fast.step(grad, gate.tau);
          EXPECT_EQ(report.applied, applies) << where;
          EXPECT_EQ(fast_report.applied, applies) << where;
          EXPECT_EQ(report.reason, fast_report.reason) << where;
          if (!applies) {
            EXPECT_EQ(report.reason, SkipReason::overflowing_gradient) << where;
            EXPECT_EQ(report.nonfinite_index, position) << where;
            EXPECT_EQ(fast_report.nonfinite_index, position) << where;
            EXPECT_TRUE(rig.snapshot() == before) << where << ": a refused event changed the reference's state";
          } else {
            EXPECT_TRUE(rig.all_finite()) << where;
          }
        }
      }
    }
  }
}

TEST_F(OverflowReference, RefusesTheSameEventsAsTheFastPath) {
  check_reference_agrees<mpfr_real>();
  check_reference_agrees<double>();
}

// The reference's order of reports: a NaN/Inf anywhere wins over an overflow (nonfinite-gradient, its index);
// with skip at τ ≥ τ_cut the event is a zero-gate skip; with apply it is applied (σ = 0); Nesterov and SDM refuse
// an event with |σΔ| ≥ 2^63 as the fast path does, NaN still winning.
template <class Real>
void check_reference_order() {
  for (const Gate& gate : gates()) {
    for (const bool last : {false, true}) {
      RefRig<Real> rig(gate.kind, 600, gate.tau);
      const std::size_t bad_at = last ? rig.size() - 1 : 5;
      std::vector<float> grad = random_vector(rig.size(), 9);
      grad[10] = kLimit;
      grad[bad_at] = std::numeric_limits<float>::quiet_NaN();
      const auto before = rig.snapshot();
      const auto report = rig.step(grad, gate.tau);
      EXPECT_EQ(report.reason, SkipReason::nonfinite_gradient) << core::to_string(gate.kind);
      EXPECT_EQ(report.nonfinite_index, bad_at);
      EXPECT_TRUE(rig.snapshot() == before);
    }
  }
  for (const OptimizerKind kind : {OptimizerKind::cgad, OptimizerKind::pa_cgad}) {
    for (const auto policy : {core::ZeroGatePolicy::skip, core::ZeroGatePolicy::apply}) {
      for (const std::int64_t tau : {32, 1000}) {
        RefRig<Real> rig(kind, 600, 0, policy);
        std::vector<float> grad = random_vector(rig.size(), 13);
        grad[3] = std::numeric_limits<float>::max();
        const auto report = rig.step(grad, tau);
        if (policy == core::ZeroGatePolicy::skip) {
          EXPECT_EQ(report.reason, SkipReason::zero_gate) << core::to_string(kind) << " tau " << tau;
        } else {
          EXPECT_TRUE(report.applied) << core::to_string(kind) << " tau " << tau;
          EXPECT_TRUE(rig.all_finite());
        }
      }
    }
  }
  for (const OptimizerKind kind : {OptimizerKind::nesterov, OptimizerKind::sdm}) {
    RefRig<Real> rig(kind, 600, 3);
    std::vector<float> grad = random_vector(600, 17);
    grad[0] = kind == OptimizerKind::sdm ? 0x1p65f : kLimit;  // SDM at τ = 3: σ = 1/4, so σΔ = 2^63
    grad[300] = -0x1p100f;
    const auto before = rig.snapshot();
    auto report = rig.step(grad, 3);
    EXPECT_EQ(report.reason, SkipReason::overflowing_gradient) << core::to_string(kind);
    EXPECT_EQ(report.nonfinite_index, 0u);
    EXPECT_TRUE(rig.snapshot() == before);
    grad[20] = std::numeric_limits<float>::infinity();
    EXPECT_EQ(rig.step(grad, 3).reason, SkipReason::nonfinite_gradient) << core::to_string(kind);
    grad = random_vector(600, 19);
    grad[0] = kind == OptimizerKind::sdm ? std::nextafter(0x1p65f, 0.0f) : kBelowLimit;
    report = rig.step(grad, 3);
    EXPECT_TRUE(report.applied) << core::to_string(kind);
    EXPECT_TRUE(rig.all_finite());
  }
}

TEST_F(OverflowReference, NanWinsZeroGateSkipsNesterovFollowsTheRule) {
  check_reference_order<mpfr_real>();
  check_reference_order<double>();
}

}  // namespace
}  // namespace cgad::fastpath
