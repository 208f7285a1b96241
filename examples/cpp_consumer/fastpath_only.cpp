// One CGAD step with 8-bit state on 1000 fp32 parameters, through the installed cgad::fastpath alone (the README's
// library example). Exit status 0 when the step was applied and moved the parameters, so a test can run it.
#include <cgad/fastpath/fastpath.hpp>

#include <span>
#include <vector>

int main() {
  cgad::fastpath::StepConfig c;
  c.params = cgad::fastpath::ParamFormat::fp32;
  c.state = cgad::fastpath::StateFormat::q8;
  cgad::fastpath::CpuOptimizer opt(c, 1000, 1);
  std::vector<float> p(1000, 1.0f), g(1000, 0.25f);
  const auto report = opt.step(std::span<float>(p), std::span<const float>(g), 3);
  return report.applied && p[0] < 1.0f ? 0 : 1;
}
