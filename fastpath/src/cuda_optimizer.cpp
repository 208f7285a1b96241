#include "cgad/fastpath/cuda_optimizer.hpp"

#include "cuda_kernels.hpp"

#include "cgad/fastpath/detail/q8_maps.hpp"
#include "cgad/fastpath/detail/replan.hpp"
#include "cgad/fastpath/state_file.hpp"
#include "cgad/core/errors.hpp"
#include "cgad/fastpath/detail/tensor_table.hpp"

#include "cgad/fastpath/detail/cuda_memory.hpp"

#include <cuda_runtime_api.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

namespace cgad::fastpath {
using detail::DeviceBuffer;

bool cuda_device_available() {
  return cuda_unavailable_reason().empty();
}

std::string cuda_unavailable_reason() {
  int devices = 0;
  const cudaError_t status = cudaGetDeviceCount(&devices);
  if (status != cudaSuccess) return std::string("no usable CUDA device (") + cudaGetErrorString(status) + ")";
  if (devices == 0) return "no CUDA device in this machine";
  return {};
}

namespace {

// The device's counters are one int64 array: t[P], last_sync[P], round, steps (the count's bits).
std::vector<std::int64_t> pack(const StepPlanner::Counters& c) {
  std::vector<std::int64_t> out(c.t);
  out.insert(out.end(), c.last_sync.begin(), c.last_sync.end());
  out.push_back(c.round);
  out.push_back(static_cast<std::int64_t>(c.steps));
  return out;
}
StepPlanner::Counters unpack(const std::vector<std::int64_t>& packed, std::size_t fragments) {
  StepPlanner::Counters c;
  c.t.assign(packed.begin(), packed.begin() + static_cast<std::ptrdiff_t>(fragments));
  c.last_sync.assign(packed.begin() + static_cast<std::ptrdiff_t>(fragments),
                     packed.begin() + static_cast<std::ptrdiff_t>(2 * fragments));
  c.round = packed[2 * fragments];
  c.steps = static_cast<std::uint64_t>(packed[2 * fragments + 1]);
  return c;
}

// Whether `stream` is capturing. A stream that cannot be used now (the legacy default stream while a blocking
// stream captures: cudaErrorStreamCaptureImplicit) is refused as the caller's mistake, not latched as a fault; the
// query's error is cleared so that it is not taken for a later call's.
bool capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  const cudaError_t query = cudaStreamIsCapturing(stream, &status);
  if (query != cudaSuccess) {
    (void)cudaGetLastError();
    throw core::InputError(std::string("this stream cannot be used now (cudaStreamIsCapturing: ") +
                           cudaGetErrorString(query) + ")");
  }
  return status != cudaStreamCaptureStatusNone;
}

// The ordering event, created with the optimizer and destroyed with it (also when its constructor throws).
struct Event {
  cudaEvent_t handle = nullptr;
  Event() { detail::check(cudaEventCreateWithFlags(&handle, cudaEventDisableTiming), "cudaEventCreate"); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event() {
    if (handle != nullptr) cudaEventDestroy(handle);
  }
};

}  // namespace

struct CudaOptimizer::Impl {
  StepPlanner planner;
  StateFormat format;
  int moments;
  DeviceBuffer<float> fp32[2];
  DeviceBuffer<bf16> bf16_values[2];
  DeviceBuffer<std::uint8_t> codes[2];
  DeviceBuffer<float> absmax[2];
  DeviceBuffer<Q8Map> maps{2};
  DeviceBuffer<StepChunk> chunks;
  // The table step's chunk → tensor map (tensor_table.hpp), on the host to cut launches and on the device.
  std::vector<std::size_t> tensor_begin, chunk_tensor;
  DeviceBuffer<std::uint64_t> device_chunk_tensor;
  DeviceBuffer<float> age_sigma;
  DeviceBuffer<std::int64_t> counters;
  DeviceBuffer<cuda::StepRecord> record{1};
  // Each step's record, copied at its end into slot (ticket − 1) mod kReportHistory, for report(ticket).
  DeviceBuffer<cuda::StepRecord> history{kReportHistory};
  std::uint64_t tickets = 0;
  ScheduleConstants constants;  // age_sigma in device memory
  bool stepped = false;         // record holds a step or a preview
  // The event preview() scanned, which step_previewed() steps.
  struct Previewed {
    std::int64_t tau;
    std::size_t fragment;
  };
  std::optional<Previewed> previewed;
  // Every call orders itself after the optimizer's previous work, whichever stream that ran on: `last` is recorded
  // after each call's work (outside a stream capture) and a call on another stream waits for it on the device.
  Event last;
  cudaStream_t last_stream = nullptr;
  // Set by the first failed CUDA call: from then on every call refuses with it (the device state is lost).
  std::string fault;

