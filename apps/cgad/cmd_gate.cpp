// `cgad gate`: the staleness factor σ(τ) = γ(τ)·e^{−ατ} for τ = 0 … τ_cut + 1, in MPFR.
#include "cli_support.hpp"
#include "commands.hpp"

#include "cgad/core/gate.hpp"
#include "cgad/reference/real.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <iomanip>
#include <iostream>
#include <memory>

namespace cgad::cli {
namespace {

struct GateOptions {
  std::string alpha = "0.2";
  std::int64_t tau_cut = 32;
  bool json = false;
  unsigned precision = 0;
};

// Rows past this many are refused rather than printed: a typo in --tau-cut should not fill a disk.
constexpr std::int64_t kMaxTauCut = 1'000'000;

void run_gate(const GateOptions& options) {
  using reference::mpfr_real;
  // 112 bits is the least that still prints the 30 correct significant digits the table promises.
  if (options.precision < 112) {
    throw core::InputError("gate needs --precision >= 112 to print 30 significant digits, got " +
                           std::to_string(options.precision));
  }
  const unsigned bits = apply_precision(options.precision);
  if (options.tau_cut < 1 || options.tau_cut > kMaxTauCut) {
    throw core::InputError("tau-cut must be an integer in [1, " + std::to_string(kMaxTauCut) + "], got " +
                           std::to_string(options.tau_cut));
  }
  const core::GateParams<mpfr_real> gate{core::GateKind::cosine, core::parse_real<mpfr_real>(options.alpha, "alpha"),
                                         mpfr_real(options.tau_cut)};
  core::validate(gate);
  // sin, exp and the few products behind σ are each correctly rounded, so σ carries well under 2^8 ulps of
  // error; printing floor((bits − 8)·log10 2) digits keeps every printed digit meaningful (74 at 256 bits).
  const unsigned digits = static_cast<unsigned>(std::floor((bits - 8) * 0.30102999566398120));
  nlohmann::json rows = nlohmann::json::array();
  for (std::int64_t tau = 0; tau <= options.tau_cut + 1; ++tau) {
    const mpfr_real t(tau);
    rows.push_back({{"tau", tau},
                    {"gamma", core::to_decimal(core::gamma(t, gate), digits)},
                    {"sigma", core::to_decimal(core::sigma(t, gate), digits)}});
  }
  if (options.json) {
    std::cout << nlohmann::json{{"alpha", options.alpha},
                                {"tau_cut", options.tau_cut},
                                {"precision_bits", bits},
                                {"rows", rows}}
                     .dump(2)
              << "\n";
    return;
  }
  std::cout << "CGAD staleness gate  alpha = " << options.alpha << "  tau_cut = " << options.tau_cut << "  (" << bits
            << "-bit MPFR, " << digits << " significant digits)\n";
  const int width = static_cast<int>(digits) + 7;
  std::cout << std::setw(6) << "tau"
            << "  " << std::left << std::setw(width) << "gamma(tau)"
            << "  sigma(tau)\n"
            << std::right;
  for (const auto& row : rows) {
    std::cout << std::setw(6) << row["tau"].get<std::int64_t>() << "  " << std::left << std::setw(width)
              << row["gamma"].get<std::string>() << "  " << row["sigma"].get<std::string>() << "\n"
              << std::right;
  }
}

}  // namespace

void add_gate_command(CLI::App& app) {
  auto options = std::make_shared<GateOptions>();
  CLI::App* command = app.add_subcommand("gate", "Table of the staleness gate gamma(tau) and sigma(tau)");
  command->add_option("--alpha", options->alpha, "decay rate alpha >= 0 (decimal, exact at working precision)")
      ->capture_default_str();
  command->add_option("--tau-cut", options->tau_cut, "cosine cutoff tau_cut (integer >= 1)")->capture_default_str();
  command->add_flag("--json", options->json, "print JSON instead of a table");
  add_precision_option(*command, options->precision);
  command->callback([options] { run_gate(*options); });
}

}  // namespace cgad::cli
