#pragma once
// Generators for the fast-path-vs-reference differentials: what breaks numerics, not what is convenient.
// RapidCheck's own float generators never produce subnormals or exact ties and print six digits
// (docs/design.md §9), so values come from a weighted mix of special values, uniform-exponent values over
// 1e-30 … 1e30 (2^-100 … 2^100), raw bit patterns (normal in that range, or subnormal) and exact bf16 ties
// (low 16 bits 0x8000); counterexamples print every float as hexfloat with its index.
#include "support/fastpath_test_support.hpp"

#include <rapidcheck.h>

#include <bit>
#include <cstdint>
#include <ostream>
#include <vector>

namespace cgad::proptests {

inline constexpr int kMinExponent = -100;  // 2^-100 ≈ 7.9e-31
inline constexpr int kMaxExponent = 99;    // 2^100 ≈ 1.3e30

inline rc::Gen<float> gen_float() {
  const auto from_bits = [](std::uint32_t sign, std::uint32_t exponent_field, std::uint32_t fraction) {
    return std::bit_cast<float>((sign << 31) | (exponent_field << 23) | fraction);
  };
  return rc::gen::weightedOneOf<float>({
      {2, rc::gen::element(0.0f, -0.0f, 0x1p-149f, -0x1.fffffcp-127f, 0x1p-126f, 1.0f, -1.0f, 0x1.01p0f, -0x1.03p0f,
                           1e-30f, -1e-30f, 1e30f, -1e30f)},
      {5, rc::gen::map(rc::gen::tuple(rc::gen::inRange(1 << 23, 1 << 24),
                                      rc::gen::inRange(kMinExponent, kMaxExponent + 1), rc::gen::arbitrary<bool>()),
                       [](const std::tuple<int, int, bool>& t) {
                         const float x = std::ldexp(static_cast<float>(std::get<0>(t)), std::get<1>(t) - 23);
                         return std::get<2>(t) ? -x : x;
                       })},
      {2, rc::gen::map(
              rc::gen::tuple(rc::gen::inRange<std::uint32_t>(0, 2),
                             rc::gen::weightedOneOf<std::uint32_t>(
                                 {{4, rc::gen::inRange<std::uint32_t>(127 + kMinExponent, 127 + kMaxExponent + 1)},
                                  {1, rc::gen::just<std::uint32_t>(0)}}),
                             rc::gen::inRange<std::uint32_t>(0, 1u << 23)),
              [from_bits](const std::tuple<std::uint32_t, std::uint32_t, std::uint32_t>& t) {
                return from_bits(std::get<0>(t), std::get<1>(t), std::get<2>(t));
              })},
      {1, rc::gen::map(rc::gen::tuple(rc::gen::inRange<std::uint32_t>(0, 2),
                                      rc::gen::inRange<std::uint32_t>(127 + kMinExponent, 127 + kMaxExponent + 1),
                                      rc::gen::inRange<std::uint32_t>(0, 1u << 7)),
                       [from_bits](const std::tuple<std::uint32_t, std::uint32_t, std::uint32_t>& t) {
                         return from_bits(std::get<0>(t), std::get<1>(t), (std::get<2>(t) << 16) | 0x8000u);
                       })},
  });
}

// Sizes that break blockwise code (CUB's 0, 1, block − 1, block, block + 1) and random ones.
inline rc::Gen<int> gen_size() {
  return rc::gen::weightedOneOf<int>({{3, rc::gen::element(0, 1, 255, 256, 257)}, {2, rc::gen::inRange(2, 600)}});
}

// Staleness from fresh to far past τ_cut: 0, small, the gate boundary τ_cut − 1, τ_cut, τ_cut + 1, and up to 10^6.
inline rc::Gen<std::int64_t> gen_tau(std::int64_t tau_cut) {
  return rc::gen::weightedOneOf<std::int64_t>({
      {2, rc::gen::just<std::int64_t>(0)},
      {3, rc::gen::inRange<std::int64_t>(1, 9)},
      {3, rc::gen::element(std::max<std::int64_t>(tau_cut - 1, 0), tau_cut, std::int64_t{tau_cut + 1})},
      {2, rc::gen::inRange<std::int64_t>(tau_cut, 1'000'001)},
  });
}

// Random valid hyperparameters of every optimizer; β1 = 0 occurs so that m = Δ exactly and a bf16 tie in Δ
// becomes a tie in the stored moment.
struct Hyper {
  float lr, beta1, beta2, eps, weight_decay, nesterov_lr, momentum, alpha;
  std::int64_t tau_cut;
  core::ZeroGatePolicy on_zero_gate;
  std::uint64_t seed;
};

inline rc::Gen<Hyper> gen_hyper() {
  const auto log_uniform = [](int lo, int hi) {
    return rc::gen::map(rc::gen::inRange(lo * 64, hi * 64 + 1),
                        [](int k) { return std::exp2(static_cast<float>(k) / 64); });
  };
  return rc::gen::build<Hyper>(
      rc::gen::set(&Hyper::lr, log_uniform(-14, 0)),
      rc::gen::set(&Hyper::beta1, rc::gen::weightedOneOf<float>(
                                      {{1, rc::gen::just(0.0f)}, {4, rc::gen::element(0.5f, 0.9f, 0.95f, 0.99f)}})),
      rc::gen::set(&Hyper::beta2, rc::gen::element(0.9f, 0.95f, 0.99f, 0.999f, 0.9999f)),
      rc::gen::set(&Hyper::eps, log_uniform(-40, -10)),
      rc::gen::set(&Hyper::weight_decay,
                   rc::gen::weightedOneOf<float>({{1, rc::gen::just(0.0f)}, {1, log_uniform(-10, -1)}})),
      rc::gen::set(&Hyper::nesterov_lr, log_uniform(-4, 0)),
      rc::gen::set(&Hyper::momentum, rc::gen::element(0.0f, 0.5f, 0.9f, 0.99f)),
      rc::gen::set(&Hyper::alpha, rc::gen::weightedOneOf<float>({{1, rc::gen::just(0.0f)}, {3, log_uniform(-6, 1)}})),
      rc::gen::set(&Hyper::tau_cut, rc::gen::inRange<std::int64_t>(1, 65)),
      rc::gen::set(&Hyper::on_zero_gate, rc::gen::element(core::ZeroGatePolicy::apply, core::ZeroGatePolicy::skip)),
      rc::gen::set(&Hyper::seed, rc::gen::arbitrary<std::uint64_t>()));
}

inline fastpath::StepConfig step_config(core::OptimizerKind kind, const Hyper& h, fastpath::ParamFormat params,
                                        fastpath::StateFormat state, fastpath::Rounding rounding) {
  fastpath::StepConfig c;
  c.optimizer = kind;
  c.params = params;
  c.state = state;
  c.rounding = rounding;
  c.seed = h.seed;
  c.adam = {h.lr, h.beta1, h.beta2, h.eps, h.weight_decay};
  c.nesterov = {h.nesterov_lr, h.momentum};
  c.alpha = h.alpha;
  c.tau_cut = static_cast<float>(h.tau_cut);
  c.on_zero_gate = h.on_zero_gate;
  return c;
}

// One event on a fresh optimizer: initial parameters, the pseudo-gradient, its staleness.
struct OneStepCase {
  Hyper hyper;
  std::vector<float> theta, grad;
  std::int64_t tau = 0;
};

inline rc::Gen<OneStepCase> gen_one_step_case() {
  return rc::gen::mapcat(rc::gen::pair(gen_size(), gen_hyper()), [](const std::pair<int, Hyper>& p) {
    const auto [n, hyper] = p;
    return rc::gen::build<OneStepCase>(
        rc::gen::set(&OneStepCase::hyper, rc::gen::just(hyper)),
        rc::gen::set(&OneStepCase::theta, rc::gen::container<std::vector<float>>(n, gen_float())),
        rc::gen::set(&OneStepCase::grad, rc::gen::container<std::vector<float>>(n, gen_float())),
        rc::gen::set(&OneStepCase::tau, gen_tau(hyper.tau_cut)));
  });
}

inline void showValue(const OneStepCase& c, std::ostream& os) {
  const Hyper& h = c.hyper;
  os << std::hexfloat << "tau " << c.tau << " lr " << h.lr << " beta1 " << h.beta1 << " beta2 " << h.beta2 << " eps "
     << h.eps << " wd " << h.weight_decay << " nesterov lr " << h.nesterov_lr << " momentum " << h.momentum << " alpha "
     << h.alpha << " tau_cut " << h.tau_cut << " on_zero_gate "
     << (h.on_zero_gate == core::ZeroGatePolicy::skip ? "skip" : "apply") << " seed " << h.seed << "\n";
  for (std::size_t i = 0; i < c.grad.size(); ++i)
    os << "  [" << i << "] theta " << c.theta[i] << " grad " << c.grad[i] << "\n";
  os << std::defaultfloat;
}

}  // namespace cgad::proptests
