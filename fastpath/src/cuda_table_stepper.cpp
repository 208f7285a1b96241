#include "cuda_stepper_impl.hpp"

#include "cgad/core/errors.hpp"
#include "cgad/fastpath/detail/replan.hpp"

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

bool cuda_capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  const cudaError_t query = cudaStreamIsCapturing(stream, &status);
  if (query != cudaSuccess) {
    (void)cudaGetLastError();
    throw core::InputError(std::string("this stream cannot be used now (cudaStreamIsCapturing: ") +
                           cudaGetErrorString(query) + ")");
  }
  return status != cudaStreamCaptureStatusNone;
}

void require_cuda_device(cudaStream_t stream) {
  const std::string why = cuda_unavailable_reason();
  if (!why.empty()) throw core::InputError("the CUDA backend is unavailable: " + why);
  if (cuda_capturing(stream)) throw core::InputError("a CUDA optimizer cannot be built inside a stream capture");
}

CudaEvent::CudaEvent() {
  detail::check(cudaEventCreateWithFlags(&handle, cudaEventDisableTiming), "cudaEventCreate");
}
CudaEvent::~CudaEvent() {
  if (handle != nullptr) cudaEventDestroy(handle);
}

namespace {

// The device's counters are one int64 array: t[P], last_sync[P], round, steps (the count's bits).
std::vector<std::int64_t> pack(const StepCounters& c) {
  std::vector<std::int64_t> out(c.t);
  out.insert(out.end(), c.last_sync.begin(), c.last_sync.end());
  out.push_back(c.round);
  out.push_back(static_cast<std::int64_t>(c.steps));
  return out;
}
StepCounters unpack(const std::vector<std::int64_t>& packed, std::size_t fragments) {
  StepCounters c;
  c.t.assign(packed.begin(), packed.begin() + static_cast<std::ptrdiff_t>(fragments));
  c.last_sync.assign(packed.begin() + static_cast<std::ptrdiff_t>(fragments),
                     packed.begin() + static_cast<std::ptrdiff_t>(2 * fragments));
  c.round = packed[2 * fragments];
  c.steps = static_cast<std::uint64_t>(packed[2 * fragments + 1]);
  return c;
}

}  // namespace

