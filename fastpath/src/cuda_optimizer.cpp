#include "cgad/fastpath/cuda_optimizer.hpp"

#include "cuda_kernels.hpp"

#include "cgad/fastpath/q8_maps.hpp"
#include "cgad/fastpath/state_file.hpp"
#include "cgad/reference/errors.hpp"

#include "cgad/fastpath/detail/cuda_memory.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <optional>
#include <stdexcept>

namespace cgad::fastpath {
using detail::check;
using detail::DeviceBuffer;

bool cuda_device_available() { return cuda_unavailable_reason().empty(); }

std::string cuda_unavailable_reason() {
  int devices = 0;
  const cudaError_t status = cudaGetDeviceCount(&devices);
  if (status != cudaSuccess) return std::string("no usable CUDA device (") + cudaGetErrorString(status) + ")";
  if (devices == 0) return "no CUDA device in this machine";
  return {};
}

struct CudaOptimizer::Impl {
  StepPlanner planner;
  StateFormat format;
  int moments;
  DeviceBuffer<float> fp32[2];
  DeviceBuffer<bf16> half[2];
  DeviceBuffer<std::uint8_t> codes[2];
  DeviceBuffer<float> absmax[2];
  DeviceBuffer<Q8Map> maps{2};
  DeviceBuffer<StepChunk> chunks;
  DeviceBuffer<unsigned long long> first_refused{2};  // first NaN/Inf, first overflowing element
  unsigned long long* host_first_refused = nullptr;  // pinned (2), written by an async copy after each step
  cudaEvent_t done = nullptr;
  std::optional<StepPlanner::Plan> pending;
  std::int64_t pending_tau = 0;
  StepReport last_report;

