#include "cgad/theory/constants.hpp"

#include "cgad/core/errors.hpp"
#include "cgad/core/gate.hpp"
#include "cgad/theory/interval_gate.hpp"

#include <limits>
#include <stdexcept>
#include <utility>

namespace cgad::theory {

using reference::mpfr_real;

const char* to_string(Verdict verdict) {
  switch (verdict) {
    case Verdict::proved:
      return "proved";
    case Verdict::proved_vacuous:
      return "proved (vacuous: comparison is +inf because alpha = 0)";
    case Verdict::refuted:
      return "refuted";
    case Verdict::undetermined:
      return "undetermined at this precision";
  }
  return "?";
}

namespace {

mpfr_real infinity() {
  mpfr_real x;
  mpfr_set_inf(x.backend().data(), 1);
  return x;
}

bool is_zero(const Interval& x) {
  return x.lower() == 0 && x.upper() == 0;
}

Verdict compare(const Interval& constant, const Interval& comparison) {
  if (comparison.is_point_infinite()) return Verdict::proved_vacuous;
  if (constant.upper() <= comparison.lower()) return Verdict::proved;
  if (constant.lower() > comparison.upper()) return Verdict::refuted;
  return Verdict::undetermined;
}

core::GateParams<mpfr_real> mpfr_gate(const Interval& alpha, long tau_cut) {
  return {core::GateKind::cosine, alpha.midpoint(), mpfr_real(tau_cut)};
}

// A bracket (a, b) of τ*_k that is narrow in relative terms, so that bisection needs ~p steps even when α is
// huge and τ* tiny (from (0, τ_cut) it would need log2(τ_cut/τ*) extra steps: ~1000 for α = 1e300).
//   Upper: for τ ≥ k/α, g_k(τ) ≤ k/τ − α < 0, so τ* < k/α.
//   Lower: for τ ≤ τ_cut/2, tan(πτ/(2τ_cut)) ≤ 1, so g_k(τ) ≥ k/τ − α − π/τ_cut > 0 when τ < k/(α + π/τ_cut).
// Neither derivation is trusted: each candidate end is kept only if the sign of g_k there is certified,
// otherwise the end falls back to 0 or τ_cut, so the bisection's invariant never depends on this reasoning.
std::pair<mpfr_real, mpfr_real> initial_bracket(unsigned k, const IntervalGate& gate) {
  const long cut = gate.tau_cut;
  const Interval kk(static_cast<long>(k));
  mpfr_real a(0), b(cut);
  if (gate.alpha.lower() > 0) {
    const mpfr_real upper = (kk / gate.alpha).upper();
    if (upper < b && log_weight_derivative(Interval::point(upper), k, gate).strictly_negative()) b = upper;
  }
  mpfr_real lower = (kk / (gate.alpha + Interval::pi() / Interval(cut))).lower();
  if (lower > mpfr_real(cut) / 2) lower = mpfr_real(cut) / 2;
  if (lower > 0 && lower < b && log_weight_derivative(Interval::point(lower), k, gate).strictly_positive()) a = lower;
  return {a, b};
}

// The sup of h(τ) = τ^k σ(τ) over τ ≥ 0, without the cutoff bound (which is itself such a sup).
//
// Why the enclosure is rigorous. On (0, τ_cut), h > 0 and h' = h·g with g = log_weight_derivative, which is
// strictly decreasing from +∞ (τ → 0+) to −∞ (τ → τ_cut−) for k ≥ 1, α ≥ 0 (k/τ and −α−(π/τ_cut)tan(·)
// both decrease). So g has exactly one zero τ*, h increases before it and decreases after it, and since
// h(0) = 0 = h(τ) for τ ≥ τ_cut, sup_{τ≥0} h = h(τ*). Bisection starts from initial_bracket and keeps the
// invariant "g(a) > 0 (or a = 0) and g(b) < 0 (or b = τ_cut)", each sign certified by an MPFI enclosure of g(m) that
// excludes 0; by the intermediate value theorem τ* ∈ (a, b). It stops when the midpoint is no longer representable or
// the sign of g(m) cannot be certified, which leaves (a, b) a few working-precision ulps wide. Then
//   * h(τ*) ∈ h([a, b]) ⊆ weighted_sigma_enclosure([a, b])  (inclusion property of interval arithmetic), and
//   * h(τ*) ≥ h(a), h(τ*) ≥ h(b)  (τ* is the maximizer), so max(lo h(a), lo h(b)) is a valid lower end.
SupConstant sup_without_cutoff(unsigned k, const Interval& alpha, long tau_cut) {
  if (k == 0 || tau_cut < 1 || alpha.lower() < 0) throw std::logic_error("certified_sup: bad arguments");
  const IntervalGate gate{alpha, tau_cut};
  const auto [a0, b0] = initial_bracket(k, gate);
  mpfr_real a = a0;
  mpfr_real b = b0;
  // Each productive step halves (a, b), and b/a is bounded (initial_bracket), so about p + log2(b0/a0)
  // steps reach an ulp of τ*. The cap only guards against a logic error.
  const unsigned max_steps = 4 * reference::working_precision_bits() + 128;
  for (unsigned step = 0; step < max_steps; ++step) {
    const mpfr_real m = (a + b) / 2;
    if (m <= a || m >= b) break;
    const Interval g = log_weight_derivative(Interval::point(m), k, gate);
    if (g.strictly_positive()) {
      a = m;
    } else if (g.strictly_negative()) {
      b = m;
    } else {
      break;
    }
  }
  SupConstant result;
  result.k = k;
  result.argmax = Interval::hull(a, b);
  const Interval over = weighted_sigma_enclosure(result.argmax, k, gate);
  const Interval at_a = weighted_sigma_enclosure(Interval::point(a), k, gate);
  const Interval at_b = weighted_sigma_enclosure(Interval::point(b), k, gate);
  const mpfr_real lower = at_a.lower() > at_b.lower() ? at_a.lower() : at_b.lower();
  result.value = Interval::hull(lower, over.upper());

  result.argmax_mpfr = result.argmax.midpoint();
  const mpfr_real tau_star = result.argmax_mpfr;
  result.value_mpfr = mpfr_real(pow(tau_star, k) * core::sigma(tau_star, mpfr_gate(alpha, tau_cut)));

  // Integer maximizer: h is unimodal with its peak at τ* ∈ [a, b], so the best integer is floor(τ*) or
  // ceil(τ*), both in {floor(a), …, ceil(b)}.
  using boost::multiprecision::ceil;
  using boost::multiprecision::floor;
  const long first = floor(a).convert_to<long>();
  const long last = std::min(ceil(b).convert_to<long>(), tau_cut);
  std::vector<std::pair<long, Interval>> candidates;
  for (long n = std::max(0L, first); n <= last; ++n) {
    candidates.emplace_back(n, weighted_sigma_enclosure(Interval(n), k, gate));
  }
  std::size_t best = 0;
  mpfr_real max_upper = candidates[0].second.upper();
  for (std::size_t i = 1; i < candidates.size(); ++i) {
    if (candidates[i].second.lower() > candidates[best].second.lower()) best = i;
    if (candidates[i].second.upper() > max_upper) max_upper = candidates[i].second.upper();
  }
  result.integer_argmax = candidates[best].first;
  result.integer_value = Interval::hull(candidates[best].second.lower(), max_upper);
  result.integer_argmax_certified = true;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (i != best && !(candidates[i].second.upper() < candidates[best].second.lower())) {
      result.integer_argmax_certified = false;
    }
  }
  return result;
}

}  // namespace

