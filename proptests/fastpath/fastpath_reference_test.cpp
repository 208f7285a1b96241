// fp32 fast path (fp32 parameters, fp32 state) against the MPFR reference, one step from the zero state.
// Both run on the same hyperparameters (fastpath::reference_config: the floats converted exactly into MPFR, β1 and
// β2 as the decimals they stand for, whose 1 − β and 1 − β^t the fast path rounds once), so the only differences are
// the fast path's roundings; the bound below counts them.
//
// Error budget (u = 2^-24; "k" = relative error at most k·u to first order; σ and the bias corrections are
// host-rounded once, counted as one rounding each, their double evaluation adds ≤ 2^-50 relative):
//   Adam family, zero state (β·0 + y = y exactly):
//     g = σ⊗Δ                       2   (σ, product)
//     m = (1−β1)⊗g                  4   (1−β1 rounded, g, product)
//     v = (1−β2)⊗(g⊗g)              7   (1−β2, 2·2 for g², its rounding, product)
//     m̂ = m⊘b1, v̂ = v⊘b2           6, 9 (b rounded, division)
//     r = sqrt(v̂)                   5.5 (half of 9, plus the sqrt)
//     den = r⊕ε                     6.5 (both positive)
//     A = m̂⊘den                     13.5
//     D = A⊕(λ⊗θ)                   absolute: 13.5u|A| + u|λθ| + u|D|
//     θ' = θ⊖(η⊗D)                  absolute: η·err(D) + u|ηD| + u|θ'|
//   Nesterov / SDM, zero state:
//     d = σ⊗Δ 2;  b = d (μ·0 + d exact) 2;  I = d⊕(μ⊗b): 2u|d| + 3u|μb| + u|I|;  θ' as above with I for D.
// The first-order sums are multiplied by (1 + 64u) for the second-order terms (k ≤ 14, so (1+u)^k − 1 ≤
// k·u·(1 + 14u)). m and v have relative bounds 4u and 7u; θ' is reported in ulps of the reference θ'.
#include "support/fastpath_test_support.hpp"

#include "cgad/reference/optimizers.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdio>