CudaTableStepper::Impl::Impl(const StepConfig& config, std::vector<std::size_t> tensor_sizes, cudaStream_t stream)
    : planner(config, std::move(tensor_sizes)) {
  guard(maps.upload_async({planner.q8_map(0), planner.q8_map(1)}, stream), "map upload");  // the optimizer's own
  chunks = DeviceBuffer<StepChunk>(planner.chunks().size());
  guard(chunks.upload_async(planner.chunks(), stream), "chunk upload");
  tensor_begin = tensor_begins(planner.tensor_sizes());
  chunk_tensor = chunk_tensors(planner, tensor_begin);
  first_chunk = tensor_first_chunks(chunk_tensor, planner.tensor_sizes().size());
  first_slot = tensor_first_slots(planner, chunk_tensor, planner.tensor_sizes().size());
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

CudaTableStepper::Impl::~Impl() {
  // No kernel of ours may run on memory being freed. (A graph launched with our steps is the caller's to wait for;
  // cudaFree waits for the device in any case.)
  if (fault.empty()) cudaEventSynchronize(last.handle);
}

void CudaTableStepper::Impl::guard(cudaError_t status, const std::string& what) {
  if (status == cudaSuccess) return;
  fault = what + ": " + cudaGetErrorString(status);
  throw std::runtime_error("CUDA " + fault + "; this CUDA optimizer is unusable from now on");
}

void CudaTableStepper::Impl::start(cudaStream_t stream) {
  if (!fault.empty()) {
    throw std::runtime_error("this CUDA optimizer is unusable: an earlier call failed (" + fault +
                             "); its device state is lost, load a saved state into a new optimizer");
  }
  if (cuda_capturing(stream)) return;  // ordering inside a graph is the graph's
  const cudaError_t earlier = cudaEventQuery(last.handle);
  if (earlier != cudaErrorNotReady) {
    guard(earlier, "the device failed work enqueued earlier (this optimizer's or other work in the process)");
  }
  if (stream != last_stream) guard(cudaStreamWaitEvent(stream, last.handle, 0), "cudaStreamWaitEvent");
}

void CudaTableStepper::Impl::finish(cudaStream_t stream) {
  if (cuda_capturing(stream)) return;
  guard(cudaEventRecord(last.handle, stream), "cudaEventRecord");
  last_stream = stream;
}

void CudaTableStepper::Impl::start_read(cudaStream_t stream, const char* what) {
  if (cuda_capturing(stream)) {
    throw core::InputError(std::string(what) +
                           " cannot run inside a stream capture (it waits for the "
                           "device); call it on a stream that is not capturing");
  }
  start(stream);
}

void CudaTableStepper::Impl::wait(cudaStream_t stream) {
  guard(cudaStreamSynchronize(stream), "the device failed work enqueued on this stream (cudaStreamSynchronize)");
}

CounterView CudaTableStepper::Impl::counter_view() const {
  const std::size_t fragments = planner.config().fragments;
  std::int64_t* base = counters.data();
  return {base, base + fragments, base + 2 * fragments, reinterpret_cast<std::uint64_t*>(base + 2 * fragments + 1)};
}

void CudaTableStepper::Impl::take_counters(cudaStream_t stream) {
  std::vector<std::int64_t> packed;
  guard(counters.download_async(packed, stream), "counter download");
  wait(stream);
  finish(stream);
  planner.set_raw_counters(unpack(packed, planner.config().fragments));
}

void CudaTableStepper::Impl::put_counters(StepCounters c, cudaStream_t stream) {
  StepPlanner checked = planner;
  checked.set_raw_counters(std::move(c));  // InputError for counters of another shape, nothing changed
  start_read(stream, "loading counters");
  guard(counters.upload_async(pack(checked.raw_counters()), stream), "counter upload");
  wait(stream);  // the source is a host temporary
  finish(stream);
  planner = std::move(checked);
  previewed.reset();
}

void CudaTableStepper::Impl::bind_maps(StepArgs& a) const {
  for (int k = 0; k < planner.moments(); ++k) a.moment[k].map = maps.data() + (planner.adam_family() && k == 1 ? 1 : 0);
}

std::uint64_t CudaTableStepper::Impl::step_contiguous(std::size_t params_size, float* params_fp32, bf16* params_bf16,
                                                      const float* grad, std::size_t grad_size, std::int64_t tau,
                                                      std::size_t fragment, const MomentView (&whole)[2],
                                                      cudaStream_t stream) {
  StepPlanner::Plan plan = planner.prepare(params_size, grad_size, tau, fragment);  // InputError before any work
  start(stream);
  previewed.reset();
  StepArgs& a = plan.args;
  a.grad = grad;
  a.params_fp32 = params_fp32;
  a.params_bf16 = params_bf16;
  for (int k = 0; k < planner.moments(); ++k) {
    a.moment[k].fp32 = whole[k].fp32;
    a.moment[k].bf16_values = whole[k].bf16_values;
    a.moment[k].codes = whole[k].codes;
    a.moment[k].absmax = whole[k].absmax;
    a.moment[k].fallback = whole[k].fallback;
  }
  bind_maps(a);
  const CounterView view = counter_view();
  cuda::StepRecord* r = record.data();
  // The scan runs even when the gate skips the event: the reference reports NaN/Inf first.
  guard(cuda::launch_schedule(constants, view, plan.event, r, stream), "schedule launch");
  guard(cuda::launch_refusal_scan(grad, grad_size, r, stream), "refusal scan launch");
  const std::size_t first = planner.chunk_begin(fragment);
  guard(
      cuda::launch_fused_step(a, chunks.data() + first, planner.chunk_begin(fragment + 1) - first, r, nullptr, stream),
      "fused step launch");
  guard(cuda::launch_commit(constants, view, r, nullptr, stream), "commit launch");
  return end_step(stream);
}

std::uint64_t CudaTableStepper::Impl::end_step(cudaStream_t stream) {
  guard(cudaMemcpyAsync(history.data() + tickets % kReportHistory, record.data(), sizeof(cuda::StepRecord),
                        cudaMemcpyDeviceToDevice, stream),
        "report copy");
  ++tickets;
  stepped = true;
  finish(stream);
  return tickets;
}

CudaTableStepper::Impl::Launches CudaTableStepper::Impl::table_batches(std::span<void* const> params,
                                                                       std::span<const float* const> grads,
                                                                       std::span<const TensorState> states,
                                                                       std::size_t fragment) const {
  Launches out;
  out.launches = table_launches(chunk_tensor, planner.chunk_begin(fragment), planner.chunk_begin(fragment + 1),
                                agent::kTableBatch);
  for (const TableLaunch& launch : out.launches) {
    out.batches.push_back(table_batch(launch, tensor_begin, first_slot, params, grads, states));
  }
  return out;
}

StepPlanner::Plan CudaTableStepper::Impl::table_plan(const std::span<void* const>* params,
                                                     std::span<const float* const> grads,
                                                     std::span<const TensorState> states, std::int64_t tau,
                                                     std::size_t fragment) {
  const auto touched = touched_tensors(planner, chunk_tensor, fragment);
  if (params != nullptr) {
    check_step_table(*params, grads, planner.tensor_sizes(), touched);
    check_state_shapes(planner, first_chunk, chunk_tensor, states, grads, fragment);
  } else {
    check_table("gradient", grads, planner.tensor_sizes().size(), 1, 0, planner.tensor_sizes());
  }
  const std::size_t grad_size = fragment < planner.config().fragments ? planner.fragment_size(fragment) : 0;
  return planner.prepare(planner.parameters(), grad_size, tau, fragment);
}

void CudaTableStepper::Impl::enqueue_preview(const StepPlanner::Plan& plan, const Launches& l, unsigned* veto,
                                             bool publish, cudaStream_t stream) {
  const CounterView view = counter_view();
  cuda::StepRecord* r = record.data();
  guard(cuda::launch_schedule(constants, view, plan.event, r, stream), "schedule launch");
  // Every scan before any update, so that each update launch sees the whole event's refusal.
  for (std::size_t b = 0; b < l.launches.size(); ++b) {
    const TableLaunch& t = l.launches[b];
    guard(cuda::launch_table_refusal_scan(chunks.data() + t.first_chunk, device_chunk_tensor.data() + t.first_chunk,
                                          t.end_chunk - t.first_chunk, plan.offset, l.batches[b], r, stream),
          "refusal scan launch");
  }
  if (publish) guard(cuda::launch_publish_refusal(r, veto, stream), "refusal publication launch");
}

std::uint64_t CudaTableStepper::Impl::enqueue_update(StepPlanner::Plan& plan, const Launches& l, const unsigned* veto,
                                                     cudaStream_t stream) {
  StepArgs& a = plan.args;
  bind_maps(a);
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

std::uint64_t CudaTableStepper::Impl::step_table(std::span<void* const> params, std::span<const float* const> grads,
                                                 std::span<const TensorState> states, std::int64_t tau,
                                                 std::size_t fragment, cudaStream_t stream) {
  StepPlanner::Plan plan = table_plan(&params, grads, states, tau, fragment);
  const Launches l = table_batches(params, grads, states, fragment);
  start(stream);
  previewed.reset();
  enqueue_preview(plan, l, nullptr, false, stream);
  return enqueue_update(plan, l, nullptr, stream);
}

void CudaTableStepper::Impl::preview(std::span<const float* const> grads, std::int64_t tau, std::size_t fragment,
                                     unsigned* veto, cudaStream_t stream) {
  const StepPlanner::Plan plan = table_plan(nullptr, grads, {}, tau, fragment);
  const Launches l = table_batches({}, grads, {}, fragment);
  start(stream);
  enqueue_preview(plan, l, veto, true, stream);
  previewed = Previewed{tau, fragment};
  stepped = true;
  finish(stream);
}

std::uint64_t CudaTableStepper::Impl::step_previewed(std::span<void* const> params, std::span<const float* const> grads,
                                                     std::span<const TensorState> states, const unsigned* veto,
                                                     cudaStream_t stream) {
  if (!previewed) throw core::InputError("step_previewed() needs a preview() of the event first");
  StepPlanner::Plan plan = table_plan(&params, grads, states, previewed->tau, previewed->fragment);
  const Launches l = table_batches(params, grads, states, previewed->fragment);
  start(stream);
  previewed.reset();
  return enqueue_update(plan, l, veto, stream);
}

StepReport CudaTableStepper::Impl::report(cudaStream_t stream) {
  start_read(stream, "report()");
  if (!stepped) return StepReport{};
  return read_record(record.data(), stream).own;
}

CudaStepReport CudaTableStepper::Impl::report(std::uint64_t ticket, cudaStream_t stream) {
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

CudaStepReport CudaTableStepper::Impl::read_record(const cuda::StepRecord* at, cudaStream_t stream) {
  cuda::StepRecord host;
  guard(cudaMemcpyAsync(&host, at, sizeof host, cudaMemcpyDeviceToHost, stream), "record download");
  wait(stream);
  finish(stream);
  const unsigned long long index =
      host.outcome == StepOutcome::nonfinite ? host.first_refused[0] : host.first_refused[1];
  StepReport own = StepPlanner::report_of(host.event, host.scheduled, host.outcome, index);
  own.invalid_state = host.invalid_state;
  return {own, host.vetoed};
}

void CudaTableStepper::Impl::set_hyperparameters(const StepConfig& next, cudaStream_t stream) {
  if (cuda_capturing(stream)) {
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

void CudaTableStepper::Impl::advance_round(cudaStream_t stream) {
  start(stream);
  guard(cuda::launch_advance_round(counter_view().round, stream), "advance_round launch");
  finish(stream);
}

CudaTableStepper::CudaTableStepper(const StepConfig& config, std::vector<std::size_t> tensor_sizes, CUstream_st* stream)
    : impl_((require_cuda_device(stream), std::make_unique<Impl>(config, std::move(tensor_sizes), stream))) {}
CudaTableStepper::~CudaTableStepper() = default;

namespace {
// A table of parameters of the stepper's format, as the untyped table the launches carry.
template <class T>
std::vector<void*> param_table(const StepConfig& config, std::span<T* const> params) {
  constexpr ParamFormat given = std::is_same_v<T, float> ? ParamFormat::fp32 : ParamFormat::bf16;
  if (config.params != given) {
    throw core::InputError(std::string("this optimizer stores ") + std::string(to_string(config.params)) +
                           " parameters; it was given " + std::string(to_string(given)) + " ones");
  }
  return {params.begin(), params.end()};
}
unsigned* word(CudaEventVeto* veto) {
  return veto == nullptr ? nullptr : veto->device_word();
}
const unsigned* word(const CudaEventVeto* veto) {
  return veto == nullptr ? nullptr : veto->device_word();
}
}  // namespace

std::uint64_t CudaTableStepper::step(std::span<float* const> params, std::span<const float* const> grads,
                                     std::span<const TensorState> states, std::int64_t tau, std::size_t fragment,
                                     CUstream_st* stream) {
  return impl_->step_table(param_table(config(), params), grads, states, tau, fragment, stream);
}
std::uint64_t CudaTableStepper::step(std::span<bf16* const> params, std::span<const float* const> grads,
                                     std::span<const TensorState> states, std::int64_t tau, std::size_t fragment,
                                     CUstream_st* stream) {
  return impl_->step_table(param_table(config(), params), grads, states, tau, fragment, stream);
}
void CudaTableStepper::preview(std::span<const float* const> grads, std::int64_t tau, std::size_t fragment,
                               CudaEventVeto* veto, CUstream_st* stream) {
  impl_->preview(grads, tau, fragment, word(veto), stream);
}
std::uint64_t CudaTableStepper::step_previewed(std::span<float* const> params, std::span<const float* const> grads,
                                               std::span<const TensorState> states, const CudaEventVeto* veto,
                                               CUstream_st* stream) {
  return impl_->step_previewed(param_table(config(), params), grads, states, word(veto), stream);
}
std::uint64_t CudaTableStepper::step_previewed(std::span<bf16* const> params, std::span<const float* const> grads,
                                               std::span<const TensorState> states, const CudaEventVeto* veto,
                                               CUstream_st* stream) {
  return impl_->step_previewed(param_table(config(), params), grads, states, word(veto), stream);
}
StepReport CudaTableStepper::report(CUstream_st* stream) {
  return impl_->report(stream);
}
CudaStepReport CudaTableStepper::report(std::uint64_t ticket, CUstream_st* stream) {
  return impl_->report(ticket, stream);
}
std::uint64_t CudaTableStepper::last_ticket() const {
  return impl_->tickets;
}
void CudaTableStepper::advance_round(CUstream_st* stream) {
  impl_->advance_round(stream);
}
TensorStateShape CudaTableStepper::shape(std::size_t k) const {
  return tensor_state_shape(impl_->planner, impl_->first_chunk, k);
}
TensorState CudaTableStepper::entry(std::size_t k, std::span<void* const> buffers) const {
  return tensor_state_entry(impl_->planner, impl_->first_chunk, k, buffers);
}
const StepConfig& CudaTableStepper::config() const {
  return impl_->planner.config();
}
std::size_t CudaTableStepper::parameters() const {
  return impl_->planner.parameters();
}
const std::vector<std::size_t>& CudaTableStepper::tensor_sizes() const {
  return impl_->planner.tensor_sizes();
}
std::vector<core::StateCounter> CudaTableStepper::counters(CUstream_st* stream) {
  impl_->start_read(stream, "reading the CUDA optimizer's counters");
  impl_->take_counters(stream);
  return impl_->planner.counters();
}
StepCounters CudaTableStepper::raw_counters(CUstream_st* stream) {
  impl_->start_read(stream, "reading the CUDA optimizer's counters");
  impl_->take_counters(stream);
  return impl_->planner.raw_counters();
}
void CudaTableStepper::set_raw_counters(StepCounters counters, CUstream_st* stream) {
  impl_->put_counters(std::move(counters), stream);
}
void CudaTableStepper::set_hyperparameters(const StepConfig& config, CUstream_st* stream) {
  impl_->set_hyperparameters(config, stream);
}

struct CudaEventVeto::Impl {
  DeviceBuffer<unsigned> word{1};
  CudaEvent done;  // recorded by finish() after an event's steps
  cudaStream_t last_stream = nullptr;
};

CudaEventVeto::CudaEventVeto(CUstream_st* stream) {
  require_cuda_device(stream);
  impl_ = std::make_unique<Impl>();
  reset(stream);
  detail::check(cudaStreamSynchronize(stream), "clearing the event veto");
}
CudaEventVeto::~CudaEventVeto() = default;
void CudaEventVeto::reset(CUstream_st* stream) {
  if (!cuda_capturing(stream) && stream != impl_->last_stream) {
    detail::check(cudaStreamWaitEvent(stream, impl_->done.handle, 0), "ordering the event veto (cudaStreamWaitEvent)");
  }
  detail::check(cudaMemsetAsync(impl_->word.data(), 0, impl_->word.bytes(), stream), "clearing the event veto");
}
void CudaEventVeto::finish(CUstream_st* stream) {
  if (cuda_capturing(stream)) return;  // the event would name a graph node
  detail::check(cudaEventRecord(impl_->done.handle, stream), "recording the event veto's use (cudaEventRecord)");
  impl_->last_stream = stream;
}
unsigned* CudaEventVeto::device_word() const {
  return impl_->word.data();
}

}  // namespace cgad::fastpath
