#include "cgad/fastpath/cuda_optimizer.hpp"

#include "cuda_stepper_impl.hpp"

#include "cgad/core/errors.hpp"
#include "cgad/fastpath/detail/host_state.hpp"
#include "cgad/fastpath/state_file.hpp"

#include <utility>

namespace cgad::fastpath {
using detail::DeviceBuffer;

struct CudaOptimizer::Impl {
  CudaTableStepper stepper;
  CudaTableStepper::Impl& s;  // the stepper's device side, whose order this state's transfers keep
  StateFormat format;
  int moments;
  DeviceBuffer<float> fp32[2];
  DeviceBuffer<bf16> bf16_values[2];
  DeviceBuffer<std::uint8_t> codes[2];
  DeviceBuffer<float> absmax[2];
  // One TensorState per tensor over the buffers above (as CpuOptimizer::tensor_state over its HostState), which the
  // table steps pass; the moments' views over the whole buffers, which the contiguous step passes.
  std::vector<TensorState> states;
  MomentView whole[2];

  Impl(const StepConfig& config, std::vector<std::size_t> tensor_sizes, cudaStream_t stream)
      : stepper(config, std::move(tensor_sizes), stream),
        s(*stepper.impl_),
        format(config.state),
        moments(s.planner.moments()) {
    // The initial state is HostState::zeros (a q8 zero is the map's code of 0, not byte 0), uploaded.
    const HostState zeros = HostState::zeros(s.planner);
    for (int k = 0; k < moments; ++k) {
      fp32[k] = DeviceBuffer<float>(zeros.fp32[k].size());
      bf16_values[k] = DeviceBuffer<bf16>(zeros.bf16_values[k].size());
      codes[k] = DeviceBuffer<std::uint8_t>(zeros.codes[k].size());
      absmax[k] = DeviceBuffer<float>(zeros.absmax[k].size());
    }
    StepArgs views;
    bind_moments(*this, views);  // the one place that says which buffers each state format steps
    for (int k = 0; k < moments; ++k) whole[k] = views.moment[k];
    const std::size_t tensors = s.planner.tensor_sizes().size();
    for (std::size_t k = 0; k < tensors; ++k) states.push_back(tensor_state(k));
    s.start(stream);
    upload_state(zeros, stream);
    s.wait(stream);  // the sources are host temporaries
    s.finish(stream);
  }

  ~Impl() {
    // No step of ours may run on the buffers being freed (the stepper's own destructor waits only after them).
    if (s.fault.empty()) cudaEventSynchronize(s.last.handle);
  }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  // Tensor k's own state within the whole buffers: its values from its first element, its absmax (q8) or fallback
  // moments (under min_q8_size) from its first slot.
  TensorState tensor_state(std::size_t k) {
    const TensorStateShape shape = stepper.shape(k);
    const std::size_t at = s.tensor_begin[k], slot = s.first_slot[k];
    TensorState out;
    out.moments = shape.moments;
    out.fp32_fallback = shape.kind == "fp32-fallback";
    for (int m = 0; m < shape.moments; ++m) {
      if (out.fp32_fallback) {
        out.fp32[m] = {fp32[m].data() + slot, shape.values};
      } else if (format == StateFormat::fp32) {
        out.fp32[m] = {fp32[m].data() + at, shape.values};
      } else if (format == StateFormat::bf16) {
        out.bf16_values[m] = {bf16_values[m].data() + at, shape.values};
      } else {
        out.codes[m] = {codes[m].data() + at, shape.values};
        out.absmax[m] = {absmax[m].data() + slot, shape.absmax};
      }
    }
    return out;
  }

  std::pair<std::size_t, std::size_t> touched(std::size_t fragment) const {
    return touched_tensors(s.planner, s.chunk_tensor, fragment);
  }

  void upload_state(const HostState& state, cudaStream_t stream) {
    for (int k = 0; k < moments; ++k) {
      s.guard(fp32[k].upload_async(state.fp32[k], stream), "state upload");
      s.guard(bf16_values[k].upload_async(state.bf16_values[k], stream), "state upload");
      s.guard(codes[k].upload_async(state.codes[k], stream), "state upload");
      s.guard(absmax[k].upload_async(state.absmax[k], stream), "state upload");
    }
  }

  // The device's state on the host, and its counters into the planner.
  HostState download(cudaStream_t stream) {
    s.start_read(stream, "reading the CUDA optimizer's state");
    HostState host;
    host.format = format;
    host.moments = moments;
    for (int k = 0; k < moments; ++k) {
      s.guard(fp32[k].download_async(host.fp32[k], stream), "state download");
      s.guard(bf16_values[k].download_async(host.bf16_values[k], stream), "state download");
      s.guard(codes[k].download_async(host.codes[k], stream), "state download");
      s.guard(absmax[k].download_async(host.absmax[k], stream), "state download");
    }
    s.take_counters(stream);
    return host;
  }

