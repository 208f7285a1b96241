// At a constant σ the gate is inert (docs/design.md §3): g = σΔ gives m → σm, v → σ²v and
// m̂/(√v̂ + ε) → m̂/(√v̂ + ε/σ), so CGAD (and Adam-Decay) at a constant τ is Adam with ε/σ(τ).
//
// (a) The reference, in MPFR (257 bits) and in double: CGAD / Adam-Decay at a constant τ against Adam with
//     eps' = eps/σ, where σ is the reference's own sigma at the working precision. Equal up to rounding, with
//     a tolerance derived from the working precision (below, at `theta_tolerance`), and shown not to be vacuous:
//     Adam with the same eps is far outside it once σ is well below 1.
// (b) The fast path: with σ a power of two every fast-path rounding commutes with the scaling as long as
//     nothing under- or overflows, so the identity holds bit for bit in every format: Adam-Decay with
//     α = float(ln 2), for which the fast path's σ(τ) is exactly 2^-τ on τ ∈ [0, 12], against Adam with eps·2^τ;
//     and CGAD with α = 0, τ_cut = 2k, τ = k (γ = sin²(π/4) = ½ exactly after the float rounding) against Adam
//     with 2·eps. Parameters bit for bit; the state bit for bit after undoing the exact scaling (m·2^e, v·2^2e
//     for σ = 2^-e; q8 codes byte for byte, absmax scaled); counters identical.
#include "support/fastpath_test_support.hpp"
#include "support/reference_streams.hpp"

#include "cgad/fastpath/fastpath.hpp"
#include "cgad/reference/optimizers.hpp"
#include "cgad/fastpath/detail/cpu_optimizer_internals.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <numbers>
#include <sstream>
#include <string>
#include <vector>

using cgad::fastpath::detail::host_state_of;

