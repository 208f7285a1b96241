#include "cgad/theory/rate.hpp"

#include "cgad/core/errors.hpp"
#include "cgad/core/gate.hpp"
#include "cgad/theory/constants.hpp"

#include <algorithm>
#include <set>

namespace cgad::theory {

using reference::mpfr_real;

namespace {

Interval positive_infinity() {
  mpfr_real x;
  mpfr_set_inf(x.backend().data(), 1);
  return Interval::hull(x, x);
}

// σ(τ) for an integer τ ≥ 0: exactly 0 at and past the cutoff.
Interval sigma_at(long tau, const IntervalGate& gate) {
  if (tau >= gate.tau_cut) return Interval(0);
  return sigma_enclosure(Interval(tau), gate);
}

struct Accumulator {
  Interval sigma{0}, sigma_tau{0}, sigma_squared{0}, tau{0};
  void add(const Interval& p, long t, const IntervalGate& gate) {
    const Interval s = sigma_at(t, gate);
    const Interval ps = p * s;
    sigma = sigma + ps;
    sigma_tau = sigma_tau + ps * Interval(t);
    sigma_squared = sigma_squared + ps * s;
    tau = tau + p * Interval(t);
  }
  DelayLawMoments moments(std::string name) const {
    return {std::move(name), sigma, sigma_tau, sigma_squared, tau, false};
  }
};

bool is_zero(const Interval& x) {
  return x.lower() == 0 && x.upper() == 0;
}

}  // namespace

DelayLawMoments constant_delay_law(long tau, const IntervalGate& gate) {
  if (tau < 0) throw core::InputError("delay must be >= 0");
  Accumulator a;
  a.add(Interval(1), tau, gate);
  return a.moments("constant tau = " + std::to_string(tau));
}

DelayLawMoments uniform_delay_law(long tau_max, const IntervalGate& gate) {
  if (tau_max < 0) throw core::InputError("tau_max must be >= 0");
  Accumulator a;
  const Interval p = Interval(1) / Interval(tau_max + 1);
  for (long t = 0; t <= tau_max; ++t) a.add(p, t, gate);
  return a.moments("uniform on {0.." + std::to_string(tau_max) + "}");
}

DelayLawMoments heavy_tail_delay_law(std::optional<long> cap, const IntervalGate& gate) {
  if (cap && *cap < 1) throw core::InputError("cap must be >= 1");
  const Interval stale = Interval::from_decimal("0.3", "share");
  const Interval eight(8);
  Accumulator a;
  a.add(Interval(1) - stale, 0, gate);
  // P(⌊8/U⌋ ≥ j) = min(1, 8/j): the law puts 8/(j(j+1)) on each j ≥ 8.
  const long last = cap ? *cap : gate.tau_cut;  // uncapped: σ = 0 from τ_cut on, so the gated sums stop there
  for (long j = 8; j < last; ++j) a.add(stale * eight / (Interval(j) * Interval(j + 1)), j, gate);
  std::string name = "heavy tail: 70% tau = 0, 30% floor(8/U)";
  if (cap) {
    const Interval tail = *cap <= 8 ? Interval(1) : eight / Interval(*cap);  // P(⌊8/U⌋ ≥ cap)
    a.add(stale * tail, *cap, gate);
    return a.moments(name + ", capped at " + std::to_string(*cap));
  }
  DelayLawMoments m = a.moments(name + ", uncapped");
  m.mean_tau = positive_infinity();
  m.mean_tau_infinite = true;
  return m;
}

OptimizedEtaComparison compare_optimized_eta(const DelayLawMoments& law) {
  OptimizedEtaComparison c{
      law,  law.mean_sigma_tau + law.mean_sigma_squared / Interval(2), Interval(0), Interval(0), Interval(0), false,
      false};
  c.gated_vacuous = is_zero(law.mean_sigma);
  c.ungated_vacuous = law.mean_tau_infinite;
  c.ungated_staleness = c.ungated_vacuous ? positive_infinity() : law.mean_tau + Interval(1) / Interval(2);
  if (c.gated_vacuous) {
    c.bound_ratio = positive_infinity();
    c.eta_ratio = positive_infinity();
  } else if (c.ungated_vacuous) {
    c.bound_ratio = Interval(0);
    c.eta_ratio = positive_infinity();
  } else {
    c.bound_ratio = sqrt(c.gated_staleness / c.ungated_staleness) / law.mean_sigma;
    c.eta_ratio = sqrt(c.ungated_staleness / c.gated_staleness);
  }
  return c;
}

std::vector<OptimizedEtaComparison> optimized_eta_table(const std::string& alpha_text, long tau_cut) {
  const mpfr_real alpha_mpfr = core::parse_real<mpfr_real>(alpha_text, "alpha");
  core::validate(core::GateParams<mpfr_real>{core::GateKind::cosine, alpha_mpfr, mpfr_real(tau_cut)});
  const IntervalGate gate{Interval::from_decimal(alpha_text, "alpha"), tau_cut};
  std::set<long> constants{1, 2, 4, 8, 16, 32, tau_cut};
  if (tau_cut > 1) constants.insert(tau_cut - 1);
  std::vector<OptimizedEtaComparison> out;
  for (long tau : constants) out.push_back(compare_optimized_eta(constant_delay_law(tau, gate)));
  for (long k : {16L, 64L, 256L}) out.push_back(compare_optimized_eta(uniform_delay_law(k, gate)));
  for (long cap : {64L, 1024L}) out.push_back(compare_optimized_eta(heavy_tail_delay_law(cap, gate)));
  out.push_back(compare_optimized_eta(heavy_tail_delay_law(std::nullopt, gate)));
  return out;
}

std::vector<std::string> default_alpha_scan() {
  return {"0.01", "0.02", "0.05", "0.1", "0.2", "0.4", "0.6", "0.7", "0.8", "1", "2", "4", "8", "16"};
}

std::vector<AlphaScanRow> alpha_scan(long tau_cut, const std::vector<std::string>& alphas) {
  std::vector<AlphaScanRow> out;
  for (const std::string& text : alphas) {
    const mpfr_real alpha_mpfr = core::parse_real<mpfr_real>(text, "alpha");
    core::validate(core::GateParams<mpfr_real>{core::GateKind::cosine, alpha_mpfr, mpfr_real(tau_cut)});
    const Interval alpha = Interval::from_decimal(text, "alpha");
    const SupConstant b1 = certified_sup(1, alpha, tau_cut);
    AlphaScanRow row{
        text,        b1.value,    b1.integer_value, b1.integer_argmax, certified_stale_weight(alpha, tau_cut),
        Interval(0), Interval(0), Interval(0),      Interval(0)};
    row.alpha_b1 = alpha * row.b1;
    row.alpha_w = alpha * row.w;
    row.exp_alpha_w = exp(alpha) * row.w;
    row.exp_alpha_b1_integer = exp(alpha) * row.b1_integer;
    out.push_back(std::move(row));
  }
  return out;
}

}  // namespace cgad::theory
