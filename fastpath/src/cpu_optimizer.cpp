#include "cgad/fastpath/fastpath.hpp"

#include "cpu_blocks.hpp"

#include "cgad/fastpath/state_file.hpp"
#include "cgad/core/errors.hpp"
#include "cgad/fastpath/detail/tensor_table.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>

namespace cgad::fastpath {
namespace {

// Steps of fewer chunks than this run on the caller's thread, whatever the thread count: below it, waking the pool
// (about 10 µs per dispatch, two per step) costs more than the split saves. Measured with bench/fastpath_cpu_bench
// (Step/cgad/fp32/fp32 and bf16/q8, CGAD_BENCH_THREADS=1 against 2, docs/commands.md): two threads lose below 32768
// elements (fp32: 28.8 against 5.8 µs at 1024, 38.9 against 19.7 at 4096) and break even at 32768 (141 against
// 145 µs; q8 405 against 596). Nothing computed depends on it (the split never changes a bit: the fingerprint
// test, fastpath_step_test's BitIdenticalForAnyThreadCount, runs sizes on both sides of it).
constexpr std::uint64_t kSerialBelowChunks = 128;

}  // namespace
// Where the chunks of one step find their pseudo-gradient and parameters, as segments: the contiguous step has one
// (θ the whole vector from element 0, Δ the fragment's slice from the fragment's first element), the table step one
// per tensor (θ and Δ both from the tensor's first element). Because no chunk crosses a tensor boundary, each
// chunk lies in one segment, and its operands are that segment's pointers moved to the chunk.
struct CpuOptimizer::Operands {
  std::span<float* const> fp32;        // one θ pointer per segment (empty for bf16 parameters, and for a preview)
  std::span<bf16* const> bf16_values;  // likewise for bf16 parameters
  std::span<const float* const> grads;
  const std::vector<std::size_t>* tensor_begin = nullptr;  // the table step's; null for one segment
  const std::vector<std::size_t>* chunk_tensor = nullptr;
  std::size_t grad_first = 0;  // the one segment's first element of Δ

  struct Chunk {
    const float* grad;
    float* fp32;
    bf16* bf16_values;
  };
  Chunk at(std::size_t chunk, const StepChunk& c) const {
    const bool per_tensor = tensor_begin != nullptr;
    const std::size_t k = per_tensor ? (*chunk_tensor)[chunk] : 0;
    const std::size_t param_first = per_tensor ? (*tensor_begin)[k] : 0;
    const std::size_t grad_at = c.begin - (per_tensor ? param_first : grad_first);
    const std::size_t param_at = c.begin - param_first;
    return {grads[k] + grad_at, fp32.empty() ? nullptr : fp32[k] + param_at,
            bf16_values.empty() ? nullptr : bf16_values[k] + param_at};
  }
};

CpuOptimizer::CpuOptimizer(const StepConfig& config, std::size_t parameters, unsigned threads)
    : CpuOptimizer(config, std::vector<std::size_t>{parameters}, threads) {}

CpuOptimizer::CpuOptimizer(const StepConfig& config, std::vector<std::size_t> tensor_sizes, unsigned threads)
    : planner_(config, std::move(tensor_sizes)),
      state_(HostState::zeros(planner_)),
      pool_(threads),
      isa_(selected_cpu_isa()),
      tensor_begin_(tensor_begins(planner_.tensor_sizes())),
      chunk_tensor_(chunk_tensors(planner_, tensor_begin_)) {}

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
  o.bf16_values = params;
  return run(o, parameters(), table_grad_size(fragment), tau, fragment);
}

StepReport CpuOptimizer::preview(std::span<const float* const> grads, std::int64_t tau, std::size_t fragment) {
  const Operands o = table(grads, fragment);
  const StepPlanner::Plan plan = planner_.plan(parameters(), table_grad_size(fragment), tau, fragment);
  const auto [outcome, index] = scan(o, plan);
  return StepPlanner::report_of(plan.event, plan.scheduled, outcome, index);
}

