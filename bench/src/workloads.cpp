#include "cgad/bench/workloads.hpp"

#include <cmath>
#include <cstring>

namespace cgad::bench {

double step_bytes(const fastpath::StepConfig& config, std::size_t n) {
  const double count = static_cast<double>(n);
  const double param = config.params == fastpath::ParamFormat::bf16 ? 2 : 4;
  const int moments = reference::is_adam_family(config.optimizer) ? 2 : 1;
  double moment = 0;
  switch (config.state) {
    case fastpath::StateFormat::fp32: moment = 4; break;
    case fastpath::StateFormat::bf16: moment = 2; break;
    case fastpath::StateFormat::q8: moment = 1 + 4.0 / fastpath::kQ8BlockSize; break;  // code + absmax share
  }
  return count * (2 * param + 4 + moments * 2 * moment);
}

CopyWorkload::CopyWorkload(std::size_t bytes, unsigned threads)
    : source_(bytes / 2, 1), target_(bytes / 2, 0), pool_(threads) {}

void CopyWorkload::run() {
  unsigned char* target = target_.data();
  const unsigned char* source = source_.data();
  pool_.parallel_for(source_.size(), [=](std::uint64_t begin, std::uint64_t end) {
    std::memcpy(target + begin, source + begin, end - begin);
  });
}

namespace {
// A deterministic pseudo-gradient spanning five decades with both signs: every code of the q8 maps and the
// bf16 rounding paths get exercised, and no element is zero (which would shortcut nothing, but keeps it honest).
float gradient_value(std::size_t i) {
  const float magnitude = std::ldexp(1.0f + static_cast<float>(i % 97) / 97.0f, -static_cast<int>(i % 17));
  return (i % 3 == 0) ? -magnitude : magnitude;
}
}  // namespace

FastpathCpuWorkload::FastpathCpuWorkload(const fastpath::StepConfig& config, std::size_t n, unsigned threads)
    : optimizer_(config, n, threads), grad_(n) {
  for (std::size_t i = 0; i < n; ++i) grad_[i] = gradient_value(i);
  if (config.params == fastpath::ParamFormat::bf16) {
    params_bf16_.assign(n, fastpath::round_nearest_even_bf16(0.5f));
  } else {
    params_fp32_.assign(n, 0.5f);
  }
}

void FastpathCpuWorkload::run() {
  if (!params_bf16_.empty()) {
    optimizer_.step(std::span<fastpath::bf16>(params_bf16_), grad_, 1);
  } else {
    optimizer_.step(std::span<float>(params_fp32_), grad_, 1);
  }
}

ReferenceWorkload::ReferenceWorkload(std::size_t n) : params_(n, reference::mpfr_real(1) / 2), grad_(n) {
  reference::OptimizerConfig<reference::mpfr_real> config;
  optimizer_ = reference::make_optimizer(config, n);
  for (std::size_t i = 0; i < n; ++i) grad_[i] = reference::mpfr_real(gradient_value(i));
}

void ReferenceWorkload::run() { optimizer_->apply(params_, {grad_, 1, 0}); }

struct RawMpfrWorkload::Impl {
  std::vector<reference::mpfr_real> theta, m, v, grad;
  reference::AdamHyper<reference::mpfr_real> hyper;
  reference::GateParams<reference::mpfr_real> gate{reference::GateKind::cosine,
                                                   reference::parse_real<reference::mpfr_real>("0.2", "alpha"),
                                                   reference::mpfr_real(32)};
  long t = 0;
  mpfr_t sigma, bias1, bias2, keep1, keep2, g, scaled, denominator;
  explicit Impl(std::size_t n)
      : theta(n, reference::mpfr_real(1) / 2), m(n, reference::mpfr_real(0)), v(n, reference::mpfr_real(0)), grad(n) {
    for (std::size_t i = 0; i < n; ++i) grad[i] = reference::mpfr_real(gradient_value(i));
    const mpfr_prec_t bits = static_cast<mpfr_prec_t>(reference::working_precision_bits());
    for (mpfr_ptr x : {sigma, bias1, bias2, keep1, keep2, g, scaled, denominator}) mpfr_init2(x, bits);
  }
  ~Impl() {
    for (mpfr_ptr x : {sigma, bias1, bias2, keep1, keep2, g, scaled, denominator}) mpfr_clear(x);
  }
};

RawMpfrWorkload::RawMpfrWorkload(std::size_t n) : impl_(std::make_unique<Impl>(n)) {}
RawMpfrWorkload::~RawMpfrWorkload() = default;
std::span<const reference::mpfr_real> RawMpfrWorkload::params() const { return impl_->theta; }

void RawMpfrWorkload::run() {
  Impl& s = *impl_;
  const auto data = [](const reference::mpfr_real& x) -> mpfr_srcptr { return x.backend().data(); };
  const auto mutable_data = [](reference::mpfr_real& x) -> mpfr_ptr { return x.backend().data(); };
  // The per-step scalars, as the reference computes them: σ(1), 1 − β^t, 1 − β.
  const reference::mpfr_real sigma = reference::sigma(reference::mpfr_real(1), s.gate);
  mpfr_set(s.sigma, data(sigma), MPFR_RNDN);
  ++s.t;
  mpfr_pow_si(s.bias1, data(s.hyper.beta1), s.t, MPFR_RNDN);
  mpfr_si_sub(s.bias1, 1, s.bias1, MPFR_RNDN);
  mpfr_pow_si(s.bias2, data(s.hyper.beta2), s.t, MPFR_RNDN);
  mpfr_si_sub(s.bias2, 1, s.bias2, MPFR_RNDN);
  mpfr_si_sub(s.keep1, 1, data(s.hyper.beta1), MPFR_RNDN);
  mpfr_si_sub(s.keep2, 1, data(s.hyper.beta2), MPFR_RNDN);
  for (std::size_t i = 0; i < s.theta.size(); ++i) {
    mpfr_ptr m = mutable_data(s.m[i]), v = mutable_data(s.v[i]), theta = mutable_data(s.theta[i]);
    mpfr_mul(s.g, s.sigma, data(s.grad[i]), MPFR_RNDN);
    mpfr_mul(s.scaled, s.keep1, s.g, MPFR_RNDN);
    mpfr_mul(m, m, data(s.hyper.beta1), MPFR_RNDN);
    mpfr_add(m, m, s.scaled, MPFR_RNDN);
    mpfr_sqr(s.scaled, s.g, MPFR_RNDN);
    mpfr_mul(s.scaled, s.scaled, s.keep2, MPFR_RNDN);
    mpfr_mul(v, v, data(s.hyper.beta2), MPFR_RNDN);
    mpfr_add(v, v, s.scaled, MPFR_RNDN);
    mpfr_div(s.denominator, v, s.bias2, MPFR_RNDN);
    mpfr_sqrt(s.denominator, s.denominator, MPFR_RNDN);
    mpfr_add(s.denominator, s.denominator, data(s.hyper.eps), MPFR_RNDN);
    mpfr_div(s.g, m, s.bias1, MPFR_RNDN);
    mpfr_div(s.g, s.g, s.denominator, MPFR_RNDN);
    mpfr_mul(s.scaled, data(s.hyper.weight_decay), theta, MPFR_RNDN);
    mpfr_add(s.g, s.g, s.scaled, MPFR_RNDN);
    mpfr_mul(s.g, s.g, data(s.hyper.lr), MPFR_RNDN);
    mpfr_sub(theta, theta, s.g, MPFR_RNDN);
  }
}

}  // namespace cgad::bench