  Impl(const StepConfig& config, std::vector<std::size_t> tensor_sizes, cudaStream_t stream)
      : planner(config, std::move(tensor_sizes)), format(config.state), moments(planner.moments()) {
    // The initial state is HostState::zeros (a q8 zero is the map's code of 0, not byte 0), uploaded.
    const HostState zeros = HostState::zeros(planner);
    for (int k = 0; k < moments; ++k) {
      fp32[k] = DeviceBuffer<float>(zeros.fp32[k].size());
      bf16_values[k] = DeviceBuffer<bf16>(zeros.bf16_values[k].size());
      codes[k] = DeviceBuffer<std::uint8_t>(zeros.codes[k].size());
      absmax[k] = DeviceBuffer<float>(zeros.absmax[k].size());
    }
    upload_state(zeros, stream);
    guard(maps.upload_async({planner.q8_map(0), planner.q8_map(1)}, stream), "map upload");
    chunks = DeviceBuffer<StepChunk>(planner.chunks().size());
    guard(chunks.upload_async(planner.chunks(), stream), "chunk upload");
    tensor_begin = tensor_begins(planner.tensor_sizes());
    chunk_tensor = chunk_tensors(planner, tensor_begin);
    const std::vector<std::uint64_t> map(chunk_tensor.begin(), chunk_tensor.end());
    device_chunk_tensor = DeviceBuffer<std::uint64_t>(map.size());
    guard(device_chunk_tensor.upload_async(map, stream), "chunk map upload");
    age_sigma = DeviceBuffer<float>(planner.age_sigma().size());
    guard(age_sigma.upload_async(planner.age_sigma(), stream), "sigma table upload");
    constants = planner.schedule_constants();
    constants.age_sigma = age_sigma.data();
    counters = DeviceBuffer<std::int64_t>(2 * config.fragments + 2);
    guard(counters.upload_async(pack(planner.raw_counters()), stream), "counter upload");
    guard(cudaMemsetAsync(record.data(), 0, record.bytes(), stream), "record initialization");
    // The uploads' host sources are temporaries: wait, rather than rely on the driver having staged them.
    wait(stream);
    finish(stream);
  }
  ~Impl() {
    // No kernel of ours may run on memory being freed. (A graph launched with our steps is the caller's to wait for;
    // cudaFree waits for the device in any case.)
    if (fault.empty()) cudaEventSynchronize(last.handle);
  }

  // A failed call latches the optimizer's fault and throws it.
  void guard(cudaError_t status, const std::string& what) {
    if (status == cudaSuccess) return;
    fault = what + ": " + cudaGetErrorString(status);
    throw std::runtime_error("CUDA " + fault + "; this CUDA optimizer is unusable from now on");
  }

