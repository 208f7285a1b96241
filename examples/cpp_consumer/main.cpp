// One CGAD event through the installed fast path (fp32 parameters and state) and the installed reference (MPFR at
// 256 bits): both apply it and move the parameters the same way. Exit status 0 when they do, so a test can run it.
#include <cgad/fastpath/fastpath.hpp>
#include <cgad/reference/optimizers.hpp>

#include <span>
#include <vector>

int main() {
  using cgad::reference::mpfr_real;
  cgad::reference::set_working_precision_bits(256);
  cgad::fastpath::StepConfig c;
  c.params = cgad::fastpath::ParamFormat::fp32;
  cgad::fastpath::CpuOptimizer fast(c, 1000, 1);
  std::vector<float> p(1000, 1.0f), g(1000, 0.25f);
  const auto fast_report = fast.step(std::span<float>(p), std::span<const float>(g), 3);

  const auto ideal = cgad::reference::make_optimizer(cgad::fastpath::reference_config<mpfr_real>(c), 1000);
  std::vector<mpfr_real> q(1000, mpfr_real(1)), h(1000, mpfr_real("0.25"));
  const auto ideal_report = ideal->apply(std::span<mpfr_real>(q), {std::span<const mpfr_real>(h), 3, 0});
  return fast_report.applied && ideal_report.applied && p[0] < 1.0f && q[0] < 1 ? 0 : 1;
}
