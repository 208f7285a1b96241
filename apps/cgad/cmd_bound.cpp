// `cgad bound`: the constants of the convergence bound (docs/design.md §6) for the cosine gate, in MPFR and as
// certified MPFI enclosures, with a proof verdict for every inequality the theory claims; the optimized-η
// comparison of the bound against the ungated update's (theory/rate.hpp); with --alpha-scan, B1, B1_int and W
// over α (what "O(1/e^α)" can mean).
#include "cli_support.hpp"
#include "commands.hpp"
#include "progress.hpp"

#include "cgad/core/errors.hpp"
#include "cgad/theory/constants.hpp"
#include "cgad/theory/rate.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <memory>

namespace cgad::cli {
namespace {

struct BoundOptions {
  std::string alpha = "0.2";
  long tau_cut = 32;
  bool json = false;
  bool alpha_scan = false;
  unsigned precision = 0;
};

using theory::Interval;

nlohmann::json enclosure_json(const Interval& x, unsigned digits) {
  return {{"lo", x.lower_string(digits)},
          {"hi", x.upper_string(digits)},
          {"relative_width", theory::decimal_up(x.relative_width(), 3)}};
}

nlohmann::json sup_json(const theory::SupConstant& c, unsigned digits) {
  return {{"value", core::to_decimal(c.value_mpfr, digits)},
          {"enclosure", enclosure_json(c.value, digits)},
          {"argmax", core::to_decimal(c.argmax_mpfr, digits)},
          {"argmax_enclosure", enclosure_json(c.argmax, digits)},
          {"integer_value_enclosure", enclosure_json(c.integer_value, digits)},
          {"integer_argmax", c.integer_argmax},
          {"integer_argmax_certified", c.integer_argmax_certified},
          {"cutoff_bound_enclosure", enclosure_json(c.cutoff_bound, digits)}};
}

// A short rendering of a certified value for the tables: 6 significant digits of its midpoint ("inf" for +∞),
// in double where it is a normal double, else in MPFR, so that a value below double's range (E[sigma] at a large
// alpha) is not printed as 0. The enclosures
// themselves are in --json; the tables say how wide the widest one is.
std::string short_value(const reference::mpfr_real& x) {
  const double rounded = x.convert_to<double>();
  if (x != 0 && !std::isnormal(rounded)) return core::to_decimal(x, 6);
  std::ostringstream out;
  out << std::setprecision(6) << rounded;
  return out.str();
}
std::string short_value(const Interval& x) {
  return x.is_point_infinite() ? "inf" : short_value(x.midpoint());
}

// One right-aligned table cell of `width` characters, wider when the text needs it, always after at least one
// space: a value longer than its column (7.27153e+173) never runs into the one before it.
std::string cell(const std::string& text, std::size_t width) {
  const std::size_t pad = text.size() + 1 >= width ? 1 : width - text.size();
  return std::string(pad, ' ') + text;
}

nlohmann::json eta_json(const theory::OptimizedEtaComparison& c, unsigned digits) {
  return {{"delay_law", c.law.name},
          {"mean_sigma", enclosure_json(c.law.mean_sigma, digits)},
          {"mean_sigma_tau", enclosure_json(c.law.mean_sigma_tau, digits)},
          {"mean_sigma_squared", enclosure_json(c.law.mean_sigma_squared, digits)},
          {"mean_tau", enclosure_json(c.law.mean_tau, digits)},
          {"gated_staleness", enclosure_json(c.gated_staleness, digits)},
          {"ungated_staleness", enclosure_json(c.ungated_staleness, digits)},
          {"bound_ratio", enclosure_json(c.bound_ratio, digits)},
          {"eta_ratio", enclosure_json(c.eta_ratio, digits)},
          {"gated_vacuous", c.gated_vacuous},
          {"ungated_vacuous", c.ungated_vacuous}};
}

void print_eta_table(const std::vector<theory::OptimizedEtaComparison>& rows) {
  reference::mpfr_real widest(0);
  for (const auto& c : rows) {
    if (!c.gated_vacuous && !c.ungated_vacuous && c.bound_ratio.relative_width() > widest) {
      widest = c.bound_ratio.relative_width();
    }
  }
  std::cout
      << "\nOptimized-eta comparison with the ungated update (the ideal update's bound (S), each at its own best "
         "eta):\n"
      << "  (S)/(rho*sum sigma_t) = A/eta + B*eta is least at eta* = sqrt(A/B), value 2*sqrt(A*B); per step, with "
         "the delay law's expectations,\n"
      << "  R = [gated at eta*] / [ungated at eta*] = sqrt(E[sigma*tau] + E[sigma^2]/2) / (E[sigma]*sqrt(E[tau] + "
         "1/2)).\n"
      << "  R > 1: the gate makes the bound worse; at a constant delay R = sqrt((tau + sigma/2)/(sigma*(tau + "
         "1/2))) >= 1 always.\n"
      << "  (6-digit midpoints of certified enclosures; widest relative width of R: " << theory::decimal_up(widest, 2)
      << ")\n"
      << "  " << std::left << std::setw(58) << "delay law" << std::right << cell("E[sigma]", 12)
      << cell("E[sigma*tau]", 14) << cell("E[tau]", 12) << cell("R", 12) << cell("eta*_g/eta*_u", 14) << "\n";
  for (const auto& c : rows) {
    std::cout << "  " << std::left << std::setw(58) << c.law.name << std::right
              << cell(short_value(c.law.mean_sigma), 12) << cell(short_value(c.law.mean_sigma_tau), 14)
              << cell(short_value(c.law.mean_tau), 12) << cell(short_value(c.bound_ratio), 12)
              << cell(c.gated_vacuous || c.ungated_vacuous ? std::string("-") : short_value(c.eta_ratio), 14);
    if (c.gated_vacuous) std::cout << "  (every delay >= tau_cut: sigma = 0, the gated bound is vacuous)";
    if (c.ungated_vacuous) std::cout << "  (E[tau] = inf: the ungated bound is vacuous)";
    std::cout << "\n";
  }
}

nlohmann::json alpha_scan_json(const std::vector<theory::AlphaScanRow>& rows, unsigned digits) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : rows) {
    out.push_back({{"alpha", r.alpha},
                   {"B1", enclosure_json(r.b1, digits)},
                   {"alpha_B1", enclosure_json(r.alpha_b1, digits)},
                   {"B1_int", enclosure_json(r.b1_integer, digits)},
                   {"B1_int_argmax", r.b1_integer_argmax},
                   {"exp_alpha_B1_int", enclosure_json(r.exp_alpha_b1_integer, digits)},
                   {"W", enclosure_json(r.w, digits)},
                   {"alpha_W", enclosure_json(r.alpha_w, digits)},
                   {"exp_alpha_W", enclosure_json(r.exp_alpha_w, digits)}});
  }
  return out;
}