  // Before a call's work on `stream`: refuses once faulted, surfaces a fault of earlier work as such (not as the
  // failure of this call), and orders the work after the optimizer's previous work.
  void start(cudaStream_t stream) {
    if (!fault.empty()) {
      throw std::runtime_error("this CUDA optimizer is unusable: an earlier call failed (" + fault +
                               "); its device state is lost, load a saved state into a new optimizer");
    }
    if (capturing(stream)) return;  // ordering inside a graph is the graph's
    const cudaError_t earlier = cudaEventQuery(last.handle);
    if (earlier != cudaErrorNotReady) {
      guard(earlier, "the device failed work enqueued earlier (this optimizer's or other work in the process)");
    }
    if (stream != last_stream) guard(cudaStreamWaitEvent(stream, last.handle, 0), "cudaStreamWaitEvent");
  }
  // After it: marks the optimizer's latest work (not inside a capture: the event would name a graph node).
  void finish(cudaStream_t stream) {
    if (capturing(stream)) return;
    guard(cudaEventRecord(last.handle, stream), "cudaEventRecord");
    last_stream = stream;
  }
  // Reads block the host, which a stream capture cannot.
  void start_read(cudaStream_t stream, const char* what) {
    if (capturing(stream)) {
      throw core::InputError(std::string(what) +
                             " cannot run inside a stream capture (it waits for the "
                             "device); call it on a stream that is not capturing");
    }
    start(stream);
  }
  void wait(cudaStream_t stream) {
    guard(cudaStreamSynchronize(stream), "the device failed work enqueued on this stream (cudaStreamSynchronize)");
  }

  CounterView counter_view() const {
    const std::size_t fragments = planner.config().fragments;
    std::int64_t* base = counters.data();
    return {base, base + fragments, base + 2 * fragments, reinterpret_cast<std::uint64_t*>(base + 2 * fragments + 1)};
  }

  void upload_state(const HostState& state, cudaStream_t stream) {
    for (int k = 0; k < moments; ++k) {
      guard(fp32[k].upload_async(state.fp32[k], stream), "state upload");
      guard(bf16_values[k].upload_async(state.bf16_values[k], stream), "state upload");
      guard(codes[k].upload_async(state.codes[k], stream), "state upload");
      guard(absmax[k].upload_async(state.absmax[k], stream), "state upload");
    }
  }

  // The device's state on the host, and its counters into the planner (whose own are not kept up to date by
  // steps, which count on the device).
  HostState download(cudaStream_t stream) {
    start_read(stream, "reading the CUDA optimizer's state");
    HostState host;
    host.format = format;
    host.moments = moments;
    for (int k = 0; k < moments; ++k) {
      guard(fp32[k].download_async(host.fp32[k], stream), "state download");
      guard(bf16_values[k].download_async(host.bf16_values[k], stream), "state download");
      guard(codes[k].download_async(host.codes[k], stream), "state download");
      guard(absmax[k].download_async(host.absmax[k], stream), "state download");
    }
    take_counters(stream);
    return host;
  }
  void pull_counters(cudaStream_t stream) {
    start_read(stream, "reading the CUDA optimizer's counters");
    take_counters(stream);
  }
  // Copies the counters after what is enqueued on `stream`, waits for all of it, and hands them to the planner.
  void take_counters(cudaStream_t stream) {
    std::vector<std::int64_t> packed;
    guard(counters.download_async(packed, stream), "counter download");
    wait(stream);
    finish(stream);
    planner.set_raw_counters(unpack(packed, planner.config().fragments));
  }

  std::uint64_t step(std::size_t params_size, float* params_fp32, bf16* params_bf16, const float* grad,
                     std::size_t grad_size, std::int64_t tau, std::size_t fragment, cudaStream_t stream) {
    StepPlanner::Plan plan = planner.prepare(params_size, grad_size, tau, fragment);  // InputError before any work
    start(stream);
    previewed.reset();
    StepArgs& a = plan.args;
    a.grad = grad;
    a.params_fp32 = params_fp32;
    a.params_bf16 = params_bf16;
    bind_state(a);
    const CounterView view = counter_view();
    cuda::StepRecord* r = record.data();
    // The scan runs even when the gate skips the event: the reference reports NaN/Inf first.
    guard(cuda::launch_schedule(constants, view, plan.event, r, stream), "schedule launch");
    guard(cuda::launch_refusal_scan(grad, grad_size, r, stream), "refusal scan launch");
    const std::size_t first = planner.chunk_begin(fragment);
    guard(cuda::launch_fused_step(a, chunks.data() + first, planner.chunk_begin(fragment + 1) - first, r, nullptr,
                                  stream),
          "fused step launch");
    guard(cuda::launch_commit(constants, view, r, nullptr, stream), "commit launch");
    return end_step(stream);
  }