  Impl(const StepConfig& config, std::vector<std::size_t> tensor_sizes)
      : planner(config, std::move(tensor_sizes)), format(config.state), moments(planner.moments()) {
    // The initial state is HostState::zeros, uploaded.
    const HostState zeros = HostState::zeros(planner);
    for (int k = 0; k < moments; ++k) {
      fp32[k] = DeviceBuffer<float>(zeros.fp32[k].size());
      half[k] = DeviceBuffer<bf16>(zeros.half[k].size());
      codes[k] = DeviceBuffer<std::uint8_t>(zeros.codes[k].size());
      absmax[k] = DeviceBuffer<float>(zeros.absmax[k].size());
      fp32[k].upload(zeros.fp32[k]);
      half[k].upload(zeros.half[k]);
      codes[k].upload(zeros.codes[k]);
      absmax[k].upload(zeros.absmax[k]);
    }
    const Q8Semantics semantics = config.q8_semantics;
    maps.upload({dynamic_map(Q8MapKind::signed_map, semantics), dynamic_map(Q8MapKind::unsigned_map, semantics)});
    chunks = DeviceBuffer<StepChunk>(planner.chunks().size());
    chunks.upload(planner.chunks());
    check(cudaMallocHost(reinterpret_cast<void**>(&host_first_refused), 2 * sizeof(unsigned long long)),
          "cudaMallocHost");
    host_first_refused[0] = host_first_refused[1] = cuda::kNoRefusal;
    check(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cudaEventCreate");
  }
  ~Impl() {
    if (done != nullptr) {
      cudaEventSynchronize(done);
      cudaEventDestroy(done);
    }
    if (host_first_refused != nullptr) cudaFreeHost(host_first_refused);
  }

  // Waits for the pending step, if any, and records whether it applied.
  void resolve() {
    if (!pending) return;
    check(cudaEventSynchronize(done), "cudaEventSynchronize");
    last_report = pending->report;
    // The CPU backend's order of reports (cpu_optimizer.cpp): NaN/Inf, then a zero-gate skip, then overflow.
    if (host_first_refused[0] != cuda::kNoRefusal) {
      last_report.applied = false;
      last_report.reason = reference::SkipReason::nonfinite_gradient;
      last_report.nonfinite_index = static_cast<std::size_t>(host_first_refused[0]);
      last_report.tau_effective = pending_tau;
      last_report.sigma = 0.0f;
    } else if (!pending->report.applied) {
      planner.commit_zero_gate_skip(*pending);
    } else if (host_first_refused[1] != cuda::kNoRefusal) {
      last_report.applied = false;
      last_report.reason = reference::SkipReason::overflowing_gradient;
      last_report.nonfinite_index = static_cast<std::size_t>(host_first_refused[1]);
    } else {
      planner.commit(*pending);
    }
    pending.reset();
  }

  void step(std::size_t params_size, float* params_fp32, bf16* params_bf16, const float* grad, std::size_t grad_size,
            std::int64_t tau, std::size_t fragment, cudaStream_t stream) {
    resolve();
    StepPlanner::Plan plan = planner.plan(params_size, grad_size, tau, fragment);
    StepArgs& a = plan.args;
    a.grad = grad;
    a.params_fp32 = params_fp32;
    a.params_bf16 = params_bf16;
    for (int k = 0; k < moments; ++k) {
      MomentView& view = a.moment[k];
      switch (format) {
        case StateFormat::fp32: view.fp32 = fp32[k].data(); break;
        case StateFormat::bf16: view.half = half[k].data(); break;
        case StateFormat::q8:
          view.codes = codes[k].data();
          view.absmax = absmax[k].data();
          view.fallback = fp32[k].data();
          break;
      }
      view.map = maps.data() + (planner.adam_family() && k == 1 ? 1 : 0);
    }
    // The scan runs even when the gate skips the event: the reference reports NaN/Inf first.
    // The overflow rule of every optimizer (the Adam family's, and since issue 16 Nesterov's and SDM's, whose σ is
    // 1 or 1/(1 + τ)); σ = 0 where the event is not applied, so that only NaN/Inf is looked for.
    const float sigma = plan.report.applied ? plan.report.sigma : 0.0f;
    check(cudaMemsetAsync(first_refused.data(), 0xFF, 2 * sizeof(unsigned long long), stream), "cudaMemsetAsync");
    check(cuda::launch_refusal_scan(grad, grad_size, sigma, first_refused.data(), stream), "refusal scan launch");
    if (plan.report.applied) {
      const std::size_t first = planner.chunk_begin(fragment);
      check(cuda::launch_fused_step(a, chunks.data() + first, planner.chunk_begin(fragment + 1) - first,
                                    first_refused.data(), stream),
            "fused step launch");
    }
    check(cudaMemcpyAsync(host_first_refused, first_refused.data(), 2 * sizeof(unsigned long long),
                          cudaMemcpyDeviceToHost, stream),
          "cudaMemcpyAsync");
    check(cudaEventRecord(done, stream), "cudaEventRecord");
    pending = plan;
    pending_tau = tau;
  }
};

namespace {
// Checked before any member of Impl allocates device memory.
void require_device() {
  const std::string why = cuda_unavailable_reason();
  if (!why.empty()) throw reference::InputError("the CUDA backend is unavailable: " + why);
}
}  // namespace

CudaOptimizer::CudaOptimizer(const StepConfig& config, std::size_t parameters)
    : CudaOptimizer(config, std::vector<std::size_t>{parameters}) {}
CudaOptimizer::CudaOptimizer(const StepConfig& config, std::vector<std::size_t> tensor_sizes)
    : impl_((require_device(), std::make_unique<Impl>(config, std::move(tensor_sizes)))) {}
CudaOptimizer::~CudaOptimizer() = default;

void CudaOptimizer::step(float* params, std::size_t params_size, const float* grad, std::size_t grad_size,
                         std::int64_t tau, std::size_t fragment, CUstream_st* stream) {
  if (config().params != ParamFormat::fp32) {
    throw reference::InputError("this optimizer stores bf16 parameters; it was given fp32 ones");
  }
  impl_->step(params_size, params, nullptr, grad, grad_size, tau, fragment, stream);
}

void CudaOptimizer::step(bf16* params, std::size_t params_size, const float* grad, std::size_t grad_size,
                         std::int64_t tau, std::size_t fragment, CUstream_st* stream) {
  if (config().params != ParamFormat::bf16) {
    throw reference::InputError("this optimizer stores fp32 parameters; it was given bf16 ones");
  }
  impl_->step(params_size, nullptr, params, grad, grad_size, tau, fragment, stream);
}

StepReport CudaOptimizer::report() {
  impl_->resolve();
  return impl_->last_report;
}

void CudaOptimizer::advance_round() {
  impl_->resolve();
  impl_->planner.advance_round();
}

const StepConfig& CudaOptimizer::config() const { return impl_->planner.config(); }
std::size_t CudaOptimizer::parameters() const { return impl_->planner.parameters(); }

std::vector<reference::StateCounter> CudaOptimizer::counters() {
  impl_->resolve();
  return impl_->planner.counters();
}

std::vector<std::string> CudaOptimizer::buffer_names() const { return impl_->planner.buffer_names(); }

void CudaOptimizer::read_buffer(std::string_view name, std::span<float> out) {
  const int k = impl_->planner.buffer_to_read(name, out.size());
  download().read(impl_->planner, k, out);
}

void CudaOptimizer::save(const std::filesystem::path& path) {
  write_state_file(path, impl_->planner, download());
}

void CudaOptimizer::load(const std::filesystem::path& path) {
  // The file is read and checked completely on the host before anything on the device changes.
  LoadedState loaded = read_state_file(path, impl_->planner, download());
  for (int k = 0; k < impl_->moments; ++k) {
    impl_->fp32[k].upload(loaded.state.fp32[k]);
    impl_->half[k].upload(loaded.state.half[k]);
    impl_->codes[k].upload(loaded.state.codes[k]);
    impl_->absmax[k].upload(loaded.state.absmax[k]);
  }
  impl_->planner.set_raw_counters(std::move(loaded.counters));
}

HostState CudaOptimizer::download() {
  impl_->resolve();
  HostState host;
  host.format = impl_->format;
  host.moments = impl_->moments;
  for (int k = 0; k < host.moments; ++k) {
    host.fp32[k] = impl_->fp32[k].download();
    host.half[k] = impl_->half[k].download();
    host.codes[k] = impl_->codes[k].download();
    host.absmax[k] = impl_->absmax[k].download();
  }
  return host;
}

}  // namespace cgad::fastpath
