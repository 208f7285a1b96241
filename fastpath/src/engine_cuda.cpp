// The CUDA engine of `cgad replay`: parameters live on the device; each event uploads its pseudo-gradient,
// enqueues one step on a stream of our own, and copies the parameters back for the record.
#include "cgad/fastpath/engine.hpp"

#include "cgad/fastpath/cuda_optimizer.hpp"
#include "cgad/fastpath/detail/host_state.hpp"
#include "cgad/core/errors.hpp"

#include "cgad/fastpath/detail/cuda_memory.hpp"

#include <cuda_runtime_api.h>

#include <cstddef>

namespace cgad::fastpath {
namespace {

using detail::check;

class CudaEngine final : public FastpathEngine {
 public:
  CudaEngine(const StepConfig& config, FastpathParams params)
      : params_(std::move(params)),
        n_(params_.size()),
        stream_(new_stream()),
        optimizer_(config, params_.tensor_sizes(), stream_),
        device_params_(param_bytes()),
        device_grad_(n_) {
    check(cudaMemcpy(device_params_.data(), host_params(), param_bytes(), cudaMemcpyHostToDevice), "params upload");
  }
  ~CudaEngine() override { cudaStreamDestroy(stream_); }

  StepReport step(std::span<const float> grad, std::int64_t tau, std::size_t fragment) override {
    if (grad.size() > n_) throw core::InputError("pseudo-gradient longer than the parameter vector");
    check(cudaMemcpyAsync(device_grad_.data(), grad.data(), grad.size_bytes(), cudaMemcpyHostToDevice, stream_),
          "grad upload");
    const float* device_grad = device_grad_.data();
    if (params_.bf16.empty()) {
      optimizer_.step(reinterpret_cast<float*>(device_params_.data()), n_, device_grad, grad.size(), tau, fragment,
                      stream_);
    } else {
      optimizer_.step(reinterpret_cast<bf16*>(device_params_.data()), n_, device_grad, grad.size(), tau, fragment,
                      stream_);
    }
    const StepReport report = optimizer_.report(stream_);
    check(cudaMemcpy(host_params(), device_params_.data(), param_bytes(), cudaMemcpyDeviceToHost), "params download");
    return report;
  }
  void advance_round() override { optimizer_.advance_round(stream_); }
  const FastpathParams& params() override { return params_; }
  std::vector<std::string> buffer_names() const override { return optimizer_.buffer_names(); }
  void read_buffer(const std::string& name, std::span<float> out) override {
    optimizer_.read_buffer(name, out, stream_);
  }
  std::vector<core::StateCounter> counters() override { return optimizer_.counters(stream_); }

 private:
  static cudaStream_t new_stream() {
    cudaStream_t stream = nullptr;
    check(cudaStreamCreate(&stream), "cudaStreamCreate");
    return stream;
  }

  void* host_params() { return params_.bf16.empty() ? static_cast<void*>(params_.fp32.data()) : params_.bf16.data(); }
  std::size_t param_bytes() const { return params_.bf16.empty() ? n_ * sizeof(float) : n_ * sizeof(bf16); }

  FastpathParams params_;
  std::size_t n_;
  cudaStream_t stream_;  // before the optimizer, which is built on it
  CudaOptimizer optimizer_;
  detail::DeviceBuffer<std::byte> device_params_;  // fp32 or bf16, as params_
  detail::DeviceBuffer<float> device_grad_;
};

}  // namespace

std::unique_ptr<FastpathEngine> make_cuda_engine(const StepConfig& config, FastpathParams params) {
  if (!cuda_device_available()) {
    throw core::InputError("--device cuda: " + cuda_unavailable_reason());
  }
  return std::make_unique<CudaEngine>(config, std::move(params));
}

}  // namespace cgad::fastpath