  // After a step's commit: its record into the history, its ticket.
  std::uint64_t end_step(cudaStream_t stream) {
    guard(cudaMemcpyAsync(history.data() + tickets % kReportHistory, record.data(), sizeof(cuda::StepRecord),
                          cudaMemcpyDeviceToDevice, stream),
          "report copy");
    ++tickets;
    stepped = true;
    finish(stream);
    return tickets;
  }

  // A table step's launches (at most agent::kTableBatch tensors each) with the tensors' pointers.
  struct Launches {
    std::vector<TableLaunch> launches;
    std::vector<agent::TensorBatch> batches;
  };
  Launches table_batches(std::span<void* const> params, std::span<const float* const> grads, std::size_t fragment) {
    Launches out;
    out.launches = table_launches(chunk_tensor, planner.chunk_begin(fragment), planner.chunk_begin(fragment + 1),
                                  agent::kTableBatch);
    out.batches.resize(out.launches.size());
    for (std::size_t b = 0; b < out.launches.size(); ++b) {
      agent::TensorBatch& batch = out.batches[b];
      batch.first_tensor = out.launches[b].first_tensor;
      for (std::size_t k = out.launches[b].first_tensor; k < out.launches[b].end_tensor; ++k) {
        const std::size_t at = k - out.launches[b].first_tensor;
        batch.begin[at] = tensor_begin[k];
        batch.grad[at] = grads[k];
        batch.params[at] = params.empty() ? nullptr : params[k];
      }
    }
    return out;
  }

  // The tables' checks (InputError before any work; a preview has no parameters), and the plan.
  StepPlanner::Plan table_plan(const std::span<void* const>* params, std::span<const float* const> grads,
                               std::int64_t tau, std::size_t fragment) {
    const auto [touched_first, touched_last] = touched_tensors(planner, chunk_tensor, fragment);
    const std::size_t tensors = tensor_begin.size() - 1;
    check_table("gradient", grads, tensors, touched_first, touched_last, planner.tensor_sizes());
    if (params != nullptr)
      check_table("parameter", *params, tensors, touched_first, touched_last, planner.tensor_sizes());
    const std::size_t grad_size = fragment < planner.config().fragments ? planner.fragment_size(fragment) : 0;
    return planner.prepare(planner.parameters(), grad_size, tau, fragment);
  }

  // The table step's first half: the schedule, then the scan once per batch (every scan before any update, so that
  // each update launch sees the whole event's refusal), then the refusal published into the veto.
  void enqueue_preview(const StepPlanner::Plan& plan, const Launches& l, unsigned* veto, bool publish,
                       cudaStream_t stream) {
    const CounterView view = counter_view();
    cuda::StepRecord* r = record.data();
    guard(cuda::launch_schedule(constants, view, plan.event, r, stream), "schedule launch");
    for (std::size_t b = 0; b < l.launches.size(); ++b) {
      const TableLaunch& t = l.launches[b];
      guard(cuda::launch_table_refusal_scan(chunks.data() + t.first_chunk, device_chunk_tensor.data() + t.first_chunk,
                                            t.end_chunk - t.first_chunk, plan.offset, l.batches[b], r, stream),
            "refusal scan launch");
    }
    if (publish) guard(cuda::launch_publish_refusal(r, veto, stream), "refusal publication launch");
  }
  // Its second half: the update once per batch, and the commit, neither doing anything while the veto is set.
  std::uint64_t enqueue_update(StepPlanner::Plan& plan, const Launches& l, const unsigned* veto, cudaStream_t stream) {
    StepArgs& a = plan.args;
    bind_state(a);
    cuda::StepRecord* r = record.data();
    for (std::size_t b = 0; b < l.launches.size(); ++b) {
      const TableLaunch& t = l.launches[b];
      guard(cuda::launch_table_fused_step(a, chunks.data() + t.first_chunk, device_chunk_tensor.data() + t.first_chunk,
                                          t.end_chunk - t.first_chunk, l.batches[b], r, veto, stream),
            "fused step launch");
    }
    guard(cuda::launch_commit(constants, counter_view(), r, veto, stream), "commit launch");
    return end_step(stream);
  }