namespace cgad::fastpath {
namespace {

using core::OptimizerKind;
using reference::mpfr_real;
using testing::random_vector;

constexpr double u = 0x1p-24;
constexpr double kSecondOrder = 1 + 64 * u;

double ulp_of(double x) {
  const float f = static_cast<float>(std::fabs(x));
  return std::nextafter(f, INFINITY) - f;
}

struct Stats {
  double max_ulps = 0, sum_sq = 0, max_bound_use = 0;
  std::size_t worst = 0, count = 0;
  void add(std::size_t i, double ulps, double bound_use) {
    if (ulps > max_ulps) {
      max_ulps = ulps;
      worst = i;
    }
    sum_sq += ulps * ulps;
    ++count;
    max_bound_use = std::max(max_bound_use, bound_use);
  }
};

void check_one_step(OptimizerKind kind, std::int64_t tau, float weight_decay) {
  reference::set_working_precision_bits(256);
  StepConfig config;
  config.optimizer = kind;
  config.params = ParamFormat::fp32;
  config.state = StateFormat::fp32;
  config.adam.lr = 0.01f;
  config.adam.weight_decay = weight_decay;
  const std::size_t n = 4099;
  const std::vector<float> theta0 = random_vector(n, 17);
  const std::vector<float> grad = random_vector(n, 18);

  CpuOptimizer fast(config, n, 2);
  std::vector<float> theta = theta0;
  const StepReport report = fast.step(std::span<float>(theta), grad, tau);
  ASSERT_TRUE(report.applied);

  auto ref = reference::make_optimizer(fastpath::reference_config<mpfr_real>(config), n);
  std::vector<mpfr_real> ref_theta(theta0.begin(), theta0.end());
  std::vector<mpfr_real> ref_grad(grad.begin(), grad.end());
  const auto ref_report = ref->apply(ref_theta, {ref_grad, tau, 0});
  const auto ref_buffers = ref->buffers();

  std::vector<float> first(n), second(n);
  fast.read_buffer(fast.buffer_names()[0], first);
  const bool adam = core::is_adam_family(kind);
  if (adam) fast.read_buffer("v", second);

  const auto cfg = fastpath::reference_config<mpfr_real>(config);
  const mpfr_real one(1);
  const mpfr_real bias1 = one - cfg.adam.beta1;  // t = 1: 1 − β^1
  const mpfr_real bias2 = one - cfg.adam.beta2;
  Stats theta_stats;
  for (std::size_t i = 0; i < n; ++i) {
    const mpfr_real& m = ref_buffers[0].values[i];
    const double m_ref = m.convert_to<double>();
    double theta_bound;
    if (adam) {
      const mpfr_real& v = ref_buffers[1].values[i];
      const double v_ref = v.convert_to<double>();
      EXPECT_LE(std::fabs(first[i] - m_ref), 4 * u * kSecondOrder * std::fabs(m_ref)) << "m[" << i << "]";
      EXPECT_LE(std::fabs(second[i] - v_ref), 7 * u * kSecondOrder * v_ref) << "v[" << i << "]";
      const mpfr_real a_exact = (m / bias1) / (sqrt(v / bias2) + cfg.adam.eps);
      const double a = std::fabs(a_exact.convert_to<double>());
      const double decay = std::fabs(cfg.adam.weight_decay.convert_to<double>() * theta0[i]);
      const mpfr_real d_exact = a_exact + cfg.adam.weight_decay * mpfr_real(theta0[i]);
      const double d = std::fabs(d_exact.convert_to<double>());
      const double lr = cfg.adam.lr.convert_to<double>();
      theta_bound = lr * (13.5 * u * a + u * decay + u * d) + u * lr * d;
    } else {
      const double mu = cfg.nesterov.momentum.convert_to<double>();
      EXPECT_LE(std::fabs(first[i] - m_ref), 2 * u * kSecondOrder * std::fabs(m_ref)) << "b[" << i << "]";
      const double d = std::fabs(m_ref);  // b = d after one step from zero
      const double inner = std::fabs(m_ref * (1 + mu));
      const double lr = cfg.nesterov.lr.convert_to<double>();
      theta_bound = lr * (2 * u * d + 3 * u * mu * d + u * inner) + u * lr * inner;
    }
    const double theta_ref = ref_theta[i].convert_to<double>();
    theta_bound = (theta_bound + u * std::fabs(theta_ref)) * kSecondOrder;
    const double error = std::fabs(static_cast<double>(theta[i]) - theta_ref);
    ASSERT_LE(error, theta_bound) << std::hexfloat << "theta[" << i << "]: fast " << theta[i] << " ref " << theta_ref
                                  << " from theta0 " << theta0[i] << " grad " << grad[i];
    theta_stats.add(i, error / ulp_of(theta_ref), theta_bound == 0 ? 0 : error / theta_bound);
  }
  std::printf(
      "%s tau=%lld wd=%g: theta max %.3f ulps (worst i=%zu theta0=%a grad=%a), RMS %.3f ulps, "
      "max %.3f of the bound; sigma fast %a ref %.17g\n",
      std::string(core::to_string(kind)).c_str(), static_cast<long long>(tau), weight_decay, theta_stats.max_ulps,
      theta_stats.worst, theta0[theta_stats.worst], grad[theta_stats.worst],
      std::sqrt(theta_stats.sum_sq / theta_stats.count), theta_stats.max_bound_use, report.sigma,
      ref_report.sigma.convert_to<double>());
}

TEST(FastpathVsReference, CgadOneStep) {
  check_one_step(OptimizerKind::cgad, 3, 0.0f);
  check_one_step(OptimizerKind::cgad, 0, 0.01f);
  check_one_step(OptimizerKind::cgad, 31, 0.0f);
}
TEST(FastpathVsReference, AdamDecayAndAdamOneStep) {
  check_one_step(OptimizerKind::adam_decay, 5, 0.01f);
  check_one_step(OptimizerKind::adam, 5, 0.0f);
}
TEST(FastpathVsReference, NesterovAndSdmOneStep) {
  check_one_step(OptimizerKind::nesterov, 4, 0.0f);
  check_one_step(OptimizerKind::sdm, 4, 0.0f);
}

// Where the step-wide constants agree exactly — Adam (σ ≡ 1) at t = 1 with betas whose 1 − β is a float (0.5 and
// 0.75: the float reference's 1 − RN_f(β) is then the decimal's 1 − β, from which the fast path's cgad semantics
// rounds it, fastpath/detail/derived_constants.hpp; at 0.9 and 0.999 they differ), where 1 − β^1 = 1 − β is exact in
// both, and Nesterov (σ ≡ 1, no bias correction) at every step — the fast path performs the reference's float
// operations in the reference's order, so it must equal make_optimizer<float> bit for bit.
TEST(FastpathVsReference, BitIdenticalToTheFloatReferenceWhereTheConstantsAgree) {
  for (const OptimizerKind kind : {OptimizerKind::adam, OptimizerKind::nesterov}) {
    StepConfig config;
    config.optimizer = kind;
    config.params = ParamFormat::fp32;
    config.state = StateFormat::fp32;
    config.adam.weight_decay = 0.01f;
    config.adam.beta1 = 0.5f;
    config.adam.beta2 = 0.75f;
    const std::size_t n = 1000;
    CpuOptimizer fast(config, n, 2);
    core::OptimizerConfig<float> ref_config;
    ref_config.optimizer = kind;
    ref_config.adam = config.adam;
    ref_config.nesterov = config.nesterov;
    auto ref = reference::make_optimizer(ref_config, n);
    std::vector<float> theta = random_vector(n, 70);
    std::vector<float> ref_theta = theta;
    const int steps = kind == OptimizerKind::adam ? 1 : 5;
    for (int s = 0; s < steps; ++s) {
      const auto grad = random_vector(n, 71 + static_cast<std::uint32_t>(s));
      fast.step(std::span<float>(theta), grad, s);
      ref->apply(ref_theta, {grad, s, 0});
    }
    std::vector<float> first(n);
    fast.read_buffer(fast.buffer_names()[0], first);
    const auto ref_first = ref->buffers()[0].values;
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_EQ(std::bit_cast<std::uint32_t>(theta[i]), std::bit_cast<std::uint32_t>(ref_theta[i]))
          << core::to_string(kind) << std::hexfloat << " theta[" << i << "] " << theta[i] << " vs " << ref_theta[i];
      ASSERT_EQ(std::bit_cast<std::uint32_t>(first[i]), std::bit_cast<std::uint32_t>(ref_first[i])) << i;
    }
  }
}

}  // namespace
}  // namespace cgad::fastpath