void print_alpha_scan(const std::vector<theory::AlphaScanRow>& rows, long tau_cut) {
  reference::mpfr_real widest(0);
  for (const auto& r : rows) {
    for (const Interval* x :
         {&r.b1, &r.b1_integer, &r.w, &r.alpha_b1, &r.alpha_w, &r.exp_alpha_w, &r.exp_alpha_b1_integer}) {
      if (x->relative_width() > widest) widest = x->relative_width();
    }
  }
  std::cout
      << "\nB1, B1_int and W over alpha at tau_cut = " << tau_cut
      << " (what \"O(1/e^alpha)\" can mean; 6-digit midpoints of certified enclosures, widest relative width "
      << theory::decimal_up(widest, 2) << ")\n"
      << "  alpha*B1 stays below 1/e and settles at it: B1 ~ 1/(e*alpha) is Theta(1/alpha) for every alpha, never "
         "e^{-alpha};\n"
      << "  alpha*W and alpha*B1_int stay of order 1 up to alpha ~ 0.7 (the paper's 0.2 and 0.4 included) while "
         "e^{-alpha} barely moves;\n"
      << "  only past that, where sigma(1) < 1/2 and the integer maximizer is tau = 1 (B1_int = sigma(1) = "
         "gamma(1)*e^{-alpha}), do W and B1_int decay like e^{-alpha}\n"
      << cell("alpha", 8) << cell("B1", 12) << cell("alpha*B1", 12) << cell("B1_int", 12) << cell("at", 6)
      << cell("e^alpha*B1_int", 16) << cell("W", 12) << cell("alpha*W", 12) << cell("e^alpha*W", 12)
      << cell("e^-alpha", 12) << "\n";
  for (const auto& r : rows) {
    const reference::mpfr_real alpha = core::parse_real<reference::mpfr_real>(r.alpha, "alpha");
    const std::string decay = short_value(reference::mpfr_real(exp(-alpha)));
    std::cout << cell(r.alpha, 8) << cell(short_value(r.b1), 12) << cell(short_value(r.alpha_b1), 12)
              << cell(short_value(r.b1_integer), 12) << cell(std::to_string(r.b1_integer_argmax), 6)
              << cell(short_value(r.exp_alpha_b1_integer), 16) << cell(short_value(r.w), 12)
              << cell(short_value(r.alpha_w), 12) << cell(short_value(r.exp_alpha_w), 12) << cell(decay, 12) << "\n";
  }
}

