#include "support/differential_one_step.hpp"

#include "support/differential_bounds.hpp"
#include "support/fastpath_test_support.hpp"

#include "cgad/fastpath/detail/q8_maps.hpp"
#include "cgad/reference/optimizers.hpp"
#include "cgad/fastpath/detail/cpu_optimizer_internals.hpp"

#include <cmath>
#include <cstdio>
#include <optional>
#include <sstream>

using cgad::fastpath::detail::host_state_of;

namespace cgad::proptests {

using fastpath::Q8MapKind;
using fastpath::StateFormat;
using reference::mpfr_real;

void ErrorStats::add(double units, double bound_use, const std::string& where) {
  if (units > max_units || count == 0) {
    max_units = std::max(max_units, units);
    worst = where;
  }
  sum_sq += units * units;
  max_bound_use = std::max(max_bound_use, bound_use);
  ++count;
}

void ErrorStats::merge(const ErrorStats& other) {
  if (other.count == 0) return;
  if (count == 0 || other.max_units > max_units) {
    max_units = other.max_units;
    worst = other.worst;
  }
  sum_sq += other.sum_sq;
  count += other.count;
  max_bound_use = std::max(max_bound_use, other.max_bound_use);
}

double ErrorStats::rms() const {
  return count == 0 ? 0 : std::sqrt(sum_sq / static_cast<double>(count));
}

namespace {

// The bound is evaluated in double: ~30 operations at 2^-53 each cannot move it by 2^-30 of itself. The
// reference at 128 bits is off the exact value by far less than 2^-100 of the chain's largest magnitude.
constexpr double kBoundSlack = 1 + 0x1p-30;
constexpr double kReferenceSlack = 0x1p-100;

double fp32_spacing(double magnitude) {
  const float f = static_cast<float>(std::fabs(magnitude));
  return static_cast<double>(std::nextafter(f, INFINITY)) - f;
}

// The fp32 chain of one element (element_update.hpp, in its operation order), from the zero state.
struct Chain {
  Bounded theta, first, second;
  bool in_range = true;
};

Chain adam_chain(const fastpath::StepConfig& c, float theta, float delta, double sigma) {
  const Bounded s = sigma == 0 ? exact(0) : host_constant(sigma);
  const Bounded g = s * exact(delta);
  // β·0 + y = y exactly (the zero state), so the moments are the products alone.
  const Bounded m = host_constant(1.0 - c.adam.beta1) * g;
  const Bounded gg = g * g;
  const Bounded v = host_constant(1.0 - c.adam.beta2) * gg;
  const Bounded m_hat = m / host_constant(1.0 - c.adam.beta1);  // 1 − β1^t at t = 1
  const Bounded v_hat = v / host_constant(1.0 - c.adam.beta2);
  const Bounded den = sqrt(v_hat) + exact(c.adam.eps);
  const Bounded adam = guarded_by(m_hat / den, v);
  const Bounded direction = adam + exact(c.adam.weight_decay) * exact(theta);
  const Bounded step = exact(c.adam.lr) * direction;
  Chain out{exact(theta) - step, m, v};
  for (const Bounded& b : {g, m, gg, v, m_hat, v_hat, den, adam, direction, step, out.theta}) {
    out.in_range = out.in_range && b.in_fp32_range();
  }
  return out;
}

Chain nesterov_chain(const fastpath::StepConfig& c, float theta, float delta, double sigma) {
  const Bounded s = sigma == 1 ? exact(1) : host_constant(sigma);
  const Bounded d = s * exact(delta);
  const Bounded b = d;  // μ·0 + d = d exactly
  const Bounded inner = d + exact(c.nesterov.momentum) * b;
  const Bounded step = exact(c.nesterov.lr) * inner;
  Chain out{exact(theta) - step, b, {}};
  for (const Bounded& x : {d, inner, step, out.theta}) out.in_range = out.in_range && x.in_fp32_range();
  return out;
}

double as_double(const mpfr_real& x) {
  return x.convert_to<double>();
}

std::string where(const char* what, std::size_t i, float fast, const mpfr_real& ref, double bound) {
  std::ostringstream os;
  os << what << "[" << i << "] fast " << std::hexfloat << fast << " ref " << as_double(ref) << " bound " << bound;
  return os.str();
}

// Checks one stored quantity; returns a failure message or nothing.
std::optional<std::string> compare(ErrorStats& stats, const char* what, std::size_t i, float fast, const mpfr_real& ref,
                                   double bound, double unit) {
  const double error = as_double(abs(mpfr_real(fast) - ref));
  const std::string at = where(what, i, fast, ref, bound);
  if (!(error <= bound)) return "out of bound: " + at + std::string(" error ") + std::to_string(error);
  stats.add(unit > 0 ? error / unit : 0, bound > 0 ? error / bound : 0, at);
  return std::nullopt;
}

}  // namespace

OneStepOutcome check_one_step(const fastpath::StepConfig& config, const std::vector<float>& theta_in,
                              const std::vector<float>& grad, std::int64_t tau) {
  OneStepOutcome out;
  const std::size_t n = grad.size();
  const bool stochastic = config.rounding == fastpath::Rounding::stochastic;
  fastpath::testing::Params params(config, theta_in);
  // The values the fast path starts from (bf16 parameters are rounded once, before anything runs).
  std::vector<float> theta0(n);
  for (std::size_t i = 0; i < n; ++i) {
    theta0[i] =
        config.params == fastpath::ParamFormat::fp32 ? params.fp32[i] : fastpath::to_float(params.bf16_values[i]);
  }
  fastpath::CpuOptimizer fast(config, n, 1);
  const fastpath::StepReport report = params.step(fast, grad, tau);

  out.applied = report.applied;
  // The reference refuses an empty parameter vector (an empty fragment); the fast path steps it as a no-op.
  if (n == 0) return out;
  auto reference = reference::make_optimizer(fastpath::reference_config<mpfr_real>(config), n);
  std::vector<mpfr_real> ref_theta(theta0.begin(), theta0.end());
  const std::vector<mpfr_real> ref_grad(grad.begin(), grad.end());
  const auto ref_report = reference->apply(ref_theta, {ref_grad, tau, 0});
  if (report.applied != ref_report.applied || report.reason != ref_report.reason) {
    out.failure = "fast path " + std::string(core::to_string(report.reason)) + ", reference " +
                  std::string(core::to_string(ref_report.reason));
    return out;
  }
  if (!report.applied) return out;

  const bool adam = core::is_adam_family(config.optimizer);
  const double sigma = as_double(ref_report.sigma);
  std::vector<float> first(n), second(n);
  fast.read_buffer(fast.buffer_names()[0], first);
  if (adam) fast.read_buffer("v", second);
  const auto buffers = reference->buffers();
  const fastpath::HostState& state = host_state_of(fast);
  const auto& signed_map = fastpath::dynamic_map(Q8MapKind::signed_map);
  const auto& unsigned_map = fastpath::dynamic_map(fastpath::second_moment_map(config.v_map));

  // The bound of a stored moment: the chain's, plus the store into the state format; and its unit.
  const auto moment_bound = [&](int k, std::size_t i, const Bounded& b, const mpfr_real& ref, double& unit) {
    const double chain = b.fe;
    const double magnitude = b.computed_max();
    const double ref_abs = std::fabs(as_double(ref));
    double store = 0;
    switch (config.state) {
      case StateFormat::fp32:
        unit = fp32_spacing(ref_abs);
        break;
      case StateFormat::bf16:
        store = bf16_store_error(magnitude, stochastic);
        unit = bf16_spacing(ref_abs);
        break;
      case StateFormat::q8: {
        const auto& map = (adam && k == 1) ? unsigned_map : signed_map;
        const float absmax = state.absmax[k][i / fastpath::kQ8BlockSize];
        store = q8_store_error(map, b.a, b.fe + b.de, absmax, stochastic);
        unit = absmax == 0 ? 0 : absmax * max_code_gap(map, as_double(ref) / absmax, as_double(ref) / absmax);
        break;
      }
    }
    return (chain + store) * kBoundSlack + kReferenceSlack * magnitude;
  };

  std::vector<Chain> chains;
  chains.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    chains.push_back(adam ? adam_chain(config, theta0[i], grad[i], sigma)
                          : nesterov_chain(config, theta0[i], grad[i], sigma));
  }
  // A q8 block shares one absmax: one element outside the fp32 range (v = +Inf) makes the absmax Inf, and
  // every other element of the block then decodes as code·Inf (NaN for the zero code). The whole block is
  // outside the domain.
  std::vector<bool> block_in_range((n + fastpath::kQ8BlockSize - 1) / fastpath::kQ8BlockSize, true);
  for (std::size_t i = 0; i < n; ++i) {
    if (!chains[i].in_range) block_in_range[i / fastpath::kQ8BlockSize] = false;
  }
  for (std::size_t i = 0; i < n; ++i) {
    const Chain& chain = chains[i];
    const double theta_magnitude = chain.theta.computed_max();
    const bool block_ok = config.state != StateFormat::q8 || block_in_range[i / fastpath::kQ8BlockSize];
    if (!chain.in_range || !block_ok ||
        (config.params == fastpath::ParamFormat::bf16 && theta_magnitude >= 0x1.fep127)) {
      ++out.outside_fp32;
      continue;
    }
    const float theta_fast =
        config.params == fastpath::ParamFormat::fp32 ? params.fp32[i] : fastpath::to_float(params.bf16_values[i]);
    const double theta_ref_abs = std::fabs(as_double(ref_theta[i]));
    double theta_store = 0, theta_unit = fp32_spacing(theta_ref_abs);
    if (config.params == fastpath::ParamFormat::bf16) {
      theta_store = bf16_store_error(theta_magnitude, stochastic);
      theta_unit = bf16_spacing(theta_ref_abs);
    }
    const double scale = std::fabs(theta0[i]) + chain.theta.a + theta_magnitude;
    const double theta_bound = (chain.theta.fe + theta_store) * kBoundSlack + kReferenceSlack * scale;
    if (auto f = compare(out.theta, "theta", i, theta_fast, ref_theta[i], theta_bound, theta_unit)) {
      out.failure = *f;
      return out;
    }
    double unit = 0;
    const double first_bound = moment_bound(0, i, chain.first, buffers[0].values[i], unit);
    if (auto f = compare(out.first, adam ? "m" : "b", i, first[i], buffers[0].values[i], first_bound, unit)) {
      out.failure = *f;
      return out;
    }
    if (adam) {
      const double second_bound = moment_bound(1, i, chain.second, buffers[1].values[i], unit);
      if (auto f = compare(out.second, "v", i, second[i], buffers[1].values[i], second_bound, unit)) {
        out.failure = *f;
        return out;
      }
    }
  }
  return out;
}

void OneStepSummary::add(const std::string& config, const OneStepOutcome& outcome) {
  Row& row = rows_[config];
  ++row.cases;
  row.outside += outcome.outside_fp32;
  row.theta.merge(outcome.theta);
  row.first.merge(outcome.first);
  row.second.merge(outcome.second);
}

void OneStepSummary::print() const {
  std::printf("%-36s %6s %8s | %-28s | %-28s | %-28s\n", "configuration", "cases", "outside",
              "theta max/RMS units (use)", "m|b max/RMS units (use)", "v max/RMS units (use)");
  for (const auto& [name, row] : rows_) {
    const auto cell = [](const ErrorStats& s) {
      char buffer[64];
      std::snprintf(buffer, sizeof buffer, "%9.3g/%-8.3g (%.3f)", s.max_units, s.rms(), s.max_bound_use);
      return std::string(buffer);
    };
    std::printf("%-36s %6zu %8zu | %-28s | %-28s | %-28s\n", name.c_str(), row.cases, row.outside,
                cell(row.theta).c_str(), cell(row.first).c_str(), cell(row.second).c_str());
    std::printf("    worst theta: %s\n", row.theta.worst.c_str());
  }
}

}  // namespace cgad::proptests
