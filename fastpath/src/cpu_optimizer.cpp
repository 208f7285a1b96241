#include "cgad/fastpath/fastpath.hpp"

#include "cpu_blocks.hpp"

#include "cgad/fastpath/state_file.hpp"
#include "cgad/core/errors.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>

namespace cgad::fastpath {
namespace {

// Refuses (InputError) a tensor table whose length is not the layout's tensor count, or that holds a null pointer
// for a tensor of which the step reads or writes anything: tensors[first..last] (empty when first > last).
template <class T>
void check_table(const char* what, std::span<T* const> pointers, std::size_t tensors, std::size_t first,
                 std::size_t last, const std::vector<std::size_t>& sizes) {
  if (pointers.size() != tensors) {
    throw core::InputError(std::string("the tensor table has ") + std::to_string(pointers.size()) + " " + what +
                           " pointers, the optimizer " + std::to_string(tensors) + " tensors");
  }
  for (std::size_t k = first; k <= last && k < tensors; ++k) {
    if (pointers[k] == nullptr && sizes[k] != 0) {
      throw core::InputError(std::string("the tensor table's ") + what + " pointer for tensor " + std::to_string(k) +
                             " (" + std::to_string(sizes[k]) + " elements, read by this step) is null");
    }
  }
}

}  // namespace

// Where the chunks of one step find their pseudo-gradient and parameters, as segments: the contiguous step has one
// (θ the whole vector from element 0, Δ the fragment's slice from the fragment's first element), the table step one
// per tensor (θ and Δ both from the tensor's first element). Because no chunk crosses a tensor boundary, each
// chunk lies in one segment, and its operands are that segment's pointers moved to the chunk.
struct CpuOptimizer::Operands {
  std::span<float* const> fp32;  // one θ pointer per segment (empty for bf16 parameters, and for a preview)
  std::span<bf16* const> half;   // likewise for bf16 parameters
  std::span<const float* const> grads;
  const std::vector<std::size_t>* tensor_begin = nullptr;  // the table step's; null for one segment
  const std::vector<std::size_t>* chunk_tensor = nullptr;
  std::size_t grad_first = 0;  // the one segment's first element of Δ

