#include "cgad/fastpath/engine.hpp"

#include "cgad/fastpath/fastpath.hpp"
#include "cgad/core/errors.hpp"

namespace cgad::fastpath {
namespace {

class CpuEngine final : public FastpathEngine {
 public:
  CpuEngine(const StepConfig& config, FastpathParams params)
      : params_(std::move(params)), optimizer_(config, params_.tensor_sizes()) {}

  StepReport step(std::span<const float> grad, std::int64_t tau, std::size_t fragment) override {
    if (!params_.bf16.empty()) return optimizer_.step(std::span<bf16>(params_.bf16), grad, tau, fragment);
    return optimizer_.step(std::span<float>(params_.fp32), grad, tau, fragment);
  }
  void advance_round() override { optimizer_.advance_round(); }
  const FastpathParams& params() override { return params_; }
  std::vector<std::string> buffer_names() const override { return optimizer_.buffer_names(); }
  void read_buffer(const std::string& name, std::span<float> out) override { optimizer_.read_buffer(name, out); }
  std::vector<core::StateCounter> counters() override { return optimizer_.counters(); }

 private:
  FastpathParams params_;
  CpuOptimizer optimizer_;
};

}  // namespace

std::unique_ptr<FastpathEngine> make_fastpath_engine(const std::string& device, const StepConfig& config,
                                                     FastpathParams params) {
  if (device == "cpu") return std::make_unique<CpuEngine>(config, std::move(params));
  if (device == "cuda") return make_cuda_engine(config, std::move(params));
  throw core::InputError("device must be cpu or cuda, got '" + device + "'");
}

}  // namespace cgad::fastpath
