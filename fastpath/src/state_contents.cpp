#include "cgad/fastpath/detail/state_contents.hpp"

#include "cgad/fastpath/detail/derived_constants.hpp"

#include "cgad/core/errors.hpp"

#include <cmath>
#include <string>

namespace cgad::fastpath {
namespace {

// A moment within its range (check_state_contents, below) is not enough: m and v are sums of the same gradients, so a
// large |m| needs a large v (|m| = 2^63 beside the smallest subnormal v loaded, and a zero-gradient step then sent θ to
// −Inf while reporting "applied"). From m = v = 0 under constant β1, β2, after t steps
//   m = (1 − β1)·Σ_j β1^j·g_j,   v = (1 − β2)·Σ_j β2^j·g_j²     (g_j: the gradient j steps back),
// and Cauchy–Schwarz on Σ_j (β1^j/β2^(j/2))·(β2^(j/2)·|g_j|) gives, for ρ = β1²/β2 < 1,
//   |m| <= (1 − β1)·sqrt(Σ_j ρ^j)·sqrt(v/(1 − β2)) <= K·sqrt(v),   K = (1 − β1)/sqrt((1 − β2)·(1 − ρ)).
// The same sums bound m and v for any coefficients the step multiplies g and g² by, so the step's own floats
// 1 − β1 and 1 − β2 stand in K for 1 − β1 and 1 − β2 (derived_constants.hpp: cgad semantics rounds them from the
// decimals, not from the float β). The step rounds: each of its float operations (element_update.hpp: three for m,
// four for v; the factor kept for a 1 − β rounded once only loosens the bound) has relative error <= u = 2^-24,
// and storing bf16 state adds one rounding of up to 2^-7 (stochastic rounding: a whole bf16 ulp). So β1 and 1 − β1
// are taken larger by those factors, β2 and 1 − β2 smaller. In the subnormal range each operation also errs by up
// to half (nearest) or one (stochastic) spacing of its format absolutely: <= 2^-148 per step for fp32 state,
// 2^-131 for bf16, which the geometric weights sum to at most that over (1 − β). Hence, with
// b1 = β1·(1 + u)²·(1 + s), b2 = β2·(1 − u)²·(1 − s) (s: the store's rounding),
//   |m| <= K'·sqrt(v + δ/(1 − b2)) + δ/(1 − b1),
//   K' = (1 − β1)(1 + u)³(1 + s) / sqrt((1 − β2)(1 − u)⁴(1 − s)(1 − b1²/b2)).
// Where b1² >= b2 (β1² >= β2) the sum has no bound independent of t and only the ranges above are checked; q8
// codes are not checked jointly either, since m and v are quantized in blocks of their own, so a v that rounds to a
// small code under a large absmax is a state the q8 step does produce. A state made under other betas (a schedule
// that changed them) is checked against the current ones.
class JointBound {
 public:
  JointBound(const StepConfig& config, bool bf16_store) {
    const double u = 0x1p-24, store = bf16_store ? 0x1p-7 : 0.0;
    const double beta1 = config.adam.beta1, beta2 = config.adam.beta2;
    const BetaConstants step = beta_constants(config);
    const double keep1 = step.one_minus_beta1, keep2 = step.one_minus_beta2;
    b1_ = beta1 * (1 + u) * (1 + u) * (1 + store);
    const double b2 = beta2 * (1 - u) * (1 - u) * (1 - store);
    active_ = b1_ * b1_ < b2 && b2 < 1.0;
    if (!active_) return;
    delta_ = bf16_store ? 0x1p-131 : 0x1p-148;
    v_floor_ = delta_ / (1 - b2);
    k_ = keep1 * std::pow(1 + u, 3) * (1 + store) /
         std::sqrt(keep2 * std::pow(1 - u, 4) * (1 - store) * (1 - b1_ * b1_ / b2));
  }
  // Whether (m, v) is a pair some sequence of steps reaches (m and v already checked finite, v >= 0).
  bool reachable(double m, double v) const {
    return !active_ || std::fabs(m) <= k_ * std::sqrt(v + v_floor_) + delta_ / (1 - b1_);
  }

