// The CUDA engine of `cgad replay`: parameters live on the device; each event uploads its pseudo-gradient,
// enqueues one step on a stream of our own, and copies the parameters back for the record.
#include "fastpath_engine.hpp"

#include "cgad/fastpath/cuda_optimizer.hpp"
#include "cgad/fastpath/host_state.hpp"
#include "cgad/reference/errors.hpp"

#include <cuda_runtime_api.h>

#include <stdexcept>

namespace cgad::cli {
namespace {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw std::runtime_error(std::string("CUDA ") + what + ": " + cudaGetErrorString(status));
}

class DeviceBytes {
 public:
  explicit DeviceBytes(std::size_t bytes) {
    if (bytes != 0) check(cudaMalloc(&data_, bytes), "cudaMalloc");
  }
  ~DeviceBytes() { cudaFree(data_); }
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
  void* get() const { return data_; }

 private:
  void* data_ = nullptr;
};

class CudaEngine final : public FastpathEngine {
 public:
  CudaEngine(const fastpath::StepConfig& config, FastpathParams params)
      : params_(std::move(params)),
        n_(params_.size()),
        optimizer_(config, params_.tensor_sizes()),
        planner_(config, params_.tensor_sizes()),
        device_params_(n_ * (params_.bf16.empty() ? sizeof(float) : sizeof(fastpath::bf16))),
        device_grad_(n_ * sizeof(float)) {
    check(cudaStreamCreate(&stream_), "cudaStreamCreate");
    check(cudaMemcpy(device_params_.get(), host_params(), param_bytes(), cudaMemcpyHostToDevice), "params upload");
  }
  ~CudaEngine() override { cudaStreamDestroy(stream_); }

  fastpath::StepReport step(std::span<const float> grad, std::int64_t tau, std::size_t fragment) override {
    if (grad.size() > n_) throw reference::InputError("pseudo-gradient longer than the parameter vector");
    check(cudaMemcpyAsync(device_grad_.get(), grad.data(), grad.size_bytes(), cudaMemcpyHostToDevice, stream_),
          "grad upload");
    const auto* device_grad = static_cast<const float*>(device_grad_.get());
    if (params_.bf16.empty()) {
      optimizer_.step(static_cast<float*>(device_params_.get()), n_, device_grad, grad.size(), tau, fragment, stream_);
    } else {
      optimizer_.step(static_cast<fastpath::bf16*>(device_params_.get()), n_, device_grad, grad.size(), tau, fragment,
                      stream_);
    }
    const fastpath::StepReport report = optimizer_.report();
    check(cudaMemcpy(host_params(), device_params_.get(), param_bytes(), cudaMemcpyDeviceToHost), "params download");
    return report;
  }
  void advance_round() override { optimizer_.advance_round(); }
  const FastpathParams& params() override { return params_; }
  std::vector<std::string> buffer_names() const override {
    return planner_.adam_family() ? std::vector<std::string>{"m", "v"} : std::vector<std::string>{"b"};
  }
  void read_buffer(const std::string& name, std::span<float> out) override {
    const auto names = buffer_names();
    const auto it = std::find(names.begin(), names.end(), name);
    if (it == names.end()) throw reference::InputError("no state buffer named '" + name + "'");
    optimizer_.download().read(planner_, static_cast<int>(it - names.begin()), out);
  }
  std::vector<reference::StateCounter> counters() override { return optimizer_.counters(); }

 private:
  void* host_params() { return params_.bf16.empty() ? static_cast<void*>(params_.fp32.data()) : params_.bf16.data(); }
  std::size_t param_bytes() const {
    return params_.bf16.empty() ? n_ * sizeof(float) : n_ * sizeof(fastpath::bf16);
  }

  FastpathParams params_;
  std::size_t n_;
  fastpath::CudaOptimizer optimizer_;
  fastpath::StepPlanner planner_;  // the state's layout, to dequantize downloaded buffers
  DeviceBytes device_params_, device_grad_;
  cudaStream_t stream_ = nullptr;
};

}  // namespace

std::unique_ptr<FastpathEngine> make_cuda_engine(const fastpath::StepConfig& config, FastpathParams params) {
  if (!fastpath::cuda_device_available()) {
    throw reference::InputError("--device cuda: " + fastpath::cuda_unavailable_reason());
  }
  return std::make_unique<CudaEngine>(config, std::move(params));
}

}  // namespace cgad::cli
