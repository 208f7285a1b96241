// What cgad computes on inputs where fusing a·b + c into one fma changes the result, as hexfloats ("cgad" lines), and
// one such formula of this program's own (the "canary" lines). The install test (cmake/test_install_consumer.cmake)
// builds it twice: in cgad's build, with -ffp-contract=off (proptests/install/CMakeLists.txt), and from the installed
// package with -ffp-contract=fast -mfma (CMakeLists.txt here). Every cgad line must be the same in both and the canary
// must differ: a user's own code is contracted, while core's, the reference's and the fast path's arithmetic is
// compiled in cgad's libraries, with cgad's flags (docs/design.md §2, "Which flags are usage requirements").
#include <cgad/core/gate.hpp>
#include <cgad/core/hyperparams.hpp>
#include <cgad/core/optimizer_config.hpp>
#include <cgad/fastpath/fastpath.hpp>
#include <cgad/reference/optimizers.hpp>

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

namespace {

namespace core = cgad::core;
namespace fastpath = cgad::fastpath;
namespace reference = cgad::reference;

// A fixed sequence in [-2, 2), each value exact in float, from a seed the compiler cannot fold (volatile): the canary
// must be computed at run time, where the fma contraction happens. The sequence is the same in both builds: its
// product (by 2^-22) and difference are exact, contracted or not.
volatile std::uint64_t seed = 0x9E3779B97F4A7C15u;
std::vector<double> inputs(std::size_t n, std::uint64_t salt) {
  std::uint64_t x = seed ^ salt;
  std::vector<double> out(n);
  for (double& v : out) {
    x = x * 6364136223846793005u + 1442695040888963407u;
    v = static_cast<double>(x >> 40) * 0x1p-22 - 2;
  }
  return out;
}
template <class Real>
std::vector<Real> as(const std::vector<double>& xs) {
  return std::vector<Real>(xs.begin(), xs.end());
}

// One line: the tag, what it is, and each value as a hexfloat (long double holds every float and double exactly).
template <class Real>
void print(const char* tag, const std::string& what, std::span<const Real> xs) {
  std::printf("%s %s:", tag, what.c_str());
  for (const Real x : xs) std::printf(" %La", static_cast<long double>(x));
  std::printf("\n");
}

// Every reference optimizer in Real, 12 events with staleness 0..4 and weight decay: θ and every state buffer.
template <class Real>
void reference_optimizers(const char* type) {
  for (const auto& [name, kind] : core::kOptimizerNames) {
    core::OptimizerConfig<Real> config;
    config.optimizer = kind;
    config.adam.weight_decay = Real(0.01);
    if (kind == core::OptimizerKind::pa_cgad) config.fragments = 2;
    const std::size_t n = 16;
    const auto optimizer = reference::make_optimizer(config, n);
    std::vector<Real> theta = as<Real>(inputs(n, 1));
    for (int s = 0; s < 12; ++s) {
      const std::size_t f = static_cast<std::size_t>(s) % optimizer->layout().fragments();
      const std::vector<Real> grad = as<Real>(inputs(optimizer->layout().size(f), 100 + s));
      optimizer->apply(theta, {grad, s % 5, f});
      optimizer->advance_round();
    }
    const std::string what = "reference<" + std::string(type) + "> " + std::string(name);
    print<Real>("cgad", what + " theta", theta);
    for (const auto& buffer : optimizer->buffers()) print<Real>("cgad", what + " " + buffer.name, buffer.values);
  }
}

// The gate (cosine and exponential) at τ = 0..33.
template <class Real>
void gate(const char* type) {
  for (const core::GateKind kind : {core::GateKind::cosine, core::GateKind::exponential}) {
    const core::GateParams<Real> gate{kind, Real(0.2), Real(32)};
    std::vector<Real> sigma, gamma;
    for (int tau = 0; tau <= 33; ++tau) {
      sigma.push_back(core::sigma(Real(tau), gate));
      gamma.push_back(core::gamma(Real(tau), gate));
    }
    const std::string what = "gate<" + std::string(type) + "> kind " + std::to_string(static_cast<int>(kind));
    print<Real>("cgad", what + " sigma", sigma);
    print<Real>("cgad", what + " gamma", gamma);
  }
}

// The validation's decisions at the learning rate's limit (AdamHyper's defaults are parsed: float and double).
template <class Real>
void validation(const char* type) {
  for (const double lr : {1e-3, 0x1p38, 0x1.0000000000001p38}) {
    core::AdamHyper<Real> hyper;
    hyper.lr = Real(lr);
    hyper.weight_decay = Real(1e-12);
    bool accepted = true;
    try {
      core::validate_range(hyper);
    } catch (const core::InputError&) {
      accepted = false;
    }
    std::printf("cgad validate_range<%s> lr %a: %s\n", type, lr, accepted ? "accepted" : "refused");
  }
}

// The bound on the Adam term at β2 = RN(β1²), where β1² − β2 is only the rounding error of β1·β1.
void adam_term_bound() {
  std::vector<double> bounds;
  for (const double beta1 : {0.9, 0.99, 0.95, 0.3, 0.7, 0.123456789}) {
    bounds.push_back(core::adam_term_bound(beta1, beta1 * beta1, 1e-300));
  }
  bounds.push_back(core::adam_term_bound(0.9, 0.999, 1e-8));
  print<double>("cgad", "adam_term_bound", bounds);
}

// The fast path's step (fp32 parameters and state; bf16 parameters and q8 state), 6 CGAD events.
void fast_path() {
  for (const bool narrow : {false, true}) {
    fastpath::StepConfig config;
    config.params = narrow ? fastpath::ParamFormat::bf16 : fastpath::ParamFormat::fp32;
    config.state = narrow ? fastpath::StateFormat::q8 : fastpath::StateFormat::fp32;
    config.adam.weight_decay = 0.01f;
    const std::size_t n = 300;
    fastpath::CpuOptimizer optimizer(config, n, 1);
    const std::vector<float> start = as<float>(inputs(n, 2));
    std::vector<float> fp32 = start;
    std::vector<fastpath::bf16> bf16(n);
    for (std::size_t i = 0; i < n; ++i) bf16[i] = fastpath::round_nearest_even_bf16(start[i]);
    for (int s = 0; s < 6; ++s) {
      const std::vector<float> grad = as<float>(inputs(n, 200 + s));
      if (narrow) {
        optimizer.step(std::span<fastpath::bf16>(bf16), grad, s % 4);
      } else {
        optimizer.step(std::span<float>(fp32), grad, s % 4);
      }
    }
    if (narrow) {
      for (std::size_t i = 0; i < n; ++i) fp32[i] = fastpath::to_float(bf16[i]);
    }
    const std::string what = narrow ? "fastpath bf16/q8" : "fastpath fp32/fp32";
    print<float>("cgad", what + " params", fp32);
    for (const std::string& name : optimizer.buffer_names()) {
      std::vector<float> values(n);
      optimizer.read_buffer(name, values);
      print<float>("cgad", what + " " + name, values);
    }
  }
}

// The canary: the reference Adam's first moment β1·m + (1 − β1)·g, written in this program, whose compiler may fuse
// it into one fma.
template <class Real>
void canary(const char* type) {
  const std::vector<double> m = inputs(64, 7), g = inputs(64, 8);
  const Real beta1 = Real(0.9);
  std::vector<Real> out;
  for (std::size_t i = 0; i < m.size(); ++i) out.push_back(beta1 * Real(m[i]) + (Real(1) - beta1) * Real(g[i]));
  print<Real>("canary", std::string("first moment<") + type + ">", out);
}

}  // namespace

int main() {
  reference_optimizers<float>("float");
  reference_optimizers<double>("double");
  gate<float>("float");
  gate<double>("double");
  gate<long double>("long double");
  validation<float>("float");
  validation<double>("double");
  adam_term_bound();
  fast_path();
  canary<float>("float");
  canary<double>("double");
  return 0;
}
