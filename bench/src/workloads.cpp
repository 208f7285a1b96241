#include "cgad/bench/workloads.hpp"

#include "cgad/fastpath/detail/block_step.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace cgad::bench {

double step_bytes(const fastpath::StepConfig& config, std::size_t n) {
  const double count = static_cast<double>(n);
  const double param = config.params == fastpath::ParamFormat::bf16 ? 2 : 4;
  const int moments = core::is_adam_family(config.optimizer) ? 2 : 1;
  double moment = 0;
  switch (config.state) {
    case fastpath::StateFormat::fp32:
      moment = 4;
      break;
    case fastpath::StateFormat::bf16:
      moment = 2;
      break;
    case fastpath::StateFormat::q8:
      moment = 1 + 4.0 / fastpath::kQ8BlockSize;
      break;  // code + absmax share
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

Spread spread(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  if (values.empty()) return {};
  return {values.front(), values[values.size() / 2], values.back()};
}

InPlaceWorkload::InPlaceWorkload(const fastpath::StepConfig& config, std::size_t n, unsigned threads)
    : config_(config), grad_(n, 1.0f), pool_(threads), isa_(fastpath::selected_cpu_isa()) {
  if (config.params == fastpath::ParamFormat::bf16) {
    params16_.assign(n, 0x3F00);
  } else {
    params32_.assign(n, 0x3F000000u);
  }
  const int moments = core::is_adam_family(config.optimizer) ? 2 : 1;
  for (int k = 0; k < moments; ++k) {
    switch (config.state) {
      case fastpath::StateFormat::fp32:
        moments32_[k].assign(n, 0);
        break;
      case fastpath::StateFormat::bf16:
        moments16_[k].assign(n, 0);
        break;
      case fastpath::StateFormat::q8:
        codes_[k].assign(n, 0);
        absmax_[k].assign(fastpath::block_count(n), 0.0f);
        break;
    }
  }
}

namespace {
// One block of the twin: every element's buffers read and written where they lie, in one loop that GCC
// vectorizes (the integer op: the parameter and each moment move by the gradient's sign bit, so nothing can be
// elided); a q8 block's absmax is read and written once. The moment count is a template argument and the
// buffers are restrict, so the loop has no branch and no run-time alias check to fall back from.
template <int Moments, class Param, class Moment>
void touch_elements(const float* __restrict grad, Param* __restrict params, Moment* __restrict first,
                    Moment* __restrict second, std::size_t count) {
#pragma GCC ivdep
  for (std::size_t i = 0; i < count; ++i) {
    const auto sign = static_cast<Param>(fastpath::float_to_bits(grad[i]) >> 31);
    params[i] = static_cast<Param>(params[i] + sign + 1);
    first[i] = static_cast<Moment>(first[i] + 1);
    if constexpr (Moments == 2) second[i] = static_cast<Moment>(second[i] + 1);
  }
}

template <class Param, class Moment>
void touch_block(const float* grad, Param* params, Moment* first, Moment* second, std::size_t count) {
  if (second != nullptr) {
    touch_elements<2>(grad, params, first, second, count);
  } else {
    touch_elements<1>(grad, params, first, second, count);
  }
}

// Blocks [begin, end) of n elements.
template <class Param>
inline void touch(const float* grad, Param* params, std::vector<std::uint32_t> (&m32)[2],
                  std::vector<std::uint16_t> (&m16)[2], std::vector<std::uint8_t> (&codes)[2],
                  std::vector<float> (&absmax)[2], std::size_t n, std::size_t begin, std::size_t end) {
  const auto at = [](auto& buffer, std::size_t i) { return buffer.empty() ? nullptr : buffer.data() + i; };
  for (std::size_t block = begin; block < end; ++block) {
    const std::size_t i = block * fastpath::kQ8BlockSize;
    const std::size_t count = std::min(fastpath::kQ8BlockSize, n - i);
    if (!codes[0].empty()) {
      touch_block(grad + i, params + i, at(codes[0], i), at(codes[1], i), count);
      for (int k = 0; k < 2; ++k) {
        if (!absmax[k].empty()) absmax[k][block] += 1.0f;
      }
    } else if (!m16[0].empty()) {
      touch_block(grad + i, params + i, at(m16[0], i), at(m16[1], i), count);
    } else {
      touch_block(grad + i, params + i, at(m32[0], i), at(m32[1], i), count);
    }
  }
}

// The twin runs the ISA the step runs (cpu_isa.hpp), each version compiled for it (flatten inlines the loops into
// the target-specific wrapper), so that the roofline is not held back by narrower vectors than the step's.
#define CGAD_TWIN_VERSION(name, attributes)                                                                 \
  template <class Param>                                                                                    \
  attributes void name(const float* grad, Param* params, std::vector<std::uint32_t>(&m32)[2],               \
                       std::vector<std::uint16_t>(&m16)[2], std::vector<std::uint8_t>(&codes)[2],           \
                       std::vector<float>(&absmax)[2], std::size_t n, std::size_t begin, std::size_t end) { \
    touch(grad, params, m32, m16, codes, absmax, n, begin, end);                                            \
  }
CGAD_TWIN_VERSION(touch_generic, __attribute__((flatten)))
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
CGAD_TWIN_VERSION(touch_avx2, __attribute__((target("arch=x86-64-v3"), flatten)))
CGAD_TWIN_VERSION(touch_avx512, __attribute__((target("arch=x86-64-v4"), flatten)))
#endif
#undef CGAD_TWIN_VERSION

template <class Param>
void touch_on(fastpath::CpuIsa isa, const float* grad, Param* params, std::vector<std::uint32_t> (&m32)[2],
              std::vector<std::uint16_t> (&m16)[2], std::vector<std::uint8_t> (&codes)[2],
              std::vector<float> (&absmax)[2], std::size_t n, std::size_t begin, std::size_t end) {
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
  if (isa == fastpath::CpuIsa::avx512) return touch_avx512(grad, params, m32, m16, codes, absmax, n, begin, end);
  if (isa == fastpath::CpuIsa::avx2) return touch_avx2(grad, params, m32, m16, codes, absmax, n, begin, end);
#endif
  (void)isa;
  touch_generic(grad, params, m32, m16, codes, absmax, n, begin, end);
}
}  // namespace

void InPlaceWorkload::run() {
  const std::size_t n = grad_.size();
  pool_.parallel_for(fastpath::block_count(n), [&](std::uint64_t begin, std::uint64_t end) {
    if (!params16_.empty()) {
      touch_on(isa_, grad_.data(), params16_.data(), moments32_, moments16_, codes_, absmax_, n, begin, end);
    } else {
      touch_on(isa_, grad_.data(), params32_.data(), moments32_, moments16_, codes_, absmax_, n, begin, end);
    }
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
  core::OptimizerConfig<reference::mpfr_real> config;
  optimizer_ = reference::make_optimizer(config, n);
  for (std::size_t i = 0; i < n; ++i) grad_[i] = reference::mpfr_real(gradient_value(i));
}

void ReferenceWorkload::run() {
  optimizer_->apply(params_, {grad_, 1, 0});
}

struct RawMpfrWorkload::Impl {
  std::vector<reference::mpfr_real> theta, m, v, grad;
  core::AdamHyper<reference::mpfr_real> hyper;
  core::GateParams<reference::mpfr_real> gate{
      core::GateKind::cosine, core::parse_real<reference::mpfr_real>("0.2", "alpha"), reference::mpfr_real(32)};
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
std::span<const reference::mpfr_real> RawMpfrWorkload::params() const {
  return impl_->theta;
}

void RawMpfrWorkload::run() {
  Impl& s = *impl_;
  const auto data = [](const reference::mpfr_real& x) -> mpfr_srcptr { return x.backend().data(); };
  const auto mutable_data = [](reference::mpfr_real& x) -> mpfr_ptr { return x.backend().data(); };
  // The per-step scalars, as the reference computes them: σ(1), 1 − β^t, 1 − β.
  const reference::mpfr_real sigma = core::sigma(reference::mpfr_real(1), s.gate);
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
