// `cgad bound`: the constants of the convergence bound (DESIGN.md §6) for the cosine gate, in MPFR and as
// certified MPFI enclosures, with a proof verdict for every inequality the theory claims.
#include "cli_support.hpp"
#include "commands.hpp"
#include "progress.hpp"

#include "cgad/reference/errors.hpp"
#include "cgad/theory/constants.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <iostream>
#include <memory>

namespace cgad::cli {
namespace {

struct BoundOptions {
  std::string alpha = "0.2";
  long tau_cut = 32;
  bool json = false;
  unsigned precision = 0;
};

using theory::Interval;

nlohmann::json enclosure_json(const Interval& x, unsigned digits) {
  return {{"lo", x.lower_string(digits)},
          {"hi", x.upper_string(digits)},
          {"relative_width", theory::decimal_up(x.relative_width(), 3)}};
}

nlohmann::json sup_json(const theory::SupConstant& c, unsigned digits) {
  return {{"value", reference::to_decimal(c.value_mpfr, digits)},
          {"enclosure", enclosure_json(c.value, digits)},
          {"argmax", reference::to_decimal(c.argmax_mpfr, digits)},
          {"argmax_enclosure", enclosure_json(c.argmax, digits)},
          {"integer_value_enclosure", enclosure_json(c.integer_value, digits)},
          {"integer_argmax", c.integer_argmax},
          {"integer_argmax_certified", c.integer_argmax_certified},
          {"cutoff_bound_enclosure", enclosure_json(c.cutoff_bound, digits)}};
}

void print_sup(const char* title, const theory::SupConstant& c, unsigned digits) {
  std::cout << title << "\n"
            << "  value (MPFR, tau* = mid)   " << reference::to_decimal(c.value_mpfr, digits) << "\n"
            << "  certified enclosure        " << c.value.to_string(digits) << "\n"
            << "  relative width             " << theory::decimal_up(c.value.relative_width(), 3) << "\n"
            << "  maximizer tau*             " << reference::to_decimal(c.argmax_mpfr, digits) << "\n"
            << "  tau* enclosure             " << c.argmax.to_string(digits) << "\n"
            << "  integer max (tau in 0..C)  " << c.integer_value.to_string(digits) << " at tau = " << c.integer_argmax
            << (c.integer_argmax_certified ? " (certified unique)" : " (not certified unique)") << "\n"
            << "  cutoff bound C^k*kappa_k   " << c.cutoff_bound.to_string(digits) << "\n";
}

// The certified sup bisects down to the working precision: about p interval evaluations of tan at p bits,
// so the cost grows like p^2.5 (0.3 s at 1024 bits, 5 s at 4096 here). Beyond 4096 bits it would run for
// hours; 4096 bits already print over 1200 digits.
constexpr unsigned kMaxBoundPrecisionBits = 4096;

// The least precision that still prints 30 meaningful significant digits with the 16 guard bits below.
constexpr unsigned kMinBoundPrecisionBits = 116;

void run_bound(const BoundOptions& options) {
  if (options.precision < kMinBoundPrecisionBits || options.precision > kMaxBoundPrecisionBits) {
    throw reference::InputError("bound: precision must be in [" + std::to_string(kMinBoundPrecisionBits) + ", " +
                                std::to_string(kMaxBoundPrecisionBits) + "] bits (30 digits; bisection cost), got " +
                                std::to_string(options.precision));
  }
  const unsigned bits = apply_precision(options.precision);
  const theory::BoundConstants c = [&] {
    ProgressBar bar("bound");
    return theory::compute_bound_constants(options.alpha, options.tau_cut,
                                           [&](long done, long total) { bar.update(done, total); });
  }();
  // Every printed MPFR value carries a few ulps of error (a handful of correctly rounded operations, and τ*
  // off by a few ulps moves τ^kσ only to second order); dropping 16 bits keeps every printed digit
  // meaningful (72 digits at 256 bits, 30 at the 116-bit minimum).
  const unsigned digits = static_cast<unsigned>(std::floor((bits - 16) * 0.30102999566398120));
  nlohmann::json inequalities = nlohmann::json::array();
  for (const auto& q : c.inequalities) {
    inequalities.push_back({{"statement", q.statement},
                            {"lhs_enclosure", enclosure_json(q.constant, digits)},
                            {"rhs_enclosure", enclosure_json(q.comparison, digits)},
                            {"verdict", theory::to_string(q.verdict)}});
  }
  if (options.json) {
    std::cout << nlohmann::json{{"alpha", c.alpha_text},
                                {"tau_cut", c.tau_cut},
                                {"precision_bits", c.precision_bits},
                                {"B1", sup_json(c.b1, digits)},
                                {"B2", sup_json(c.b2, digits)},
                                {"W",
                                 {{"value", reference::to_decimal(c.w_mpfr, digits)},
                                  {"enclosure", enclosure_json(c.w, digits)},
                                  {"cutoff_bound_enclosure", enclosure_json(c.w_cutoff_bound, digits)}}},
                                {"alpha_tau_cut_at_least_1", c.cutoff_past_peak},
                                {"inequalities", inequalities}}
                     .dump(2)
              << "\n";
    return;
  }
  std::cout << "Convergence-bound constants for the CGAD gate  alpha = " << c.alpha_text << "  tau_cut = " << c.tau_cut
            << "  (" << bits << "-bit MPFR/MPFI, " << digits << " significant digits; enclosures rounded outward)\n\n";
  print_sup("B1 = sup_{tau>=0} tau*sigma(tau)", c.b1, digits);
  print_sup("B2 = sup_{tau>=0} tau^2*sigma(tau)", c.b2, digits);
  std::cout << "W = sum_{tau=1}^{tau_cut} sigma(tau)\n"
            << "  value (MPFR)               " << reference::to_decimal(c.w_mpfr, digits) << "\n"
            << "  certified enclosure        " << c.w.to_string(digits) << "\n"
            << "  relative width             " << theory::decimal_up(c.w.relative_width(), 3) << "\n"
            << "  cutoff bound (tau_cut-1)/2 " << c.w_cutoff_bound.to_string(digits) << "\n\n";
  std::cout << "alpha*tau_cut >= 1: " << (c.cutoff_past_peak ? "yes" : "no")
            << (c.cutoff_past_peak ? "  (the cutoff lies past the peak 1/alpha of tau*e^{-alpha*tau}: 1/(e*alpha) is "
                                     "the binding bound, tight up to cos^2(pi/(2*alpha*tau_cut)))"
                                   : "  (the cutoff bites before 1/alpha: the cutoff bounds are the smaller ones)")
            << "\n\nCertified inequalities (proved = hi(constant) <= lo(comparison)):\n";
  for (const auto& q : c.inequalities) {
    std::cout << "  " << q.statement << "\n      lhs        " << q.constant.to_string(digits) << "\n      rhs        "
              << q.comparison.to_string(digits) << "\n      verdict    "
              << theory::to_string(q.verdict) << "\n";
  }
}

}  // namespace

void add_bound_command(CLI::App& app) {
  auto options = std::make_shared<BoundOptions>();
  CLI::App* command = app.add_subcommand(
      "bound", "Certified constants B1, B2, W of the convergence bound and their inequalities (MPFI)");
  command->add_option("--alpha", options->alpha, "decay rate alpha >= 0 (decimal; alpha = 0 makes every comparison +inf)")
      ->capture_default_str();
  command->add_option("--tau-cut", options->tau_cut, "cosine cutoff tau_cut (integer in [1, 1000000])")
      ->capture_default_str();
  command->add_flag("--json", options->json, "print JSON instead of a report");
  add_precision_option(*command, options->precision);
  command->callback([options] { run_bound(*options); });
}

}  // namespace cgad::cli
