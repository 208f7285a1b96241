#include "cgad/bench/cuda_workload.hpp"

#include "cgad/bench/workloads.hpp"
#include "cgad/fastpath/cuda_optimizer.hpp"
#include "cgad/fastpath/detail/cuda_memory.hpp"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <stdexcept>
#include <vector>

namespace cgad::bench {
using fastpath::detail::check;
using DeviceBytes = fastpath::detail::DeviceBuffer<std::byte>;

std::string cuda_unavailable_reason() {
  return fastpath::cuda_unavailable_reason();
}

struct CudaWorkload::Impl {
  fastpath::StepConfig config;
  std::size_t n;
  fastpath::CudaOptimizer optimizer;
  DeviceBytes params, grad, copy_source, copy_target, flush;
  std::size_t flush_bytes;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;

  static std::size_t l2_flush_bytes() {
    int device = 0, l2 = 0;
    check(cudaGetDevice(&device), "cudaGetDevice");
    check(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device), "L2 size");
    return 2 * static_cast<std::size_t>(l2 > 0 ? l2 : (64 << 20));
  }
  Impl(const fastpath::StepConfig& c, std::size_t count)
      : config(c),
        n(count),
        optimizer(c, count),
        params(count * (c.params == fastpath::ParamFormat::bf16 ? 2 : 4) + 16),
        grad(count * 4 + 16),
        copy_source(static_cast<std::size_t>(step_bytes(c, count) / 2) + 16),
        copy_target(static_cast<std::size_t>(step_bytes(c, count) / 2) + 16),
        flush(l2_flush_bytes()),
        flush_bytes(l2_flush_bytes()) {
    check(cudaStreamCreate(&stream), "cudaStreamCreate");
    check(cudaEventCreate(&start), "cudaEventCreate");
    check(cudaEventCreate(&stop), "cudaEventCreate");
    // Parameters 0.5 and a gradient of 2^-10 everywhere: finite, so every timed step applies.
    std::vector<float> host_grad(count, 0x1p-10f);
    check(cudaMemcpy(grad.data(), host_grad.data(), count * 4, cudaMemcpyHostToDevice), "grad upload");
    if (c.params == fastpath::ParamFormat::bf16) {
      std::vector<fastpath::bf16> host(count, fastpath::round_nearest_even_bf16(0.5f));
      check(cudaMemcpy(params.data(), host.data(), count * 2, cudaMemcpyHostToDevice), "params upload");
    } else {
      std::vector<float> host(count, 0.5f);
      check(cudaMemcpy(params.data(), host.data(), count * 4, cudaMemcpyHostToDevice), "params upload");
    }
  }
  ~Impl() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    cudaStreamDestroy(stream);
  }
  template <class Launch>
  double timed(const Launch& launch) {
    check(cudaMemsetAsync(flush.data(), 0, flush_bytes, stream), "L2 flush");
    check(cudaEventRecord(start, stream), "cudaEventRecord");
    launch();
    check(cudaEventRecord(stop, stream), "cudaEventRecord");
    check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float milliseconds = 0;
    check(cudaEventElapsedTime(&milliseconds, start, stop), "cudaEventElapsedTime");
    return milliseconds * 1e-3;
  }
};

CudaWorkload::CudaWorkload(const fastpath::StepConfig& config, std::size_t n) {
  const std::string why = cuda_unavailable_reason();
  if (!why.empty()) throw core::InputError(why);
  impl_ = std::make_unique<Impl>(config, n);
}
CudaWorkload::~CudaWorkload() = default;

double CudaWorkload::time_step() {
  Impl& s = *impl_;
  const double seconds = s.timed([&] {
    if (s.config.params == fastpath::ParamFormat::bf16) {
      s.optimizer.step(reinterpret_cast<fastpath::bf16*>(s.params.data()), s.n,
                       reinterpret_cast<const float*>(s.grad.data()), s.n, 1, 0, s.stream);
    } else {
      s.optimizer.step(reinterpret_cast<float*>(s.params.data()), s.n, reinterpret_cast<const float*>(s.grad.data()),
                       s.n, 1, 0, s.stream);
    }
  });
  if (!s.optimizer.report().applied) throw std::runtime_error("CUDA benchmark step did not apply");
  return seconds;
}

double CudaWorkload::time_copy() {
  Impl& s = *impl_;
  const std::size_t half = static_cast<std::size_t>(step_bytes(s.config, s.n) / 2);
  return s.timed([&] {
    check(cudaMemcpyAsync(s.copy_target.data(), s.copy_source.data(), half, cudaMemcpyDeviceToDevice, s.stream),
          "copy");
  });
}

double CudaWorkload::bytes() const {
  return step_bytes(impl_->config, impl_->n);
}
double CudaWorkload::parameters() const {
  return static_cast<double>(impl_->n);
}

}  // namespace cgad::bench