CpuOptimizer::Operands CpuOptimizer::contiguous(std::span<float* const> fp32, std::span<bf16* const> bf16_values,
                                                const float* const& grad, std::size_t fragment) const {
  Operands o{.fp32 = fp32, .bf16_values = bf16_values, .grads = {&grad, 1}};
  if (fragment < config().fragments) o.grad_first = planner_.layout().offset(fragment);
  return o;
}

std::pair<std::size_t, std::size_t> CpuOptimizer::touched(std::size_t fragment) const {
  return touched_tensors(planner_, chunk_tensor_, fragment);
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
      planner_.chunk_begin(plan.fragment + 1) - first_chunk,
      [&](std::uint64_t begin, std::uint64_t end) {
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
      },
      kSerialBelowChunks);
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
  pool_.parallel_for(
      planner_.chunk_begin(fragment + 1) - first_chunk,
      [&](std::uint64_t begin, std::uint64_t end) {
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
          a.params_bf16 = where.bf16_values;
          (c.fp32_state != 0 ? step_fallback : step_q8_or_only)(a);
        }
      },
      kSerialBelowChunks);
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
  if (next.v_map != now.v_map) differs("v map");  // v's codes decode through it (state_file.cpp records it)
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

TensorState CpuOptimizer::tensor_state(std::size_t k) {
  const std::vector<std::size_t>& sizes = planner_.tensor_sizes();
  if (k >= sizes.size()) {
    throw core::InputError("tensor " + std::to_string(k) + " does not exist (there are " +
                           std::to_string(sizes.size()) + ")");
  }
  TensorState out;
  out.moments = state_.moments;
  const std::size_t begin = tensor_begin_[k], size = sizes[k];
  const bool q8 = state_.format == StateFormat::q8;
  out.fp32_fallback = q8 && size < effective_min_q8_size(config());
  // The tensor's chunks are consecutive (chunk_tensor_ is non-decreasing), and so are their absmax or fallback slots.
  const auto [first, last] = std::equal_range(chunk_tensor_.begin(), chunk_tensor_.end(), k);
  const std::size_t slot = first == last ? 0 : planner_.chunks()[first - chunk_tensor_.begin()].slot;
  for (int m = 0; m < state_.moments; ++m) {
    switch (state_.format) {
      case StateFormat::fp32:
        out.fp32[m] = std::span<float>(state_.fp32[m]).subspan(begin, size);
        break;
      case StateFormat::bf16:
        out.bf16_values[m] = std::span<bf16>(state_.bf16_values[m]).subspan(begin, size);
        break;
      case StateFormat::q8:
        if (out.fp32_fallback) {
          out.fp32[m] = std::span<float>(state_.fp32[m]).subspan(slot, size);
        } else {
          out.codes[m] = std::span<std::uint8_t>(state_.codes[m]).subspan(begin, size);
          out.absmax[m] = std::span<float>(state_.absmax[m]).subspan(slot, static_cast<std::size_t>(last - first));
        }
        break;
    }
  }
  return out;
}

void CpuOptimizer::adopt(LoadedState&& loaded) {
  planner_.set_raw_counters(std::move(loaded.counters));
  // Into the buffers there are (the loaded state has their shape: parse_state_bytes), so that the spans
  // tensor_state() gave out stay valid.
  for (int m = 0; m < 2; ++m) {
    std::copy(loaded.state.fp32[m].begin(), loaded.state.fp32[m].end(), state_.fp32[m].begin());
    std::copy(loaded.state.bf16_values[m].begin(), loaded.state.bf16_values[m].end(), state_.bf16_values[m].begin());
    std::copy(loaded.state.codes[m].begin(), loaded.state.codes[m].end(), state_.codes[m].begin());
    std::copy(loaded.state.absmax[m].begin(), loaded.state.absmax[m].end(), state_.absmax[m].begin());
  }
}

}  // namespace cgad::fastpath