  // A state read and checked completely on the host (state_file.hpp) onto the device.
  void adopt(LoadedState loaded, cudaStream_t stream) {
    s.start_read(stream, "loading a state");  // it waits for its uploads
    upload_state(loaded.state, stream);
    s.wait(stream);  // the sources are the loaded file's host copies
    s.finish(stream);
    stepper.set_raw_counters(std::move(loaded.counters), stream);
  }
};

CudaOptimizer::CudaOptimizer(const StepConfig& config, std::size_t parameters, CUstream_st* stream)
    : CudaOptimizer(config, std::vector<std::size_t>{parameters}, stream) {}
CudaOptimizer::CudaOptimizer(const StepConfig& config, std::vector<std::size_t> tensor_sizes, CUstream_st* stream)
    : impl_(std::make_unique<Impl>(config, std::move(tensor_sizes), stream)) {}
CudaOptimizer::~CudaOptimizer() = default;

std::uint64_t CudaOptimizer::step(float* params, std::size_t params_size, const float* grad, std::size_t grad_size,
                                  std::int64_t tau, std::size_t fragment, CUstream_st* stream) {
  if (config().params != ParamFormat::fp32) {
    throw core::InputError("this optimizer stores bf16 parameters; it was given fp32 ones");
  }
  return impl_->s.step_contiguous(params_size, params, nullptr, grad, grad_size, tau, fragment, impl_->whole, stream);
}

std::uint64_t CudaOptimizer::step(bf16* params, std::size_t params_size, const float* grad, std::size_t grad_size,
                                  std::int64_t tau, std::size_t fragment, CUstream_st* stream) {
  if (config().params != ParamFormat::bf16) {
    throw core::InputError("this optimizer stores fp32 parameters; it was given bf16 ones");
  }
  return impl_->s.step_contiguous(params_size, nullptr, params, grad, grad_size, tau, fragment, impl_->whole, stream);
}

std::uint64_t CudaOptimizer::step(std::span<float* const> params, std::span<const float* const> grads, std::int64_t tau,
                                  std::size_t fragment, CUstream_st* stream) {
  check_full_table(params, grads, impl_->stepper.tensor_sizes(), impl_->touched(fragment));
  return impl_->stepper.step(params, grads, impl_->states, tau, fragment, stream);
}

std::uint64_t CudaOptimizer::step(std::span<bf16* const> params, std::span<const float* const> grads, std::int64_t tau,
                                  std::size_t fragment, CUstream_st* stream) {
  check_full_table(params, grads, impl_->stepper.tensor_sizes(), impl_->touched(fragment));
  return impl_->stepper.step(params, grads, impl_->states, tau, fragment, stream);
}

void CudaOptimizer::preview(std::span<const float* const> grads, std::int64_t tau, std::size_t fragment,
                            CudaEventVeto* veto, CUstream_st* stream) {
  const auto [first, last] = impl_->touched(fragment);
  check_table("gradient", grads, impl_->stepper.tensor_sizes().size(), first, last, impl_->stepper.tensor_sizes());
  impl_->stepper.preview(grads, tau, fragment, veto, stream);
}

std::uint64_t CudaOptimizer::step_previewed(std::span<float* const> params, std::span<const float* const> grads,
                                            const CudaEventVeto* veto, CUstream_st* stream) {
  if (impl_->s.previewed) {
    check_full_table(params, grads, impl_->stepper.tensor_sizes(), impl_->touched(impl_->s.previewed->fragment));
  }
  return impl_->stepper.step_previewed(params, grads, impl_->states, veto, stream);
}

std::uint64_t CudaOptimizer::step_previewed(std::span<bf16* const> params, std::span<const float* const> grads,
                                            const CudaEventVeto* veto, CUstream_st* stream) {
  if (impl_->s.previewed) {
    check_full_table(params, grads, impl_->stepper.tensor_sizes(), impl_->touched(impl_->s.previewed->fragment));
  }
  return impl_->stepper.step_previewed(params, grads, impl_->states, veto, stream);
}

CudaStepReport CudaOptimizer::report(std::uint64_t ticket, CUstream_st* stream) {
  return impl_->stepper.report(ticket, stream);
}
std::uint64_t CudaOptimizer::last_ticket() const {
  return impl_->stepper.last_ticket();
}
StepReport CudaOptimizer::report(CUstream_st* stream) {
  return impl_->stepper.report(stream);
}
void CudaOptimizer::advance_round(CUstream_st* stream) {
  impl_->stepper.advance_round(stream);
}

const StepConfig& CudaOptimizer::config() const {
  return impl_->stepper.config();
}
std::size_t CudaOptimizer::parameters() const {
  return impl_->stepper.parameters();
}

std::vector<core::StateCounter> CudaOptimizer::counters(CUstream_st* stream) {
  return impl_->stepper.counters(stream);
}

std::vector<std::string> CudaOptimizer::buffer_names() const {
  return impl_->s.planner.buffer_names();
}

void CudaOptimizer::read_buffer(std::string_view name, std::span<float> out, CUstream_st* stream) {
  const int k = impl_->s.planner.buffer_to_read(name, out.size());
  impl_->download(stream).read(impl_->s.planner, k, out);
}

void CudaOptimizer::save(const std::filesystem::path& path, CUstream_st* stream) {
  const HostState state = impl_->download(stream);
  write_state_file(path, impl_->s.planner, state);
}

void CudaOptimizer::load(const std::filesystem::path& path, CUstream_st* stream) {
  // The file is read and checked completely on the host before anything on the device changes.
  const HostState shape = HostState::zeros(impl_->s.planner);
  impl_->adopt(read_state_file(path, impl_->s.planner, shape), stream);
}

std::vector<unsigned char> CudaOptimizer::save_bytes(CUstream_st* stream) {
  const HostState state = impl_->download(stream);
  return state_bytes(impl_->s.planner, state);
}

void CudaOptimizer::load_bytes(std::span<const unsigned char> bytes, CUstream_st* stream) {
  const HostState shape = HostState::zeros(impl_->s.planner);
  impl_->adopt(parse_state_bytes(bytes, "the fast-path state", impl_->s.planner, shape), stream);
}

void CudaOptimizer::set_hyperparameters(const StepConfig& config, CUstream_st* stream) {
  impl_->stepper.set_hyperparameters(config, stream);
}

HostState CudaOptimizer::download(CUstream_st* stream) {
  return impl_->download(stream);
}

}  // namespace cgad::fastpath