  std::uint64_t step_table(std::span<void* const> params, std::span<const float* const> grads, std::int64_t tau,
                           std::size_t fragment, cudaStream_t stream) {
    StepPlanner::Plan plan = table_plan(&params, grads, tau, fragment);
    const Launches l = table_batches(params, grads, fragment);
    start(stream);
    previewed.reset();
    enqueue_preview(plan, l, nullptr, false, stream);
    return enqueue_update(plan, l, nullptr, stream);
  }

  void preview(std::span<const float* const> grads, std::int64_t tau, std::size_t fragment, unsigned* veto,
               cudaStream_t stream) {
    const StepPlanner::Plan plan = table_plan(nullptr, grads, tau, fragment);
    const Launches l = table_batches({}, grads, fragment);
    start(stream);
    enqueue_preview(plan, l, veto, true, stream);
    previewed = Previewed{tau, fragment};
    stepped = true;
    finish(stream);
  }

  std::uint64_t step_previewed(std::span<void* const> params, std::span<const float* const> grads, const unsigned* veto,
                               cudaStream_t stream) {
    if (!previewed) throw core::InputError("step_previewed() needs a preview() of the event first");
    StepPlanner::Plan plan = table_plan(&params, grads, previewed->tau, previewed->fragment);
    const Launches l = table_batches(params, grads, previewed->fragment);
    start(stream);
    previewed.reset();
    return enqueue_update(plan, l, veto, stream);
  }

  // The state buffers' device pointers and the q8 maps into a step's arguments.
  void bind_state(StepArgs& a) {
    bind_moments(*this, a);
    for (int k = 0; k < moments; ++k) a.moment[k].map = maps.data() + (planner.adam_family() && k == 1 ? 1 : 0);
  }

  StepReport report(cudaStream_t stream) {
    start_read(stream, "report()");
    if (!stepped) return StepReport{};
    return read_record(record.data(), stream).own;
  }

  CudaStepReport report(std::uint64_t ticket, cudaStream_t stream) {
    if (ticket == 0 || ticket > tickets) {
      throw core::InputError("no step " + std::to_string(ticket) + " was enqueued (the last is " +
                             std::to_string(tickets) + ")");
    }
    if (tickets - ticket >= kReportHistory) {
      throw core::InputError("the report of step " + std::to_string(ticket) + " is gone: a CUDA optimizer keeps the " +
                             std::to_string(kReportHistory) + " latest (the last is " + std::to_string(tickets) + ")");
    }
    start_read(stream, "report()");
    return read_record(history.data() + (ticket - 1) % kReportHistory, stream);
  }

  CudaStepReport read_record(const cuda::StepRecord* at, cudaStream_t stream) {
    cuda::StepRecord host;
    guard(cudaMemcpyAsync(&host, at, sizeof host, cudaMemcpyDeviceToHost, stream), "record download");
    wait(stream);
    finish(stream);
    const unsigned long long index =
        host.outcome == StepOutcome::nonfinite ? host.first_refused[0] : host.first_refused[1];
    return {StepPlanner::report_of(host.event, host.scheduled, host.outcome, index), host.vetoed};
  }

  void set_hyperparameters(const StepConfig& next, cudaStream_t stream) {
    if (capturing(stream)) {
      throw core::InputError(
          "set_hyperparameters cannot run inside a stream capture (the captured steps keep the hyperparameters "
          "they were captured with); set them before capturing, or capture again");
    }
    StepPlanner replanned = replan(planner, next);  // InputError, and nothing changed
    start(stream);
    if (replanned.age_sigma() != planner.age_sigma()) {
      // A new buffer rather than a write into the old, which steps already enqueued may still read; the upload's
      // source is host memory that the next call may free, so it is waited for (a new alpha or tau_cut only).
      DeviceBuffer<float> table(replanned.age_sigma().size());
      guard(table.upload_async(replanned.age_sigma(), stream), "sigma table upload");
      wait(stream);
      age_sigma = std::move(table);
    }
    planner = std::move(replanned);
    constants = planner.schedule_constants();
    constants.age_sigma = age_sigma.data();
    finish(stream);
  }