SupConstant certified_sup(unsigned k, const Interval& alpha, long tau_cut) {
  SupConstant result = sup_without_cutoff(k, alpha, tau_cut);
  // h_{α,C}(τ) ≤ h_{0,C}(τ) = C^k·h_{0,1}(τ/C): the cutoff alone bounds B_k by C^k·κ_k, κ_k = B_k(0, 1).
  const Interval kappa = sup_without_cutoff(k, Interval(0), 1).value;
  result.cutoff_bound = pow(Interval(tau_cut), k) * kappa;
  return result;
}

Interval certified_stale_weight(const Interval& alpha, long tau_cut, const std::function<void(long)>& on_term) {
  const IntervalGate gate{alpha, tau_cut};
  Interval sum(0);
  for (long tau = 1; tau <= tau_cut; ++tau) {
    sum = sum + sigma_enclosure(Interval(tau), gate);
    if (on_term) on_term(tau);
  }
  return sum;
}

BoundConstants compute_bound_constants(const std::string& alpha_text, long tau_cut,
                                       const std::function<void(long, long)>& on_progress) {
  // Validation goes through the reference gate, so the bound refuses exactly what the optimizers refuse.
  const mpfr_real alpha_mpfr = core::parse_real<mpfr_real>(alpha_text, "alpha");
  core::validate(core::GateParams<mpfr_real>{core::GateKind::cosine, alpha_mpfr, mpfr_real(tau_cut)});
  if (tau_cut < 1 || tau_cut > kMaxBoundTauCut) {
    throw core::InputError("tau-cut must be an integer in [1, " + std::to_string(kMaxBoundTauCut) + "], got " +
                           std::to_string(tau_cut));
  }
  const Interval alpha = Interval::from_decimal(alpha_text, "alpha");

  BoundConstants out{.alpha_text = alpha_text,
                     .tau_cut = tau_cut,
                     .precision_bits = reference::working_precision_bits(),
                     .b1 = certified_sup(1, alpha, tau_cut),
                     .b2 = certified_sup(2, alpha, tau_cut),
                     .w = certified_stale_weight(alpha, tau_cut,
                                                 [&](long done) {
                                                   if (on_progress && done % 1024 == 0) on_progress(done, 2 * tau_cut);
                                                 }),
                     .w_mpfr = mpfr_real(0),
                     .w_cutoff_bound = Interval((tau_cut - 1)) / Interval(2),
                     .inequalities = {},
                     .cutoff_past_peak = false,
                     .b1_lower_at_inverse_alpha = Interval(0)};
  const core::GateParams<mpfr_real> gate{core::GateKind::cosine, alpha_mpfr, mpfr_real(tau_cut)};
  for (long tau = 1; tau <= tau_cut; ++tau) {
    out.w_mpfr += core::sigma(mpfr_real(tau), gate);
    if (on_progress && tau % 1024 == 0) on_progress(tau_cut + tau, 2 * tau_cut);
  }

  const bool alpha_zero = is_zero(alpha);
  const Interval inf = Interval::hull(infinity(), infinity());
  const Interval inv_e = exp(Interval(-1));
  const Interval b1_bound = alpha_zero ? inf : inv_e / alpha;
  const Interval b2_bound = alpha_zero ? inf : Interval(4) * square(inv_e / alpha);
  const Interval w_bound = alpha_zero ? inf : Interval(1) / expm1(alpha);
  auto add = [&](std::string statement, const Interval& constant, const Interval& comparison) {
    out.inequalities.push_back({std::move(statement), constant, comparison, compare(constant, comparison)});
  };
  add("B1 <= 1/(e*alpha)", out.b1.value, b1_bound);
  add("B2 <= 4/(e*alpha)^2", out.b2.value, b2_bound);
  add("W <= 1/(e^alpha - 1)", out.w, w_bound);
  add("B1_int <= 1/(e*alpha)", out.b1.integer_value, b1_bound);
  add("B2_int <= 4/(e*alpha)^2", out.b2.integer_value, b2_bound);
  // For α = 0 the cutoff bounds are the constants themselves (equalities, which enclosures cannot
  // separate), so they are only claimed for α > 0, where γ·e^{−ατ} < γ makes them strict.
  if (!alpha_zero) {
    add("B1 <= tau_cut*kappa1 (cutoff bound)", out.b1.value, out.b1.cutoff_bound);
    add("B2 <= tau_cut^2*kappa2 (cutoff bound)", out.b2.value, out.b2.cutoff_bound);
    add("W <= (tau_cut-1)/2 (cutoff bound)", out.w, out.w_cutoff_bound);
  }

  // α·τ_cut ≥ 1, certified from α's lower end. Then 1/α ∈ (0, τ_cut], and B1 ≥ (1/α)·σ(1/α).
  out.cutoff_past_peak = !alpha_zero && alpha.lower() * tau_cut >= 1;
  if (out.cutoff_past_peak) {
    Interval inverse = Interval(1) / alpha;
    // The exact 1/α is ≤ τ_cut; intersecting drops only outward rounding beyond τ_cut.
    mpfi_intersect(inverse.get(), inverse.get(), Interval::hull(mpfr_real(0), mpfr_real(tau_cut)).get());
    out.b1_lower_at_inverse_alpha = weighted_sigma_enclosure(inverse, 1, IntervalGate{alpha, tau_cut});
    add("(1/alpha)*sigma(1/alpha) = cos^2(pi/(2*alpha*tau_cut))/(e*alpha) <= B1", out.b1_lower_at_inverse_alpha,
        out.b1.value);
  }
  return out;
}

}  // namespace cgad::theory