 private:
  bool active_ = false;
  double b1_ = 0, k_ = 0, delta_ = 0, v_floor_ = 0;
};

// A checksum proves only that the bytes are the ones written; a hand-made file with a recomputed CRC could still
// hold a state no step can reach and that would turn the next step's parameters into NaN or Inf while it reports
// "applied". So every moment must lie in the range steps can reach. Every applied pseudo-gradient g = σΔ has
// |g| < 2^63 (the overflow rule, core/overflow_rule.hpp), so:
//   m = β1·m + (1 − β1)·g, a convex combination from m = 0: |m| ≤ 2^63 (rounding can reach 2^63, not pass it);
//   v = β2·v + (1 − β2)·g²: 0 ≤ v ≤ 2^126;
//   b = μ·b + g (Nesterov; SDM's g/(1 + τ) is smaller): |b| ≤ 2^63/(1 − μ) in exact arithmetic, and with each step's
//   two roundings (a factor ≤ (1 + 2^-24)^2 < 1 + 2^-22) below 2^63·(1 + 2^-20)/(1 − μ·(1 + 2^-20)), the
//   bound used (μ(1 + 2^-20) < 1 for every μ ≤ 1 − 2^-19; above that b is only required to be finite).
// A q8 block's absmax is the largest magnitude in its block, so it obeys the same bound (and is >= 0); q8 codes
// are all valid (any byte is an index into the 256-entry map). The fuzzer (fuzz/fuzz_state_bytes.cpp) found a
// bf16 m of ~1.7e38 with a recomputed CRC that loaded and stepped θ to −Inf before these bounds. Then m and v
// together must obey JointBound.
}  // namespace

void check_state_contents(const TensorState& s, const StepConfig& config, bool adam_family,
                          const std::function<void(const std::string&)>& fail) {
  const double slack = 1.0 + 0x1p-20;
  const double mu = static_cast<double>(config.nesterov.momentum);
  const double b_bound = mu * slack < 1.0 ? 0x1p63 * slack / (1.0 - mu * slack) : HUGE_VAL;
  const auto name = [&](int k) { return adam_family ? (k == 0 ? "m" : "v") : "b"; };
  const auto in_range = [&](double x, int k) {
    if (!std::isfinite(x)) return false;
    if (!adam_family) return std::fabs(x) <= b_bound;
    return k == 0 ? std::fabs(x) <= 0x1p63 : (x >= 0.0 && x <= 0x1p126);
  };
  const char* range = adam_family ? "|m| <= 2^63, 0 <= v <= 2^126" : "|b| <= 2^63/(1 - momentum)";
  const auto check = [&](float x, int k, std::size_t i, const char* where) {
    if (!in_range(x, k)) {
      fail(std::string("holds an impossible ") + where + " " + name(k) + "[" + std::to_string(i) +
           "] = " + core::to_decimal(x) + " (a step can reach only " + range + ")");
    }
  };
  for (int k = 0; k < s.moments; ++k) {
    for (std::size_t i = 0; i < s.fp32[k].size(); ++i)
      check(s.fp32[k][i], k, i, s.fp32_fallback ? "fp32-fallback" : "fp32");
    for (std::size_t i = 0; i < s.bf16_values[k].size(); ++i) check(to_float(s.bf16_values[k][i]), k, i, "bf16");
    for (std::size_t i = 0; i < s.absmax[k].size(); ++i) {
      const float a = s.absmax[k][i];
      if (!(a >= 0.0f) || !in_range(a, k)) {
        fail(std::string("holds an impossible q8 absmax ") + std::to_string(i) + " = " + core::to_decimal(a) + " of " +
             name(k) + " (it must be >= 0, and a step can reach only " + range + ")");
      }
    }
  }
  if (!adam_family) return;
  const auto check_pair = [&](double m, double v, const JointBound& bound, std::size_t i, const char* where) {
    if (!bound.reachable(m, v)) {
      fail(std::string("holds an impossible ") + where + " pair m[" + std::to_string(i) +
           "] = " + core::to_decimal(static_cast<float>(m)) + ", v[" + std::to_string(i) +
           "] = " + core::to_decimal(static_cast<float>(v)) + " (no sequence of steps makes |m| that large beside " +
           "that v; fastpath/src/state_contents.cpp derives the bound)");
    }
  };
  const JointBound fp32_bound(config, false), bf16_bound(config, true);
  for (std::size_t i = 0; i < s.fp32[0].size(); ++i) {
    check_pair(s.fp32[0][i], s.fp32[1][i], fp32_bound, i, s.fp32_fallback ? "fp32-fallback" : "fp32");
  }
  for (std::size_t i = 0; i < s.bf16_values[0].size(); ++i) {
    check_pair(to_float(s.bf16_values[0][i]), to_float(s.bf16_values[1][i]), bf16_bound, i, "bf16");
  }
}

}  // namespace cgad::fastpath