  void advance_round(cudaStream_t stream) {
    start(stream);
    guard(cuda::launch_advance_round(counter_view().round, stream), "advance_round launch");
    finish(stream);
  }

  // A state read and checked completely on the host (state_file.hpp) onto the device.
  void adopt(LoadedState loaded, cudaStream_t stream) {
    start_read(stream, "loading a state");  // it waits for its uploads
    planner.set_raw_counters(std::move(loaded.counters));
    upload_state(loaded.state, stream);
    guard(counters.upload_async(pack(planner.raw_counters()), stream), "counter upload");
    wait(stream);  // the sources are the loaded file's host copies
    finish(stream);
  }
};

namespace {
// Checked before any member of Impl allocates device memory (an allocation would also invalidate a capture).
void require_device(cudaStream_t stream) {
  const std::string why = cuda_unavailable_reason();
  if (!why.empty()) throw core::InputError("the CUDA backend is unavailable: " + why);
  if (capturing(stream)) throw core::InputError("a CUDA optimizer cannot be built inside a stream capture");
}
}  // namespace

struct CudaEventVeto::Impl {
  DeviceBuffer<unsigned> word{1};
  Event done;  // recorded by finish() after an event's steps
  cudaStream_t last_stream = nullptr;
};

CudaEventVeto::CudaEventVeto(CUstream_st* stream) {
  require_device(stream);
  impl_ = std::make_unique<Impl>();
  reset(stream);
  detail::check(cudaStreamSynchronize(stream), "clearing the event veto");
}
CudaEventVeto::~CudaEventVeto() = default;
void CudaEventVeto::reset(CUstream_st* stream) {
  if (!capturing(stream) && stream != impl_->last_stream) {
    detail::check(cudaStreamWaitEvent(stream, impl_->done.handle, 0), "ordering the event veto (cudaStreamWaitEvent)");
  }
  detail::check(cudaMemsetAsync(impl_->word.data(), 0, impl_->word.bytes(), stream), "clearing the event veto");
}
void CudaEventVeto::finish(CUstream_st* stream) {
  if (capturing(stream)) return;  // the event would name a graph node
  detail::check(cudaEventRecord(impl_->done.handle, stream), "recording the event veto's use (cudaEventRecord)");
  impl_->last_stream = stream;
}
unsigned* CudaEventVeto::device_word() const {
  return impl_->word.data();
}

CudaOptimizer::CudaOptimizer(const StepConfig& config, std::size_t parameters, CUstream_st* stream)
    : CudaOptimizer(config, std::vector<std::size_t>{parameters}, stream) {}
CudaOptimizer::CudaOptimizer(const StepConfig& config, std::vector<std::size_t> tensor_sizes, CUstream_st* stream)
    : impl_((require_device(stream), std::make_unique<Impl>(config, std::move(tensor_sizes), stream))) {}
CudaOptimizer::~CudaOptimizer() = default;

std::uint64_t CudaOptimizer::step(float* params, std::size_t params_size, const float* grad, std::size_t grad_size,
                                  std::int64_t tau, std::size_t fragment, CUstream_st* stream) {
  if (config().params != ParamFormat::fp32) {
    throw core::InputError("this optimizer stores bf16 parameters; it was given fp32 ones");
  }
  return impl_->step(params_size, params, nullptr, grad, grad_size, tau, fragment, stream);
}

std::uint64_t CudaOptimizer::step(bf16* params, std::size_t params_size, const float* grad, std::size_t grad_size,
                                  std::int64_t tau, std::size_t fragment, CUstream_st* stream) {
  if (config().params != ParamFormat::bf16) {
    throw core::InputError("this optimizer stores fp32 parameters; it was given bf16 ones");
  }
  return impl_->step(params_size, nullptr, params, grad, grad_size, tau, fragment, stream);
}

namespace {
// A table of parameters of the optimizer's format, as the untyped table the launches carry.
template <class T>
std::vector<void*> param_table(const StepConfig& config, std::span<T* const> params) {
  constexpr ParamFormat given = std::is_same_v<T, float> ? ParamFormat::fp32 : ParamFormat::bf16;
  if (config.params != given) {
    throw core::InputError(std::string("this optimizer stores ") + std::string(to_string(config.params)) +
                           " parameters; it was given " + std::string(to_string(given)) + " ones");
  }
  return {params.begin(), params.end()};
}
}  // namespace

std::uint64_t CudaOptimizer::step(std::span<float* const> params, std::span<const float* const> grads, std::int64_t tau,
                                  std::size_t fragment, CUstream_st* stream) {
  return impl_->step_table(param_table(config(), params), grads, tau, fragment, stream);
}

std::uint64_t CudaOptimizer::step(std::span<bf16* const> params, std::span<const float* const> grads, std::int64_t tau,
                                  std::size_t fragment, CUstream_st* stream) {
  return impl_->step_table(param_table(config(), params), grads, tau, fragment, stream);
}

void CudaOptimizer::preview(std::span<const float* const> grads, std::int64_t tau, std::size_t fragment,
                            CudaEventVeto* veto, CUstream_st* stream) {
  impl_->preview(grads, tau, fragment, veto == nullptr ? nullptr : veto->device_word(), stream);
}

std::uint64_t CudaOptimizer::step_previewed(std::span<float* const> params, std::span<const float* const> grads,
                                            const CudaEventVeto* veto, CUstream_st* stream) {
  return impl_->step_previewed(param_table(config(), params), grads, veto == nullptr ? nullptr : veto->device_word(),
                               stream);
}

std::uint64_t CudaOptimizer::step_previewed(std::span<bf16* const> params, std::span<const float* const> grads,
                                            const CudaEventVeto* veto, CUstream_st* stream) {
  return impl_->step_previewed(param_table(config(), params), grads, veto == nullptr ? nullptr : veto->device_word(),
                               stream);
}

CudaStepReport CudaOptimizer::report(std::uint64_t ticket, CUstream_st* stream) {
  return impl_->report(ticket, stream);
}
std::uint64_t CudaOptimizer::last_ticket() const {
  return impl_->tickets;
}

StepReport CudaOptimizer::report(CUstream_st* stream) {
  return impl_->report(stream);
}
void CudaOptimizer::advance_round(CUstream_st* stream) {
  impl_->advance_round(stream);
}

const StepConfig& CudaOptimizer::config() const {
  return impl_->planner.config();
}
std::size_t CudaOptimizer::parameters() const {
  return impl_->planner.parameters();
}

std::vector<core::StateCounter> CudaOptimizer::counters(CUstream_st* stream) {
  impl_->pull_counters(stream);
  return impl_->planner.counters();
}

std::vector<std::string> CudaOptimizer::buffer_names() const {
  return impl_->planner.buffer_names();
}

void CudaOptimizer::read_buffer(std::string_view name, std::span<float> out, CUstream_st* stream) {
  const int k = impl_->planner.buffer_to_read(name, out.size());
  impl_->download(stream).read(impl_->planner, k, out);
}

void CudaOptimizer::save(const std::filesystem::path& path, CUstream_st* stream) {
  const HostState state = impl_->download(stream);
  write_state_file(path, impl_->planner, state);
}

void CudaOptimizer::load(const std::filesystem::path& path, CUstream_st* stream) {
  // The file is read and checked completely on the host before anything on the device changes.
  const HostState shape = HostState::zeros(impl_->planner);
  impl_->adopt(read_state_file(path, impl_->planner, shape), stream);
}

std::vector<unsigned char> CudaOptimizer::save_bytes(CUstream_st* stream) {
  const HostState state = impl_->download(stream);
  return state_bytes(impl_->planner, state);
}

void CudaOptimizer::load_bytes(std::span<const unsigned char> bytes, CUstream_st* stream) {
  const HostState shape = HostState::zeros(impl_->planner);
  impl_->adopt(parse_state_bytes(bytes, "the fast-path state", impl_->planner, shape), stream);
}

void CudaOptimizer::set_hyperparameters(const StepConfig& config, CUstream_st* stream) {
  impl_->set_hyperparameters(config, stream);
}

HostState CudaOptimizer::download(CUstream_st* stream) {
  return impl_->download(stream);
}

}  // namespace cgad::fastpath
