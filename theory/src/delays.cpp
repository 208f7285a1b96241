#include "cgad/theory/delays.hpp"

#include "cgad/core/errors.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace cgad::theory {

namespace {
constexpr DelayKind kAll[] = {
    DelayKind::constant, DelayKind::uniform,     DelayKind::geometric,  DelayKind::pareto,
    DelayKind::bursty,   DelayKind::adversarial, DelayKind::heavy_tail, DelayKind::constant_from_start};
constexpr double kHeavyTailShare = 0.3;
constexpr double kHeavyTailScale = 8.0;
constexpr double kParetoShape = 1.2;
constexpr double kBurstProbability = 1.0 / 20.0;
constexpr long kBurstLength = 8;
}  // namespace

const char* to_string(DelayKind kind) {
  switch (kind) {
    case DelayKind::constant:
      return "constant";
    case DelayKind::uniform:
      return "uniform";
    case DelayKind::geometric:
      return "geometric";
    case DelayKind::pareto:
      return "pareto";
    case DelayKind::bursty:
      return "bursty";
    case DelayKind::adversarial:
      return "adversarial";
    case DelayKind::heavy_tail:
      return "heavy-tail";
    case DelayKind::constant_from_start:
      return "constant-from-start";
  }
  return "?";
}

DelayKind parse_delay_kind(std::string_view name) {
  for (DelayKind kind : kAll) {
    if (name == to_string(kind)) return kind;
  }
  throw core::InputError("unknown delay schedule '" + std::string(name) + "' (expected " + kDelayKindNames + ")");
}

DelaySchedule::DelaySchedule(DelayKind kind, long tau_max, std::uint64_t seed, long adversarial_tau)
    : kind_(kind), tau_max_(tau_max), adversarial_tau_(adversarial_tau), engine_(seed) {
  if (tau_max < 0) throw core::InputError("tau-max must be >= 0, got " + std::to_string(tau_max));
  if (adversarial_tau < 0 || adversarial_tau > tau_max) {
    throw core::InputError("adversarial delay must lie in [0, tau-max]");
  }
}

double DelaySchedule::unit() {
  return static_cast<double>(engine_() >> 11) * 0x1p-53;
}

long DelaySchedule::uniform_int(long n) {
  // Rejection sampling: exactly uniform, and the same sequence on every platform.
  const std::uint64_t range = static_cast<std::uint64_t>(n) + 1;
  const std::uint64_t limit =
      std::numeric_limits<std::uint64_t>::max() - std::numeric_limits<std::uint64_t>::max() % range;
  std::uint64_t draw = engine_();
  while (draw >= limit) draw = engine_();
  return static_cast<long>(draw % range);
}

long DelaySchedule::next() {
  switch (kind_) {
    case DelayKind::constant:
      return tau_max_;
    case DelayKind::uniform:
      return uniform_int(tau_max_);
    case DelayKind::geometric: {
      // Inversion: τ = floor(ln(1−U)/ln(1−p)) is geometric on {0, 1, …} with success probability p.
      const double p = 1.0 / (1.0 + static_cast<double>(tau_max_) / 4.0);
      if (p >= 1.0) return 0;
      const double tau = std::floor(std::log1p(-unit()) / std::log1p(-p));
      return static_cast<long>(std::min(tau, static_cast<double>(tau_max_)));
    }
    case DelayKind::pareto: {
      // Pareto(x_m = 1, a): X = (1−U)^{−1/a} ≥ 1; τ = floor(X) − 1 ≥ 0 has P(τ ≥ j) = (j+1)^{−a}.
      const double x = std::pow(1.0 - unit(), -1.0 / kParetoShape);
      const double tau = std::floor(x) - 1.0;
      return static_cast<long>(std::min(tau, static_cast<double>(tau_max_)));
    }
    case DelayKind::bursty: {
      if (burst_left_ == 0 && unit() < kBurstProbability) burst_left_ = kBurstLength;
      if (burst_left_ > 0) {
        --burst_left_;
        return tau_max_;
      }
      return std::min(uniform_int(1), tau_max_);
    }
    case DelayKind::adversarial:
      return adversarial_tau_;
    case DelayKind::heavy_tail: {
      // One uniform decides stale or fresh, a second gives ⌊8/U⌋ with U = 1 − unit() ∈ (0, 1].
      if (!(unit() < kHeavyTailShare)) return 0;
      const double tau = std::floor(kHeavyTailScale / (1.0 - unit()));
      return static_cast<long>(std::min(tau, static_cast<double>(tau_max_)));
    }
    case DelayKind::constant_from_start:
      return tau_max_;
  }
  return 0;
}

}  // namespace cgad::theory