void print_sup(const char* title, const theory::SupConstant& c, unsigned digits) {
  std::cout << title << "\n"
            << "  value (MPFR, tau* = mid)   " << core::to_decimal(c.value_mpfr, digits) << "\n"
            << "  certified enclosure        " << c.value.to_string(digits) << "\n"
            << "  relative width             " << theory::decimal_up(c.value.relative_width(), 3) << "\n"
            << "  maximizer tau*             " << core::to_decimal(c.argmax_mpfr, digits) << "\n"
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
    throw core::InputError("bound: precision must be in [" + std::to_string(kMinBoundPrecisionBits) + ", " +
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
  const std::vector<theory::OptimizedEtaComparison> eta = theory::optimized_eta_table(options.alpha, options.tau_cut);
  const std::vector<theory::AlphaScanRow> scan = options.alpha_scan
                                                     ? theory::alpha_scan(options.tau_cut, theory::default_alpha_scan())
                                                     : std::vector<theory::AlphaScanRow>{};
  nlohmann::json inequalities = nlohmann::json::array();
  for (const auto& q : c.inequalities) {
    inequalities.push_back({{"statement", q.statement},
                            {"lhs_enclosure", enclosure_json(q.constant, digits)},
                            {"rhs_enclosure", enclosure_json(q.comparison, digits)},
                            {"verdict", theory::to_string(q.verdict)}});
  }
  if (options.json) {
    nlohmann::json eta_rows = nlohmann::json::array();
    for (const auto& row : eta) eta_rows.push_back(eta_json(row, digits));
    nlohmann::json out{{"alpha", c.alpha_text},
                       {"tau_cut", c.tau_cut},
                       {"precision_bits", c.precision_bits},
                       {"B1", sup_json(c.b1, digits)},
                       {"B2", sup_json(c.b2, digits)},
                       {"W",
                        {{"value", core::to_decimal(c.w_mpfr, digits)},
                         {"enclosure", enclosure_json(c.w, digits)},
                         {"cutoff_bound_enclosure", enclosure_json(c.w_cutoff_bound, digits)}}},
                       {"alpha_tau_cut_at_least_1", c.cutoff_past_peak},
                       {"inequalities", inequalities},
                       {"optimized_eta", eta_rows}};
    if (options.alpha_scan) out["alpha_scan"] = alpha_scan_json(scan, digits);
    std::cout << out.dump(2) << "\n";
    return;
  }
  std::cout << "Convergence-bound constants for the CGAD gate  alpha = " << c.alpha_text << "  tau_cut = " << c.tau_cut
            << "  (" << bits << "-bit MPFR/MPFI, " << digits << " significant digits; enclosures rounded outward)\n\n";
  print_sup("B1 = sup_{tau>=0} tau*sigma(tau)", c.b1, digits);
  print_sup("B2 = sup_{tau>=0} tau^2*sigma(tau)", c.b2, digits);
  std::cout << "W = sum_{tau=1}^{tau_cut} sigma(tau)\n"
            << "  value (MPFR)               " << core::to_decimal(c.w_mpfr, digits) << "\n"
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
              << q.comparison.to_string(digits) << "\n      verdict    " << theory::to_string(q.verdict) << "\n";
  }
  print_eta_table(eta);
  if (options.alpha_scan) print_alpha_scan(scan, options.tau_cut);
}

}  // namespace

void add_bound_command(CLI::App& app) {
  auto options = std::make_shared<BoundOptions>();
  CLI::App* command = app.add_subcommand(
      "bound", "Certified constants B1, B2, W of the convergence bound and their inequalities (MPFI)");
  command
      ->add_option("--alpha", options->alpha, "decay rate alpha >= 0 (decimal; alpha = 0 makes every comparison +inf)")
      ->capture_default_str();
  command->add_option("--tau-cut", options->tau_cut, "cosine cutoff tau_cut (integer in [1, 1000000])")
      ->capture_default_str();
  command->add_flag("--json", options->json, "print JSON instead of a report");
  command->add_flag(
      "--alpha-scan", options->alpha_scan,
      "also certify B1, B1_int and W for alpha = 0.01 ... 16 at this tau_cut (what O(1/e^alpha) can mean)");
  add_precision_option(*command, options->precision, kMaxBoundPrecisionBits);
  command->callback([options] { run_bound(*options); });
}

}  // namespace cgad::cli