  struct Chunk {
    const float* grad;
    float* fp32;
    bf16* half;
  };
  Chunk at(std::size_t chunk, const StepChunk& c) const {
    const bool per_tensor = tensor_begin != nullptr;
    const std::size_t k = per_tensor ? (*chunk_tensor)[chunk] : 0;
    const std::size_t param_first = per_tensor ? (*tensor_begin)[k] : 0;
    const std::size_t grad_at = c.begin - (per_tensor ? param_first : grad_first);
    const std::size_t param_at = c.begin - param_first;
    return {grads[k] + grad_at, fp32.empty() ? nullptr : fp32[k] + param_at,
            half.empty() ? nullptr : half[k] + param_at};
  }
};

CpuOptimizer::CpuOptimizer(const StepConfig& config, std::size_t parameters, unsigned threads)
    : CpuOptimizer(config, std::vector<std::size_t>{parameters}, threads) {}

CpuOptimizer::CpuOptimizer(const StepConfig& config, std::vector<std::size_t> tensor_sizes, unsigned threads)
    : planner_(config, std::move(tensor_sizes)),
      state_(HostState::zeros(planner_)),
      pool_(threads),
      isa_(selected_cpu_isa()) {
  const std::vector<std::size_t>& sizes = planner_.tensor_sizes();
  tensor_begin_.assign(sizes.size() + 1, 0);
  for (std::size_t k = 0; k < sizes.size(); ++k) tensor_begin_[k + 1] = tensor_begin_[k] + sizes[k];
  // Chunks come in element order (fragment by fragment, each in order), so one walk over the tensors finds each
  // chunk's, skipping empty tensors.
  std::size_t k = 0;
  for (const StepChunk& c : planner_.chunks()) {
    while (tensor_begin_[k + 1] <= c.begin) ++k;
    chunk_tensor_.push_back(k);
  }
}

StepReport CpuOptimizer::step(std::span<float> params, std::span<const float> grad, std::int64_t tau,
                              std::size_t fragment) {
  if (config().params != ParamFormat::fp32) {
    throw core::InputError("this optimizer stores bf16 parameters; it was given fp32 ones");
  }
  float* const base = params.data();
  const float* const slice = grad.data();
  return run(contiguous({&base, 1}, {}, slice, fragment), params.size(), grad.size(), tau, fragment);
}

StepReport CpuOptimizer::step(std::span<bf16> params, std::span<const float> grad, std::int64_t tau,
                              std::size_t fragment) {
  if (config().params != ParamFormat::bf16) {
    throw core::InputError("this optimizer stores fp32 parameters; it was given bf16 ones");
  }
  bf16* const base = params.data();
  const float* const slice = grad.data();
  return run(contiguous({}, {&base, 1}, slice, fragment), params.size(), grad.size(), tau, fragment);
}

StepReport CpuOptimizer::step(std::span<float* const> params, std::span<const float* const> grads, std::int64_t tau,
                              std::size_t fragment) {
  if (config().params != ParamFormat::fp32) {
    throw core::InputError("this optimizer stores bf16 parameters; it was given fp32 ones");
  }
  Operands o = table(grads, fragment);
  const auto [first, last] = touched(fragment);
  check_table("parameter", params, tensor_begin_.size() - 1, first, last, planner_.tensor_sizes());
  o.fp32 = params;
  return run(o, parameters(), table_grad_size(fragment), tau, fragment);
}

StepReport CpuOptimizer::step(std::span<bf16* const> params, std::span<const float* const> grads, std::int64_t tau,
                              std::size_t fragment) {
  if (config().params != ParamFormat::bf16) {
    throw core::InputError("this optimizer stores fp32 parameters; it was given bf16 ones");
  }
  Operands o = table(grads, fragment);
  const auto [first, last] = touched(fragment);
  check_table("parameter", params, tensor_begin_.size() - 1, first, last, planner_.tensor_sizes());
  o.half = params;
  return run(o, parameters(), table_grad_size(fragment), tau, fragment);
}

StepReport CpuOptimizer::preview(std::span<const float* const> grads, std::int64_t tau, std::size_t fragment) {
  const Operands o = table(grads, fragment);
  const StepPlanner::Plan plan = planner_.plan(parameters(), table_grad_size(fragment), tau, fragment);
  const auto [outcome, index] = scan(o, plan);
  return StepPlanner::report_of(plan.event, plan.scheduled, outcome, index);
}

CpuOptimizer::Operands CpuOptimizer::contiguous(std::span<float* const> fp32, std::span<bf16* const> half,
                                                const float* const& grad, std::size_t fragment) const {
  Operands o{.fp32 = fp32, .half = half, .grads = {&grad, 1}};
  if (fragment < config().fragments) o.grad_first = planner_.layout().offset(fragment);
  return o;
}

std::pair<std::size_t, std::size_t> CpuOptimizer::touched(std::size_t fragment) const {
  if (fragment >= config().fragments) return {1, 0};  // plan() refuses the fragment
  const std::size_t first = planner_.chunk_begin(fragment), end = planner_.chunk_begin(fragment + 1);
  if (first == end) return {1, 0};
  return {chunk_tensor_[first], chunk_tensor_[end - 1]};
}

std::size_t CpuOptimizer::table_grad_size(std::size_t fragment) const {
  return fragment < config().fragments ? planner_.fragment_size(fragment) : 0;
}

CpuOptimizer::Operands CpuOptimizer::table(std::span<const float* const> grads, std::size_t fragment) const {
  const auto [first, last] = touched(fragment);
  check_table("gradient", grads, tensor_begin_.size() - 1, first, last, planner_.tensor_sizes());
  Operands o;
  o.grads = grads;
  o.tensor_begin = &tensor_begin_;
  o.chunk_tensor = &chunk_tensor_;
  return o;
}

std::pair<StepOutcome, std::uint64_t> CpuOptimizer::scan(const Operands& operands, const StepPlanner::Plan& plan) {
  // One scan finds the first NaN/Inf and the first overflowing element; outcome_of (step_schedule.hpp) orders
  // them as the reference reports them.
  constexpr std::uint64_t kNone = std::numeric_limits<std::uint64_t>::max();
  // The overflow rule of every optimizer (the Adam family's, Nesterov's and SDM's, whose σ is
  // 1 or 1/(1 + τ)); σ = 0 where the event is not applied, so that only NaN/Inf is looked for.
  const float sigma = plan.scheduled.applied ? plan.scheduled.sigma : 0.0f;
  std::atomic<std::uint64_t> first_nonfinite{kNone}, first_overflow{kNone};
  const auto lower_to = [](std::atomic<std::uint64_t>& first, std::uint64_t i) {
    std::uint64_t seen = first.load();
    while (i < seen && !first.compare_exchange_weak(seen, i)) {}
  };
  const StepChunk* chunks = planner_.chunks().data();
  const std::size_t first_chunk = planner_.chunk_begin(plan.fragment);
  pool_.parallel_for(
      planner_.chunk_begin(plan.fragment + 1) - first_chunk, [&](std::uint64_t begin, std::uint64_t end) {
        for (std::uint64_t n = begin; n < end; ++n) {
          const std::size_t chunk = first_chunk + n;
          const StepChunk& c = chunks[chunk];
          const float* grad = operands.at(chunk, c).grad;
          if (!any_refused(grad, c.count, sigma, isa_)) continue;
          for (std::uint64_t j = 0; j < c.count; ++j) {
            const std::uint64_t i = c.begin - plan.offset + j;  // counted from the fragment's first element
            if (!std::isfinite(grad[j])) {
              lower_to(first_nonfinite, i);
              return;  // nothing after it in this range can matter
            }
            if (refuses_event(sigma, grad[j])) lower_to(first_overflow, i);
          }
        }
      });
  const std::uint64_t nonfinite = first_nonfinite.load(), overflow = first_overflow.load();
  const StepOutcome outcome = outcome_of(plan.scheduled, nonfinite != kNone, overflow != kNone);
  return {outcome, outcome == StepOutcome::nonfinite ? nonfinite : overflow};
}

StepReport CpuOptimizer::run(const Operands& operands, std::size_t params_size, std::size_t grad_size, std::int64_t tau,
                             std::size_t fragment) {
  StepPlanner::Plan plan = planner_.plan(params_size, grad_size, tau, fragment);
  const auto [outcome, index] = scan(operands, plan);
  const StepReport report = StepPlanner::report_of(plan.event, plan.scheduled, outcome, index);
  if (outcome != StepOutcome::applied) {
    planner_.commit(plan, outcome);
    return report;
  }

  state_.bind(plan);
  StepArgs fallback_args = plan.args;
  fallback_args.state = StateFormat::fp32;
  const BlockFunction step_q8_or_only = block_function_for(plan.args, isa_);
  const BlockFunction step_fallback = block_function_for(fallback_args, isa_);
  const StepChunk* chunks = planner_.chunks().data();
  const std::size_t first_chunk = planner_.chunk_begin(fragment);
  pool_.parallel_for(planner_.chunk_begin(fragment + 1) - first_chunk, [&](std::uint64_t begin, std::uint64_t end) {
    for (std::uint64_t n = begin; n < end; ++n) {
      const std::size_t chunk = first_chunk + n;
      const StepChunk& c = chunks[chunk];
      const Operands::Chunk where = operands.at(chunk, c);
      // chunk_args (block_step.hpp) moves the state pointers to the chunk and keys its random bits by c.begin; the
      // chunk's own Δ and θ pointers are set here (the whole-vector θ pointer it would move stays null).
      StepArgs whole = plan.args;
      whole.grad = where.grad;
      whole.first_index = c.begin;
      StepArgs a = chunk_args(whole, c);
      a.params_fp32 = where.fp32;
      a.params_bf16 = where.half;
      (c.fp32_state != 0 ? step_fallback : step_q8_or_only)(a);
    }
  });
  planner_.commit(plan, outcome);
  return report;
}

std::vector<std::string> CpuOptimizer::buffer_names() const {
  return planner_.buffer_names();
}

void CpuOptimizer::read_buffer(std::string_view name, std::span<float> out) const {
  state_.read(planner_, planner_.buffer_to_read(name, out.size()), out);
}

void require_same_state_layout(const StepConfig& now, const StepConfig& next) {
  const auto differs = [](const char* what) {
    throw core::InputError(std::string("new hyperparameters must keep the optimizer's ") + what +
                           " (its state depends on it)");
  };
  if (next.optimizer != now.optimizer) differs("kind");
  if (next.params != now.params) differs("parameter format");
  if (next.state != now.state) differs("state format");
  if (next.rounding != now.rounding) differs("rounding");
  if (next.seed != now.seed) differs("seed");
  if (next.q8_semantics != now.q8_semantics) differs("q8 semantics");
  if (effective_min_q8_size(next) != effective_min_q8_size(now)) differs("min_q8_size");
  if (next.fragments != now.fragments) differs("fragments");
}

void CpuOptimizer::set_hyperparameters(const StepConfig& config) {
  require_same_state_layout(this->config(), config);
  // The same layout gives the same chunks, so the state, tensor_begin_ and chunk_tensor_ stay valid.
  StepPlanner next(config, planner_.tensor_sizes());
  next.set_raw_counters(planner_.raw_counters());
  planner_ = std::move(next);
}

void CpuOptimizer::save(const std::filesystem::path& path) const {
  write_state_file(path, planner_, state_);
}

void CpuOptimizer::load(const std::filesystem::path& path) {
  adopt(read_state_file(path, planner_, state_));
}

std::vector<unsigned char> CpuOptimizer::save_bytes() const {
  return state_bytes(planner_, state_);
}

void CpuOptimizer::load_bytes(std::span<const unsigned char> bytes) {
  adopt(parse_state_bytes(bytes, "the fast-path state", planner_, state_));
}

void CpuOptimizer::adopt(LoadedState&& loaded) {
  planner_.set_raw_counters(std::move(loaded.counters));
  state_ = std::move(loaded.state);
}

}  // namespace cgad::fastpath