namespace cgad::proptests {
namespace {

namespace ref = cgad::reference;
namespace core = cgad::core;
namespace fp = cgad::fastpath;
using core::OptimizerKind;
using ref::mpfr_real;

// ---- (a) the reference -------------------------------------------------------------------------------------

class SigmaInvarianceReference : public ::testing::Test {
 protected:
  void SetUp() override { ref::set_working_precision_bits(256); }
};

// A stream of 16 to 24 events over 1 to 8 parameters (values from reference_streams.hpp: magnitudes
// 2^-30 … 2^10, both signs, signed zeros; printed in hexfloat on failure). The staleness is set by the test.
rc::Gen<Stream> gen_twenty_events() {
  return rc::gen::mapcat(
      rc::gen::pair(rc::gen::inRange(1, 9), rc::gen::inRange(16, 25)), [](const std::pair<int, int>& shape) {
        const auto [n, steps] = shape;
        const auto gen_step = rc::gen::build<StreamStep>(
            rc::gen::set(&StreamStep::grad, rc::gen::container<std::vector<double>>(n, gen_value())));
        return rc::gen::build<Stream>(
            rc::gen::set(&Stream::params, rc::gen::container<std::vector<double>>(n, gen_value())),
            rc::gen::set(&Stream::steps, rc::gen::container<std::vector<StreamStep>>(steps, gen_step)));
      });
}

template <class Real>
struct Replayed {
  std::vector<Real> params, m, v;
  double max_abs_theta = 0;  // over every step, every element
  Real sigma = Real(1);      // the σ the optimizer reported (the same at every step)
};

template <class Real>
Replayed<Real> replay_at(const core::OptimizerConfig<Real>& config, const Stream& stream, std::int64_t tau) {
  Replayed<Real> out;
  out.params = to_real<Real>(stream.params);
  auto optimizer = ref::make_optimizer(config, out.params.size());
  for (const Real& x : out.params) out.max_abs_theta = std::max(out.max_abs_theta, std::fabs(static_cast<double>(x)));
  for (const auto& step : stream.steps) {
    const std::vector<Real> grad = to_real<Real>(step.grad);
    const auto report = optimizer->apply(out.params, {grad, tau, 0});
    RC_ASSERT(report.applied);
    out.sigma = report.sigma;
    for (const Real& x : out.params) out.max_abs_theta = std::max(out.max_abs_theta, std::fabs(static_cast<double>(x)));
    optimizer->advance_round();
  }
  const auto buffers = optimizer->buffers();
  out.m.assign(buffers[0].values.begin(), buffers[0].values.end());
  out.v.assign(buffers[1].values.begin(), buffers[1].values.end());
  return out;
}

// The tolerance on |θ_cgad − θ_adam| (per element, after T steps), derived for precision p, u = 2^-p (every
// operation of the reference rounds once to nearest, relative error ≤ u; expression templates are off).
//
// Both runs share the same rounded constants β1, β2, 1−β1, 1−β2, b1 = 1−β1^t, b2 = 1−β2^t and σ̃ (the computed
// σ), and in exact arithmetic with those constants CGAD(σ̃, ε) is Adam(ε/σ̃) exactly. So only each run's own
// roundings count (and Adam's eps' = fl(ε/σ̃), one more relative u in a positive term of the denominator).
// First-order, per run, at step k (M_k = Σ_j β1^{k−j}(1−β1)|g_j|, the moment of |g|):
//  - m: 4 roundings per step (g = σ̃Δ, (1−β1)·g, β1·m, the sum): |e_m,k| ≤ β1|e_m,k−1| + 3u·M_k ⇒ ≤ 3u·k·M_k;
//  - v: a sum of positive terms, 5 roundings per step: relative error ≤ (2k + 3)u; then v/b2 (+u), sqrt
//    (halves, +u) and + ε (+u, and u for eps'): the denominator D = √v̂ + ε has relative error ≤ (k + 4)u;
//  - A = (m/b1)/D: |δA| ≤ u·(M_k/b1)/D·(3k + 1) + |A|·((k + 4)u + u) ≤ (4k + 6)·u·R_k, where R_k bounds both |A|
//    and (M_k/b1)/D: by Cauchy–Schwarz M_k ≤ √S_k·√v_k with S_k = (1−β1)²/(1−β2)·Σ_{i<k}(β1²/β2)^i, and D ≥ √v̂,
//    so R_k = √S_k·√b2/b1 (exact arithmetic, computed here in double);
//  - θ = θ − η(A + λθ): λθ (u·λΘ), the sum (u(R + λΘ)), η·(…) (u·η(R + λΘ)), the difference (u·|θ|); the
//    error already in θ is multiplied by 1 − ηλ ≤ 1, so it never grows.
// Per run: Σ_k u·[Θ + η((4k + 8)R_k + 3λΘ)], Θ = the largest |θ| seen. Two runs, and a factor 2 for every
// second-order term ((1 + u)^n − 1 ≤ 1.01·n·u for n·u < 0.01, far below the factor) and for R_k in double:
// tol = 4u·Σ_{k=1}^{T} [Θ + η((4k + 8)R_k + 3λΘ)].
double theta_tolerance(unsigned p, std::size_t steps, double theta_max, double lr, double weight_decay, double beta1,
                       double beta2) {
  const double u = std::ldexp(1.0, -static_cast<int>(p));
  double sum = 0, geometric = 0;
  for (std::size_t k = 1; k <= steps; ++k) {
    geometric += std::pow(beta1 * beta1 / beta2, static_cast<double>(k - 1));
    const double s = (1 - beta1) * (1 - beta1) / (1 - beta2) * geometric;
    const double b1 = 1 - std::pow(beta1, static_cast<double>(k));
    const double b2 = 1 - std::pow(beta2, static_cast<double>(k));
    const double r = std::sqrt(s) * std::sqrt(b2) / b1;
    sum += theta_max + lr * ((4.0 * static_cast<double>(k) + 8) * r + 3 * weight_decay * theta_max);
  }
  return 4 * u * sum;
}

template <class Real>
double abs_diff(const Real& a, const Real& b) {
  return std::fabs(static_cast<double>(Real(a - b)));
}

template <class Real>
struct Outcome {
  double worst_theta_ratio = 0;  // max |Δθ| / tol over elements
  double same_eps_gap = 0;       // max |θ_gated − θ_adam(same ε)|
  double tolerance = 0;
};

// `kind` is CGAD or Adam-Decay at constant `tau`; compares against Adam with eps/σ̃ and against Adam with eps.
template <class Real>
Outcome<Real> check_against_scaled_adam(OptimizerKind kind, const Stream& stream, std::int64_t tau, bool decay) {
  core::OptimizerConfig<Real> gated;
  gated.optimizer = kind;
  if (decay) gated.adam.weight_decay = core::parse_real<Real>("0.01", "weight_decay");
  const Real sigma = core::sigma(Real(tau), core::gate_of(gated));
  RC_ASSERT(sigma > Real(0));
  core::OptimizerConfig<Real> adam = gated;
  adam.optimizer = OptimizerKind::adam;
  adam.adam.eps = gated.adam.eps / sigma;
  core::OptimizerConfig<Real> same_eps = gated;
  same_eps.optimizer = OptimizerKind::adam;

  const auto g = replay_at(gated, stream, tau);
  const auto a = replay_at(adam, stream, tau);
  const auto s = replay_at(same_eps, stream, tau);
  RC_ASSERT(g.sigma == sigma);  // the optimizer gated by the very σ̃ the test divided eps by

  const std::size_t steps = stream.steps.size();
  const unsigned p = ref::precision_bits<Real>();
  const double u = std::ldexp(1.0, -static_cast<int>(p));
  Outcome<Real> out;
  out.tolerance = theta_tolerance(p, steps, std::max(g.max_abs_theta, a.max_abs_theta),
                                  static_cast<double>(gated.adam.lr), static_cast<double>(gated.adam.weight_decay),
                                  static_cast<double>(gated.adam.beta1), static_cast<double>(gated.adam.beta2));
  double max_delta = 0;
  for (const auto& step : stream.steps) {
    for (const double x : step.grad) max_delta = std::max(max_delta, std::fabs(x));
  }
  const double sigma_d = static_cast<double>(sigma);
  // m: each run's error ≤ 3u·T·M_T (above), M_T ≤ max|Δ| (its weights sum to 1 − β1^T < 1), σ̃-scaled in CGAD;
  // one more rounding for σ̃·m_adam; factor 2 margin: tol_m = 2(6T + 1)·u·σ̃·max|Δ|.
  const double m_tolerance = 2 * (6.0 * static_cast<double>(steps) + 1) * u * sigma_d * max_delta;
  const Real sigma_squared = sigma * sigma;
  for (std::size_t i = 0; i < g.params.size(); ++i) {
    const double d = abs_diff(g.params[i], a.params[i]);
    RC_LOG() << std::hexfloat << "theta[" << i << "]: gated " << static_cast<double>(g.params[i]) << " adam(eps/sigma) "
             << static_cast<double>(a.params[i]) << " |diff| " << d << " tol " << out.tolerance << "\n";
    RC_ASSERT(d <= out.tolerance);
    out.worst_theta_ratio = std::max(out.worst_theta_ratio, d / out.tolerance);
    out.same_eps_gap = std::max(out.same_eps_gap, abs_diff(g.params[i], s.params[i]));
    // m → σm.
    const Real scaled_m = sigma * a.m[i];
    RC_ASSERT(abs_diff(g.m[i], scaled_m) <= m_tolerance);
    // v → σ²v: each run's v has relative error ≤ (2T + 3)u, two roundings for σ̃²·v_adam; margin 2:
    // tol_v = 2(4T + 8)·u·σ̃²·v_adam (per element; 0 where v is exactly 0 in both).
    const Real scaled_v = sigma_squared * a.v[i];
    const double v_tolerance = 2 * (4.0 * static_cast<double>(steps) + 8) * u * static_cast<double>(scaled_v);
    RC_ASSERT(abs_diff(g.v[i], scaled_v) <= v_tolerance);
  }
  return out;
}

bool any_nonzero(const Stream& stream) {
  for (const auto& step : stream.steps) {
    for (const double x : step.grad) {
      if (x != 0) return true;
    }
  }
  return false;
}

RC_GTEST_FIXTURE_PROP(SigmaInvarianceReference, ConstantTauIsAdamWithEpsOverSigma, ()) {
  const Stream stream = *gen_twenty_events();
  const bool decay = *rc::gen::arbitrary<bool>();
  const OptimizerKind kind = *rc::gen::element(OptimizerKind::cgad, OptimizerKind::adam_decay);
  // CGAD: τ below the default τ_cut = 32 (σ(31) ≈ 4e-6 > 0); Adam-Decay (α = 0.2): σ down to e^-12.
  const std::int64_t tau = *rc::gen::inRange<std::int64_t>(0, kind == OptimizerKind::cgad ? 32 : 61);
  const auto mp = check_against_scaled_adam<mpfr_real>(kind, stream, tau, decay);
  const auto dbl = check_against_scaled_adam<double>(kind, stream, tau, decay);
  // Not vacuous: for σ ≤ 1/2, Adam at the SAME eps moves every parameter whose m̂ was ever nonzero by a
  // different amount; its gap is at least η·ε(1/σ − 1)/(|Δ|max ≈ 2^10) ≈ 1e-14 on the first nonzero step, far above
  // the MPFR tolerance (≈ 2^-240).
  core::OptimizerConfig<mpfr_real> config;
  config.optimizer = kind;
  const double sigma = static_cast<double>(core::sigma(mpfr_real(tau), core::gate_of(config)));
  if (sigma <= 0.5 && any_nonzero(stream)) {
    RC_LOG() << std::hexfloat << "same-eps gap " << mp.same_eps_gap << " mpfr tol " << mp.tolerance << "\n";
    RC_ASSERT(mp.same_eps_gap > 0x1p40 * mp.tolerance);
  }
  RC_TAG(sigma <= 0.5 ? "sigma <= 1/2" : "sigma > 1/2");
  // How much of the tolerance the double run used (MPFR's differences are almost always exactly 0: the
  // parameters' own rounding absorbs them), in powers of two.
  RC_TAG("double: |diff|/tol " + (dbl.worst_theta_ratio == 0
                                      ? std::string("= 0")
                                      : "~ 2^" + std::to_string(std::ilogb(dbl.worst_theta_ratio))));
}

// Not vacuous in double either: gradients of the size of ε (where ε vs ε/σ changes every step's size by
// O(1)) at σ = σ_cgad(16) ≈ 0.020 and σ_decay(20) = e^-4: Adam with the same eps ends orders of magnitude
// farther than the tolerance, in MPFR and in double, while Adam with eps/σ stays inside it.
template <class Real>
void check_same_eps_far_outside(OptimizerKind kind, std::int64_t tau) {
  Stream stream;
  stream.params = {1.0, -0.5, 0.25};
  for (int k = 0; k < 20; ++k) {
    stream.steps.push_back(
        {{std::ldexp(1.0 + k / 32.0, -27), -std::ldexp(3.0, -29), std::ldexp(1.0, -26 - k % 3)}, tau});
  }
  core::OptimizerConfig<Real> gated;
  gated.optimizer = kind;
  const Real sigma = core::sigma(Real(tau), core::gate_of(gated));
  core::OptimizerConfig<Real> adam = gated, same = gated;
  adam.optimizer = same.optimizer = OptimizerKind::adam;
  adam.adam.eps = gated.adam.eps / sigma;
  std::vector<Real> pg = to_real<Real>(stream.params), pa = pg, ps = pg;
  auto og = ref::make_optimizer(gated, 3), oa = ref::make_optimizer(adam, 3), os = ref::make_optimizer(same, 3);
  double theta_max = 1;
  for (const auto& step : stream.steps) {
    const std::vector<Real> grad = to_real<Real>(step.grad);
    og->apply(pg, {grad, tau, 0});
    oa->apply(pa, {grad, tau, 0});
    os->apply(ps, {grad, tau, 0});
    for (std::size_t i = 0; i < 3; ++i) {
      theta_max = std::max({theta_max, std::fabs(static_cast<double>(pg[i])), std::fabs(static_cast<double>(pa[i]))});
    }
  }
  const double tol =
      theta_tolerance(ref::precision_bits<Real>(), stream.steps.size(), theta_max, static_cast<double>(gated.adam.lr),
                      0.0, static_cast<double>(gated.adam.beta1), static_cast<double>(gated.adam.beta2));
  double same_gap = 0, scaled_gap = 0;
  for (std::size_t i = 0; i < 3; ++i) {
    scaled_gap = std::max(scaled_gap, abs_diff(pg[i], pa[i]));
    same_gap = std::max(same_gap, abs_diff(pg[i], ps[i]));
  }
  std::printf("%s tau %lld at %u bits: sigma %a, |gated - adam(eps/sigma)| %a, |gated - adam(eps)| %a, tol %a\n",
              std::string(core::to_string(kind)).c_str(), static_cast<long long>(tau), ref::precision_bits<Real>(),
              static_cast<double>(sigma), scaled_gap, same_gap, tol);
  EXPECT_LE(scaled_gap, tol);
  EXPECT_GT(same_gap, 1e6 * tol) << std::hexfloat << "same-eps gap " << same_gap << " tol " << tol;
}

TEST_F(SigmaInvarianceReference, AdamAtTheSameEpsIsFarOutsideTheTolerance) {
  check_same_eps_far_outside<mpfr_real>(OptimizerKind::cgad, 16);
  check_same_eps_far_outside<double>(OptimizerKind::cgad, 16);
  check_same_eps_far_outside<mpfr_real>(OptimizerKind::adam_decay, 20);
  check_same_eps_far_outside<double>(OptimizerKind::adam_decay, 20);
}

// ---- (b) the fast path, bit for bit ------------------------------------------------------------------------
//
// Why bit for bit: with σ = 2^-e, every quantity of the gated run is the Adam run's times an exact power of
// two — g = 2^-e·Δ, m·2^-e, v·2^-2e, √v̂·2^-e, (√v̂ + ε)·2^-e against √v̂' + ε·2^e, the q8 absmax·2^-e (·2^-2e) with
// the same normalized values and so the same codes, bnb's c2·ε·2^e — and IEEE rounding (float, bf16 by RNE
// or by adding random low bits and truncating, q8's nearest and stochastic codes of an unchanged quotient)
// commutes with a power-of-two scaling as long as no value leaves the normal range. The gradients of
// fastpath::testing::random_vector have magnitudes [1, 2)·2^-12 … 2^2 (and exact zeros), so with e ≤ 12 the
// smallest nonzero (1−β2)·g² is about 2^-58·… and the smallest decoded q8 code·absmax about 2^-90: far from
// 2^-126 and from FLT_MAX, so the scaling stays exact. The parameters and the weight decay are not scaled.

struct FastRun {
  fp::testing::Params params;
  fp::CpuOptimizer opt;
  FastRun(const fp::StepConfig& c, const std::vector<std::size_t>& tensors, const std::vector<float>& initial)
      : params(c, initial), opt(c, tensors, 1) {}
};

// `exponent` e: the gated run's m is the plain run's ·2^-e, its v ·2^-2e.
bool scaled_float_equal(float gated, float plain, int exponent) {
  return std::bit_cast<std::uint32_t>(gated) == std::bit_cast<std::uint32_t>(std::ldexp(plain, -exponent));
}

// Compares every byte: parameters identical, q8 codes identical, every float of the state (fp32 moments,
// fp32 fallback, q8 absmax, bf16 moments widened exactly) equal to the plain run's scaled by 2^-e (m) or
// 2^-2e (v), counters identical. Returns a description of the first difference, or "".
std::string first_difference(const FastRun& gated, const FastRun& plain, int exponent) {
  std::ostringstream why;
  why << std::hexfloat;
  if (gated.params.bytes() != plain.params.bytes()) {
    for (std::size_t i = 0; i < gated.params.fp32.size(); ++i) {
      if (std::bit_cast<std::uint32_t>(gated.params.fp32[i]) != std::bit_cast<std::uint32_t>(plain.params.fp32[i])) {
        why << "theta[" << i << "] " << gated.params.fp32[i] << " vs " << plain.params.fp32[i];
        return why.str();
      }
    }
    for (std::size_t i = 0; i < gated.params.bf16_values.size(); ++i) {
      if (gated.params.bf16_values[i].bits != plain.params.bf16_values[i].bits) {
        why << "theta[" << i << "] (bf16) " << fp::to_float(gated.params.bf16_values[i]) << " vs "
            << fp::to_float(plain.params.bf16_values[i]);
        return why.str();
      }
    }
  }
  const fp::HostState& a = host_state_of(gated.opt);
  const fp::HostState& b = host_state_of(plain.opt);
  for (int k = 0; k < 2; ++k) {
    const int e = (k + 1) * exponent;
    const char* name = k == 0 ? "m" : "v";
    if (a.codes[k] != b.codes[k]) {
      for (std::size_t i = 0; i < a.codes[k].size(); ++i) {
        if (a.codes[k][i] != b.codes[k][i]) {
          why << name << " code[" << i << "] " << int(a.codes[k][i]) << " vs " << int(b.codes[k][i]);
          return why.str();
        }
      }
    }
    if (a.fp32[k].size() != b.fp32[k].size() || a.bf16_values[k].size() != b.bf16_values[k].size() ||
        a.absmax[k].size() != b.absmax[k].size()) {
      return "state shapes differ";
    }
    for (std::size_t i = 0; i < a.fp32[k].size(); ++i) {
      if (!scaled_float_equal(a.fp32[k][i], b.fp32[k][i], e)) {
        why << name << " fp32[" << i << "] " << a.fp32[k][i] << " vs " << b.fp32[k][i] << " * 2^-" << e;
        return why.str();
      }
    }
    for (std::size_t i = 0; i < a.bf16_values[k].size(); ++i) {
      if (!scaled_float_equal(fp::to_float(a.bf16_values[k][i]), fp::to_float(b.bf16_values[k][i]), e)) {
        why << name << " bf16[" << i << "] " << fp::to_float(a.bf16_values[k][i]) << " vs "
            << fp::to_float(b.bf16_values[k][i]) << " * 2^-" << e;
        return why.str();
      }
    }
    for (std::size_t i = 0; i < a.absmax[k].size(); ++i) {
      if (!scaled_float_equal(a.absmax[k][i], b.absmax[k][i], e)) {
        why << name << " absmax[" << i << "] " << a.absmax[k][i] << " vs " << b.absmax[k][i] << " * 2^-" << e;
        return why.str();
      }
    }
  }
  const auto& ca = gated.opt.raw_counters();
  const auto& cb = plain.opt.raw_counters();
  if (ca.t != cb.t || ca.steps != cb.steps) return "counters differ";
  return "";
}

struct GatedCase {
  OptimizerKind kind;
  float alpha, tau_cut;
  std::int64_t tau;
  int exponent;  // σ = 2^-exponent
};

// Runs `events` events through the gated optimizer and Adam with eps·2^e, for one configuration and layout.
// Returns the first difference ("" when none); also asserts every report (applied, σ exact).
std::string run_case(fp::StepConfig config, const std::vector<std::size_t>& tensors, const GatedCase& gc, int events,
                     std::uint32_t seed, bool same_eps = false) {
  config.min_q8_size = 300;  // the layouts' tensors on both sides of it (fastpath_test_support.hpp)
  fp::StepConfig gated = config;
  gated.optimizer = gc.kind;
  gated.alpha = gc.alpha;
  gated.tau_cut = gc.tau_cut;
  fp::StepConfig plain = config;
  plain.optimizer = OptimizerKind::adam;
  if (!same_eps) plain.adam.eps = std::ldexp(config.adam.eps, gc.exponent);
  std::size_t n = 0;
  for (const std::size_t s : tensors) n += s;
  const std::vector<float> initial = fp::testing::random_vector(n, seed);
  FastRun g(gated, tensors, initial), a(plain, tensors, initial);
  const float sigma = std::ldexp(1.0f, -gc.exponent);
  for (int k = 0; k < events; ++k) {
    const std::vector<float> grad = fp::testing::random_vector(n, seed * 7919u + static_cast<std::uint32_t>(k) + 1);
    const fp::StepReport rg = g.params.step(g.opt, grad, gc.tau);
    const fp::StepReport ra = a.params.step(a.opt, grad, gc.tau);
    if (!rg.applied || !ra.applied) return "an event was not applied";
    if (std::bit_cast<std::uint32_t>(rg.sigma) != std::bit_cast<std::uint32_t>(sigma)) {
      std::ostringstream why;
      why << std::hexfloat << "fast-path sigma " << rg.sigma << ", expected exactly " << sigma;
      return why.str();
    }
    if (ra.sigma != 1.0f) return "Adam's sigma is not 1";
  }
  return first_difference(g, a, gc.exponent);
}

std::vector<GatedCase> power_of_two_cases() {
  std::vector<GatedCase> cases;
  const float ln2 = std::numbers::ln2_v<float>;
  for (std::int64_t tau = 0; tau <= 12; ++tau)
    cases.push_back({OptimizerKind::adam_decay, ln2, 32.0f, tau, static_cast<int>(tau)});
  for (const std::int64_t k : {1, 2, 3, 5, 8, 16}) {
    cases.push_back({OptimizerKind::cgad, 0.0f, static_cast<float>(2 * k), k, 1});
  }
  return cases;
}

// Every case above, every format configuration (cgad's 12 and bnb's 4, fastpath::testing::all_format_configs),
// every tensor layout of fastpath_test_support.hpp (with min_q8_size = 300), 24 events each.
TEST(SigmaInvarianceFastPath, PowerOfTwoSigmaIsAdamWithScaledEpsBitForBit) {
  int compared = 0;
  for (const GatedCase& gc : power_of_two_cases()) {
    for (const fp::StepConfig& config : fp::testing::all_format_configs(gc.kind)) {
      for (const auto& tensors : fp::testing::tensor_layouts()) {
        const std::string difference = run_case(config, tensors, gc, 24, 17u + static_cast<std::uint32_t>(gc.tau));
        ASSERT_EQ(difference, "") << core::to_string(gc.kind) << " tau " << gc.tau << " tau_cut " << gc.tau_cut << " "
                                  << fp::testing::describe(config);
        ++compared;
      }
    }
  }
  std::printf("%d runs compared bit for bit\n", compared);
}

// The same identity with random seeds, event counts (1 to 40) and staleness (CGAD's k up to 99), every
// configuration, one of the layouts per case.
RC_GTEST_PROP(SigmaInvarianceFastPath, PowerOfTwoSigmaBitForBitOnRandomStreams, ()) {
  const bool cgad = *rc::gen::arbitrary<bool>();
  GatedCase gc;
  if (cgad) {
    const std::int64_t k = *rc::gen::inRange<std::int64_t>(1, 100);
    gc = {OptimizerKind::cgad, 0.0f, static_cast<float>(2 * k), k, 1};
  } else {
    const std::int64_t tau = *rc::gen::inRange<std::int64_t>(0, 13);
    gc = {OptimizerKind::adam_decay, std::numbers::ln2_v<float>, 32.0f, tau, static_cast<int>(tau)};
  }
  const int events = *rc::gen::inRange(1, 41);
  const auto seed = *rc::gen::inRange<std::uint32_t>(0, 1u << 30);
  const auto layouts = fp::testing::tensor_layouts();
  const std::size_t layout = *rc::gen::inRange<std::size_t>(0, layouts.size());
  for (const fp::StepConfig& config : fp::testing::all_format_configs(gc.kind)) {
    const std::string difference = run_case(config, layouts[layout], gc, events, seed);
    RC_LOG() << fp::testing::describe(config) << " tau " << gc.tau << " tau_cut " << gc.tau_cut << ": "
             << (difference.empty() ? "identical" : difference) << "\n";
    RC_ASSERT(difference == std::string());
  }
}

// Not vacuous: Adam with the UNSCALED eps differs from the gated run in some parameter bit for every σ < 1
// here, in fp32 parameters (cgad's fp32 state, and bnb's q8 state).
TEST(SigmaInvarianceFastPath, UnscaledEpsIsCaught) {
  const auto configs = fp::testing::all_format_configs(OptimizerKind::adam_decay);
  const fp::StepConfig cgad_fp32 = configs[0];  // fp32 params, fp32 state, nearest, cgad
  const fp::StepConfig bnb_q8 = configs[13];    // fp32 params, q8 state, bnb
  ASSERT_EQ(cgad_fp32.params, fp::ParamFormat::fp32);
  ASSERT_EQ(cgad_fp32.state, fp::StateFormat::fp32);
  ASSERT_EQ(bnb_q8.state, fp::StateFormat::q8);
  ASSERT_EQ(bnb_q8.q8_semantics, fp::Q8Semantics::bnb);
  for (const GatedCase& gc : power_of_two_cases()) {
    if (gc.exponent == 0) continue;
    for (const fp::StepConfig& config : {cgad_fp32, bnb_q8}) {
      fp::StepConfig c = config;
      c.optimizer = gc.kind;
      const std::string difference = run_case(c, {3 * 256 + 17}, gc, 24, 5, /*same_eps=*/true);
      EXPECT_NE(difference, "") << core::to_string(gc.kind) << " tau " << gc.tau << " " << fp::testing::describe(c);
    }
  }
}

}  // namespace
}  // namespace cgad::proptests
