#include "cgad/fastpath/table_stepper.hpp"

#include "cpu_blocks.hpp"

#include "cgad/core/errors.hpp"
#include "cgad/fastpath/detail/host_state.hpp"
#include "cgad/fastpath/detail/q8.hpp"
#include "cgad/fastpath/detail/q8_maps.hpp"
#include "cgad/fastpath/detail/replan.hpp"
#include "cgad/fastpath/detail/state_contents.hpp"
#include "cgad/fastpath/detail/tensor_table.hpp"
#include "cgad/fastpath/detail/table_stepper_internals.hpp"
#include "cgad/fastpath/thread_pool.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <memory>
#include <string>

namespace cgad::fastpath {
namespace {

// Steps of fewer chunks than this run on the caller's thread, whatever the thread count: below it, waking the pool
// (about 10 µs per dispatch; measured when a step took two) costs more than the split saves. Measured with
// bench/fastpath_cpu_bench (Step/cgad/fp32/fp32 and bf16/q8, CGAD_BENCH_THREADS=1 against 2, docs/commands.md): two
// threads lose below 32768 elements (fp32: 28.8 against 5.8 µs at 1024, 38.9 against 19.7 at 4096) and break even at
// 32768 (141 against 145 µs; q8 405 against 596). Nothing computed depends on it (the split never changes a bit: the
// fingerprint test, fastpath_step_test's BitIdenticalForAnyThreadCount, runs sizes on both sides of it).
constexpr std::uint64_t kSerialBelowChunks = 128;

std::string tensor_name(std::size_t k) {
  return "tensor " + std::to_string(k);
}

}  // namespace

// Everything a stepper holds: the public class is a pointer to this (table_stepper.hpp), so that its header needs
// no detail/ header; a call costs one indirection more, nothing per element.
struct TableStepper::Impl {
  Impl(const StepConfig& config, std::vector<std::size_t> tensor_sizes, std::shared_ptr<ThreadPool> pool);

  StepReport step(std::span<float* const> params, std::span<const float* const> grads,
                  std::span<const TensorState> states, std::int64_t tau, std::size_t fragment, bool reuse_preview);
  StepReport step(std::span<bf16* const> params, std::span<const float* const> grads,
                  std::span<const TensorState> states, std::int64_t tau, std::size_t fragment, bool reuse_preview);
  StepReport preview(std::span<const float* const> grads, std::int64_t tau, std::size_t fragment);
  void form_pseudo_gradient(std::span<const float* const> start, std::span<const float* const> params,
                            std::span<float* const> deltas);
  TensorStateShape shape(std::size_t k) const;
  TensorState entry(std::size_t k, std::span<void* const> buffers) const;
  void check_states(std::span<const TensorState> states, std::span<const std::size_t> which) const;
  void read_state(const TensorState& state, std::size_t k, int moment, std::span<float> out) const;
  void advance_round();
  void set_hyperparameters(const StepConfig& config);
  void set_raw_counters(StepCounters counters);
  const StepConfig& config() const { return planner_.config(); }
  StepReport step_contiguous(float* params_fp32, bf16* params_bf16, std::size_t params_size,
                             std::span<const float> grad, std::span<const TensorState> states, std::int64_t tau,
                             std::size_t fragment);
  std::pair<std::size_t, std::size_t> touched(std::size_t fragment) const;

  // Where a step's chunks find Δ and θ.
  struct Operands;
  StepReport run(const Operands& operands, std::span<const TensorState> states, std::size_t params_size,
                 std::size_t grad_size, std::int64_t tau, std::size_t fragment, bool reuse_preview);
  bool formed_verdict(const Operands& operands, const StepPlanner::Plan& plan) const;
  struct Refused;
  std::pair<StepOutcome, std::uint64_t> scan(const Operands& operands, const StepPlanner::Plan& plan);
  void scan_part(const Operands& operands, const StepPlanner::Plan& plan, std::size_t begin, std::size_t end,
                 Refused& refused) const;
  std::uint64_t step_part(const Operands& operands, std::span<const TensorState> states, const StepPlanner::Plan& plan,
                          std::size_t begin, std::size_t end) const;
  template <class Fn>
  void for_each_run(std::size_t begin, std::size_t end, const Fn& fn) const;
  void check_entries(std::span<const TensorState> states, const Operands& operands, std::size_t fragment) const;
  template <class P>
  StepReport table_step(std::span<P* const> params, std::span<const float* const> grads,
                        std::span<const TensorState> states, std::int64_t tau, std::size_t fragment,
                        bool reuse_preview);

  StepPlanner planner_;
  std::shared_ptr<ThreadPool> pool_;
  CpuIsa isa_;
  std::vector<std::size_t> tensor_begin_;  // tensor k's first element; one entry more than tensors
  std::vector<std::size_t> chunk_tensor_;  // the tensor holding each chunk of planner_.chunks()
  std::vector<std::size_t> first_slot_;    // tensor k's first absmax or fallback slot (0 for a tensor of no chunk)
  std::vector<std::size_t> first_chunk_;   // tensor k's first chunk; one entry more than tensors
  // The last preview's event and outcome, and the counters' generation it saw (a commit, load, new round or new
  // hyperparameters moves the generation, so that reuse_preview then scans again).
  struct Previewed {
    std::uint64_t generation = 0;
    std::int64_t tau = 0;
    std::size_t fragment = 0;
    StepOutcome outcome = StepOutcome::applied;
    std::uint64_t index = 0;
    bool valid = false;
  };
  Previewed previewed_;
  // The last form_pseudo_gradient: where it wrote each tensor's Δ (null: left out), the largest |Δ|'s bits (at least
  // 0x7F800000 where some Δ is NaN or ±Inf), and the counters' generation it saw.
  struct Formed {
    std::uint64_t generation = 0;
    std::vector<const float*> deltas;
    std::uint32_t largest = 0;
    bool valid = false;
  };
  Formed formed_;
  std::uint64_t generation_ = 0;
};

// Where the chunks of one step find their pseudo-gradient and parameters, as segments: the contiguous step has one
// (θ the whole vector from element 0, Δ the fragment's slice from the fragment's first element), the table step one
// per tensor (θ and Δ both from the tensor's first element). Because no chunk crosses a tensor boundary, each
// chunk lies in one segment, and its operands are that segment's pointers moved to the chunk. The state is always
// one entry per tensor (TensorState).
struct TableStepper::Impl::Operands {
  std::span<float* const> fp32;        // one θ pointer per segment (empty for bf16 parameters, and for a preview)
  std::span<bf16* const> bf16_values;  // likewise for bf16 parameters
  std::span<const float* const> grads;
  bool per_tensor = false;     // the table step's segments; else one
  std::size_t grad_first = 0;  // the one segment's first element of Δ

  struct Chunk {
    const float* grad;  // null: the tensor is left out of this step (the table step's null gradient)
    float* fp32;
    bf16* bf16_values;
  };
  Chunk at(std::size_t k, std::size_t tensor_first, const StepChunk& c) const {
    const std::size_t segment = per_tensor ? k : 0;
    const std::size_t param_first = per_tensor ? tensor_first : 0;
    if (grads[segment] == nullptr) return {nullptr, nullptr, nullptr};
    const std::size_t grad_at = c.begin - (per_tensor ? param_first : grad_first);
    const std::size_t param_at = c.begin - param_first;
    return {grads[segment] + grad_at, fp32.empty() ? nullptr : fp32[segment] + param_at,
            bf16_values.empty() ? nullptr : bf16_values[segment] + param_at};
  }
};

TableStepper::Impl::Impl(const StepConfig& config, std::vector<std::size_t> tensor_sizes,
                         std::shared_ptr<ThreadPool> pool)
    : planner_(config, std::move(tensor_sizes)),
      pool_(std::move(pool)),
      isa_(selected_cpu_isa()),
      tensor_begin_(tensor_begins(planner_.tensor_sizes())),
      chunk_tensor_(chunk_tensors(planner_, tensor_begin_)) {
  if (pool_ == nullptr) throw core::InputError("a table stepper needs a thread pool");
  const std::size_t tensors = planner_.tensor_sizes().size();
  first_slot_ = tensor_first_slots(planner_, chunk_tensor_, tensors);
  first_chunk_ = tensor_first_chunks(chunk_tensor_, tensors);
}

template <class P>
StepReport TableStepper::Impl::table_step(std::span<P* const> params, std::span<const float* const> grads,
                                          std::span<const TensorState> states, std::int64_t tau, std::size_t fragment,
                                          bool reuse_preview) {
  check_step_table(params, grads, planner_.tensor_sizes(), touched(fragment));
  Operands o;
  if constexpr (std::is_same_v<P, float>) {
    o.fp32 = params;
  } else {
    o.bf16_values = params;
  }
  o.grads = grads;
  o.per_tensor = true;
  check_entries(states, o, fragment);
  const std::size_t grad_size = fragment < config().fragments ? planner_.fragment_size(fragment) : 0;
  return run(o, states, planner_.parameters(), grad_size, tau, fragment, reuse_preview);
}

StepReport TableStepper::Impl::step(std::span<float* const> params, std::span<const float* const> grads,
                                    std::span<const TensorState> states, std::int64_t tau, std::size_t fragment,
                                    bool reuse_preview) {
  if (config().params != ParamFormat::fp32) {
    throw core::InputError("this optimizer stores bf16 parameters; it was given fp32 ones");
  }
  return table_step(params, grads, states, tau, fragment, reuse_preview);
}

StepReport TableStepper::Impl::step(std::span<bf16* const> params, std::span<const float* const> grads,
                                    std::span<const TensorState> states, std::int64_t tau, std::size_t fragment,
                                    bool reuse_preview) {
  if (config().params != ParamFormat::bf16) {
    throw core::InputError("this optimizer stores fp32 parameters; it was given bf16 ones");
  }
  return table_step(params, grads, states, tau, fragment, reuse_preview);
}

StepReport TableStepper::Impl::step_contiguous(float* params_fp32, bf16* params_bf16, std::size_t params_size,
                                               std::span<const float> grad, std::span<const TensorState> states,
                                               std::int64_t tau, std::size_t fragment) {
  const float* const slice = grad.data();
  Operands o;
  if (params_fp32 != nullptr) o.fp32 = {&params_fp32, 1};
  if (params_bf16 != nullptr) o.bf16_values = {&params_bf16, 1};
  o.grads = {&slice, 1};
  if (fragment < config().fragments) o.grad_first = planner_.layout().offset(fragment);
  check_entries(states, o, fragment);
  return run(o, states, params_size, grad.size(), tau, fragment, false);
}

StepReport TableStepper::Impl::preview(std::span<const float* const> grads, std::int64_t tau, std::size_t fragment) {
  const std::size_t tensors = tensor_begin_.size() - 1;
  check_table("gradient", grads, tensors, 1, 0, planner_.tensor_sizes());
  Operands o;
  o.grads = grads;
  o.per_tensor = true;
  const std::size_t grad_size = fragment < config().fragments ? planner_.fragment_size(fragment) : 0;
  const StepPlanner::Plan plan = planner_.plan(planner_.parameters(), grad_size, tau, fragment);
  const auto [outcome, index] = scan(o, plan);
  previewed_ = {generation_, tau, fragment, outcome, index, true};
  return StepPlanner::report_of(plan.event, plan.scheduled, outcome, index);
}

void TableStepper::Impl::form_pseudo_gradient(std::span<const float* const> start, std::span<const float* const> params,
                                              std::span<float* const> deltas) {
  const std::vector<std::size_t>& sizes = planner_.tensor_sizes();
  const std::size_t tensors = sizes.size();
  if (config().params != ParamFormat::fp32) {
    throw core::InputError("a pseudo-gradient is formed here from fp32 parameters; this optimizer stores bf16 ones");
  }
  check_table("start", start, tensors, 1, 0, sizes);
  check_table("parameter", params, tensors, 1, 0, sizes);
  check_table("gradient", std::span<float* const>(deltas), tensors, 1, 0, sizes);
  for (std::size_t k = 0; k < tensors; ++k) {
    if (start[k] == nullptr || sizes[k] == 0) continue;
    if (params[k] == nullptr || deltas[k] == nullptr) {
      throw core::InputError("the tensor table's parameter or gradient pointer for tensor " + std::to_string(k) +
                             " (formed: its start is given) is null");
    }
  }
  formed_.valid = false;     // until this pass has ended: a refused one is trusted by no step
  previewed_.valid = false;  // a preview looked at the Δ this pass overwrites
  std::atomic<std::uint32_t> largest{0};
  pool_->parallel_for(
      planner_.chunks().size(),
      [&](std::uint64_t begin, std::uint64_t end) {
        std::uint32_t part = 0;
        for_each_run(begin, end, [&](std::size_t k, std::size_t first, std::size_t, std::uint64_t elements) {
          if (start[k] == nullptr) return;
          const std::size_t at = planner_.chunks()[first].begin - tensor_begin_[k];
          part = std::max(part, form_delta(start[k] + at, params[k] + at, deltas[k] + at, elements, isa_));
        });
        std::uint32_t seen = largest.load();
        while (part > seen && !largest.compare_exchange_weak(seen, part)) {}
      },
      kSerialBelowChunks);
  formed_.deltas.assign(tensors, nullptr);
  for (std::size_t k = 0; k < tensors; ++k) {
    if (start[k] != nullptr) formed_.deltas[k] = deltas[k];
  }
  formed_.largest = largest.load();
  formed_.generation = generation_;
  formed_.valid = true;
}

// Whether a step may take the last formation's look at Δ instead of scanning (docs/design.md §5, "Δ checked where
// it is formed"): nothing was stepped, loaded or reconfigured since, every Δ this step reads is one the formation
// wrote (the caller vouches that none changed since: cgad.torch checks the gradients' version counters), none was
// NaN or ±Inf, and the largest |Δ| passes the overflow rule at this event's σ -- the rule is monotone in |Δ| (fl(σ·x)
// does not decrease as x grows), so then every element passes. Otherwise the step scans, and reports the first
// refused element as a raw Δ's step does.
bool TableStepper::Impl::formed_verdict(const Operands& operands, const StepPlanner::Plan& plan) const {
  if (!formed_.valid || formed_.generation != generation_ || !operands.per_tensor) return false;
  for (std::size_t k = 0; k < operands.grads.size(); ++k) {
    if (operands.grads[k] != nullptr && planner_.tensor_sizes()[k] != 0 && operands.grads[k] != formed_.deltas[k]) {
      return false;
    }
  }
  const float sigma = plan.scheduled.applied ? plan.scheduled.sigma : 0.0f;
  return formed_.largest < 0x7F800000u && !refuses_event(sigma, bits_to_float(formed_.largest));
}

std::pair<std::size_t, std::size_t> TableStepper::Impl::touched(std::size_t fragment) const {
  return touched_tensors(planner_, chunk_tensor_, fragment);
}

TensorStateShape TableStepper::Impl::shape(std::size_t k) const {
  return tensor_state_shape(planner_, first_chunk_, k);
}

TensorState TableStepper::Impl::entry(std::size_t k, std::span<void* const> buffers) const {
  return tensor_state_entry(planner_, first_chunk_, k, buffers);
}

void TableStepper::Impl::check_entries(std::span<const TensorState> states, const Operands& operands,
                                       std::size_t fragment) const {
  check_state_shapes(planner_, first_chunk_, chunk_tensor_, states,
                     operands.per_tensor ? operands.grads : std::span<const float* const>{}, fragment);
}

void TableStepper::Impl::check_states(std::span<const TensorState> states, std::span<const std::size_t> which) const {
  const std::size_t tensors = tensor_begin_.size() - 1;
  if (states.size() != tensors) {
    throw core::InputError("the tensor table has " + std::to_string(states.size()) + " states, the optimizer " +
                           std::to_string(tensors) + " tensors");
  }
  const auto check_one = [&](std::size_t k) {
    if (k >= tensors) throw core::InputError(tensor_name(k) + " does not exist");
    const TensorState& e = states[k];
    const TensorStateShape s = shape(k);
    if (e.moments != s.moments) throw core::InputError(tensor_name(k) + "'s state has another moment count");
    check_state_contents(e, config(), planner_.adam_family(),
                         [&](const std::string& why) { throw core::InputError(tensor_name(k) + "'s state " + why); });
  };
  if (which.empty()) {
    for (std::size_t k = 0; k < tensors; ++k) check_one(k);
  } else {
    for (const std::size_t k : which) check_one(k);
  }
}

void TableStepper::Impl::read_state(const TensorState& state, std::size_t k, int moment, std::span<float> out) const {
  const TensorStateShape s = shape(k);
  if (moment < 0 || moment >= s.moments || out.size() != s.values) {
    throw core::InputError(tensor_name(k) + ": no moment " + std::to_string(moment) + " of " +
                           std::to_string(out.size()) + " values");
  }
  const Q8Map& map = planner_.q8_map(moment);
  const std::size_t begin = tensor_begin_[k];
  for (std::size_t n = first_chunk_[k]; n < first_chunk_[k + 1]; ++n) {
    const StepChunk& c = planner_.chunks()[n];
    const std::size_t at = c.begin - begin, slot = c.slot - first_slot_[k];
    for (std::size_t i = 0; i < c.count; ++i) {
      if (c.fp32_state != 0) {
        out[at + i] = state.fp32[moment][slot + i];
        continue;
      }
      switch (config().state) {
        case StateFormat::fp32:
          out[at + i] = state.fp32[moment][at + i];
          break;
        case StateFormat::bf16:
          out[at + i] = to_float(state.bf16_values[moment][at + i]);
          break;
        case StateFormat::q8:
          out[at + i] = q8_dequantize(state.codes[moment][at + i], state.absmax[moment][slot], map);
          break;
      }
    }
  }
}

// The first refused elements a scan found, counted from the fragment's first element, lowered by the parts of the
// scan as they find them.
struct TableStepper::Impl::Refused {
  static constexpr std::uint64_t kNone = std::numeric_limits<std::uint64_t>::max();
  std::atomic<std::uint64_t> first_nonfinite{kNone}, first_overflow{kNone};

  static void lower_to(std::atomic<std::uint64_t>& first, std::uint64_t i) {
    std::uint64_t seen = first.load();
    while (i < seen && !first.compare_exchange_weak(seen, i)) {}
  }
  // outcome_of (step_schedule.hpp) orders the two as the reference reports them.
  std::pair<StepOutcome, std::uint64_t> verdict(const StepPlanner::Plan& plan) const {
    const std::uint64_t nonfinite = first_nonfinite.load(), overflow = first_overflow.load();
    const StepOutcome outcome = outcome_of(plan.scheduled, nonfinite != kNone, overflow != kNone);
    return {outcome, outcome == StepOutcome::nonfinite ? nonfinite : overflow};
  }
};

// Longest run of chunks for_each_run hands out, in elements: a block loop counts a run's invalid elements in 32 bits.
constexpr std::uint64_t kLongestRun = std::uint64_t{1} << 30;

// fn(k, first, last, elements) for each run of chunks first..last−1 (indices into planner_.chunks()) of one tensor
// k among chunks begin..end−1: a tensor's chunks inside one fragment are adjacent and cover contiguous elements, so
// a run is one span of Δ, θ and each moment, which the scan and the elementwise steps take whole instead of 256
// elements at a time (docs/design.md §5, "One dispatch per step").
template <class Fn>
void TableStepper::Impl::for_each_run(std::size_t begin, std::size_t end, const Fn& fn) const {
  const StepChunk* chunks = planner_.chunks().data();
  for (std::size_t first = begin; first < end;) {
    const std::size_t k = chunk_tensor_[first];
    std::uint64_t elements = chunks[first].count;
    std::size_t last = first + 1;
    while (last < end && chunk_tensor_[last] == k && elements + chunks[last].count <= kLongestRun) {
      elements += chunks[last].count;
      ++last;
    }
    fn(k, first, last, elements);
    first = last;
  }
}

void TableStepper::Impl::scan_part(const Operands& operands, const StepPlanner::Plan& plan, std::size_t begin,
                                   std::size_t end, Refused& refused) const {
  // The overflow rule of every optimizer (the Adam family's, Nesterov's and SDM's, whose σ is
  // 1 or 1/(1 + τ)); σ = 0 where the event is not applied, so that only NaN/Inf is looked for.
  const float sigma = plan.scheduled.applied ? plan.scheduled.sigma : 0.0f;
  const StepChunk* chunks = planner_.chunks().data();
  bool stop = false;
  for_each_run(begin, end, [&](std::size_t k, std::size_t first, std::size_t, std::uint64_t elements) {
    const StepChunk& c = chunks[first];
    const float* grad = operands.at(k, tensor_begin_[k], c).grad;
    if (stop || grad == nullptr || !any_refused(grad, elements, sigma, isa_)) return;
    for (std::uint64_t j = 0; j < elements; ++j) {
      const std::uint64_t i = c.begin - plan.offset + j;  // counted from the fragment's first element
      if (!std::isfinite(grad[j])) {
        Refused::lower_to(refused.first_nonfinite, i);
        stop = true;  // nothing after it in this part can matter
        return;
      }
      if (refuses_event(sigma, grad[j])) Refused::lower_to(refused.first_overflow, i);
    }
  });
}

std::pair<StepOutcome, std::uint64_t> TableStepper::Impl::scan(const Operands& operands,
                                                               const StepPlanner::Plan& plan) {
  Refused refused;
  const std::size_t first_chunk = planner_.chunk_begin(plan.fragment);
  pool_->parallel_for(
      planner_.chunk_begin(plan.fragment + 1) - first_chunk,
      [&](std::uint64_t begin, std::uint64_t end) {
        scan_part(operands, plan, first_chunk + begin, first_chunk + end, refused);
      },
      kSerialBelowChunks);
  return refused.verdict(plan);
}

namespace {

// A step's arguments with tensor k's state as the moments' bases (bind_moments' formats, host_state.hpp); the
// chunk's offsets into them come from chunk_args_at.
void bind_entry(const TensorState& s, StepArgs& args) {
  for (int m = 0; m < s.moments; ++m) {
    MomentView& view = args.moment[m];
    view.fp32 = s.fp32[m].data();
    view.bf16_values = s.bf16_values[m].data();
    view.codes = s.codes[m].data();
    view.absmax = s.absmax[m].data();
    view.fallback = s.fp32[m].data();
  }
}

}  // namespace

// Steps chunks begin..end−1 of an applied event; returns their elements with invalid state.
std::uint64_t TableStepper::Impl::step_part(const Operands& operands, std::span<const TensorState> states,
                                            const StepPlanner::Plan& plan, std::size_t begin, std::size_t end) const {
  StepArgs fallback_args = plan.args;
  fallback_args.state = StateFormat::fp32;
  const BlockFunction step_q8_or_only = block_function_for(plan.args, isa_);
  const BlockFunction step_fallback = block_function_for(fallback_args, isa_);
  // A run is stepped in one call where every element's update reads only its own index: fp32 or bf16 moments (a q8
  // block's absmax is the chunk's, block_step.hpp) and nearest rounding (stochastic rounding draws each chunk's
  // random bits into a chunk-sized array, cpu_blocks.cpp). The bits are those of the chunk-by-chunk step.
  const bool elementwise = !plan.args.stochastic;
  const StepChunk* chunks = planner_.chunks().data();
  std::uint64_t invalid = 0;
  StepArgs whole = plan.args;
  for_each_run(begin, end, [&](std::size_t k, std::size_t first, std::size_t last, std::uint64_t elements) {
    const std::size_t tensor_first = tensor_begin_[k];
    const StepChunk& head = chunks[first];
    const Operands::Chunk where = operands.at(k, tensor_first, head);
    if (where.grad == nullptr) return;  // left out of the step
    // The state's pointers moved to the chunk's place in its tensor, Δ to the chunk's, and its random bits keyed by
    // c.begin (chunk_args_at, block_step.hpp); the chunk's θ pointers are set here (the whole-vector θ pointer it
    // would move stays null).
    bind_entry(states[k], whole);
    whole.grad = where.grad;
    whole.first_index = head.begin;
    const BlockFunction fn = head.fp32_state != 0 ? step_fallback : step_q8_or_only;
    const auto step_at = [&](const StepChunk& c, std::uint64_t count) {
      StepArgs a = chunk_args_at(whole, c, c.begin - tensor_first, c.slot - first_slot_[k]);
      a.size = count;
      a.params_fp32 = where.fp32 == nullptr ? nullptr : where.fp32 + (c.begin - head.begin);
      a.params_bf16 = where.bf16_values == nullptr ? nullptr : where.bf16_values + (c.begin - head.begin);
      invalid += fn(a);
    };
    if (elementwise && (head.fp32_state != 0 || plan.args.state != StateFormat::q8)) {
      step_at(head, elements);
      return;
    }
    for (std::size_t n = first; n < last; ++n) step_at(chunks[n], chunks[n].count);
  });
  return invalid;
}

StepReport TableStepper::Impl::run(const Operands& operands, std::span<const TensorState> states,
                                   std::size_t params_size, std::size_t grad_size, std::int64_t tau,
                                   std::size_t fragment, bool reuse_preview) {
  StepPlanner::Plan plan = planner_.plan(params_size, grad_size, tau, fragment);
  const bool previewed = reuse_preview && previewed_.valid && previewed_.generation == generation_ &&
                         previewed_.tau == tau && previewed_.fragment == fragment;
  // A formed Δ that passes takes the outcome of a scan that found nothing to refuse.
  const bool reuse = previewed || (reuse_preview && formed_verdict(operands, plan));
  const std::pair<StepOutcome, std::uint64_t> looked =
      previewed ? std::pair{previewed_.outcome, previewed_.index}
                : std::pair{outcome_of(plan.scheduled, false, false), std::uint64_t{0}};
  if (reuse && looked.first != StepOutcome::applied) {
    planner_.commit(plan, looked.first);
    ++generation_;
    return StepPlanner::report_of(plan.event, plan.scheduled, looked.first, looked.second);
  }
  // One dispatch (docs/design.md §5, "One dispatch per step"): each part scans its chunks for Δ the event must
  // refuse (unless a preview did), the parts meet, and each, seeing the same verdict, steps its chunks only if
  // the event is applied -- so a refused event changes nothing, and no part writes before every part has read.
  Refused refused;
  std::atomic<std::uint64_t> invalid_state{0};  // summed per thread: one atomic per part, only where one was found
  const std::size_t first_chunk = planner_.chunk_begin(fragment);
  pool_->parallel_phases(
      planner_.chunk_begin(fragment + 1) - first_chunk,
      [&](std::uint64_t begin, std::uint64_t end, const ThreadPool::Barrier& barrier) {
        if (!reuse) {
          scan_part(operands, plan, first_chunk + begin, first_chunk + end, refused);
          barrier.wait();
          if (refused.verdict(plan).first != StepOutcome::applied) return;
        }
        const std::uint64_t invalid = step_part(operands, states, plan, first_chunk + begin, first_chunk + end);
        if (invalid != 0) invalid_state += invalid;
      },
      kSerialBelowChunks);
  const auto [outcome, index] = reuse ? looked : refused.verdict(plan);
  StepReport report = StepPlanner::report_of(plan.event, plan.scheduled, outcome, index);
  report.invalid_state = invalid_state.load();
  planner_.commit(plan, outcome);
  ++generation_;
  return report;
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
  if (next.v_map != now.v_map) differs("v map");      // v's codes decode through it (state_file.cpp records it)
  if (!same_q8_codes(next, now)) differs("q8 maps");  // so do both moments' (and CUDA's are on the device)
  if (effective_min_q8_size(next) != effective_min_q8_size(now)) differs("min_q8_size");
  if (next.fragments != now.fragments) differs("fragments");
}

void TableStepper::Impl::advance_round() {
  planner_.advance_round();
  ++generation_;
}

void TableStepper::Impl::set_hyperparameters(const StepConfig& config) {
  planner_ = replan(planner_, config);  // the same chunks: tensor_begin_, chunk_tensor_ and the slots stay valid
  ++generation_;
}

void TableStepper::Impl::set_raw_counters(StepCounters counters) {
  planner_.set_raw_counters(std::move(counters));
  ++generation_;
}

TableStepper::TableStepper(const StepConfig& config, std::vector<std::size_t> tensor_sizes,
                           std::shared_ptr<ThreadPool> pool)
    : impl_(std::make_unique<Impl>(config, std::move(tensor_sizes), std::move(pool))) {}
TableStepper::~TableStepper() = default;
TableStepper::TableStepper(TableStepper&&) noexcept = default;
TableStepper& TableStepper::operator=(TableStepper&&) noexcept = default;

StepReport TableStepper::step(std::span<float* const> params, std::span<const float* const> grads,
                              std::span<const TensorState> states, std::int64_t tau, std::size_t fragment,
                              bool reuse_preview) {
  return impl_->step(params, grads, states, tau, fragment, reuse_preview);
}
StepReport TableStepper::step(std::span<bf16* const> params, std::span<const float* const> grads,
                              std::span<const TensorState> states, std::int64_t tau, std::size_t fragment,
                              bool reuse_preview) {
  return impl_->step(params, grads, states, tau, fragment, reuse_preview);
}
StepReport TableStepper::preview(std::span<const float* const> grads, std::int64_t tau, std::size_t fragment) {
  return impl_->preview(grads, tau, fragment);
}
void TableStepper::form_pseudo_gradient(std::span<const float* const> start, std::span<const float* const> params,
                                        std::span<float* const> deltas) {
  impl_->form_pseudo_gradient(start, params, deltas);
}
TensorStateShape TableStepper::shape(std::size_t k) const {
  return impl_->shape(k);
}
TensorState TableStepper::entry(std::size_t k, std::span<void* const> buffers) const {
  return impl_->entry(k, buffers);
}
void TableStepper::check_states(std::span<const TensorState> states, std::span<const std::size_t> which) const {
  impl_->check_states(states, which);
}
void TableStepper::read_state(const TensorState& state, std::size_t k, int moment, std::span<float> out) const {
  impl_->read_state(state, k, moment, out);
}
void TableStepper::advance_round() {
  impl_->advance_round();
}
void TableStepper::set_hyperparameters(const StepConfig& config) {
  impl_->set_hyperparameters(config);
}
const StepConfig& TableStepper::config() const {
  return impl_->config();
}
std::size_t TableStepper::parameters() const {
  return impl_->planner_.parameters();
}
unsigned TableStepper::threads() const {
  return impl_->pool_->threads();
}
CpuIsa TableStepper::isa() const {
  return impl_->isa_;
}
std::vector<core::StateCounter> TableStepper::counters() const {
  return impl_->planner_.counters();
}
const StepCounters& TableStepper::raw_counters() const {
  return impl_->planner_.raw_counters();
}
void TableStepper::set_raw_counters(StepCounters counters) {
  impl_->set_raw_counters(std::move(counters));
}
const core::FragmentLayout& TableStepper::layout() const {
  return impl_->planner_.layout();
}
std::size_t TableStepper::fragment_size(std::size_t fragment) const {
  return impl_->planner_.fragment_size(fragment);
}
const std::vector<std::size_t>& TableStepper::tensor_sizes() const {
  return impl_->planner_.tensor_sizes();
}
const std::vector<std::size_t>& TableStepper::tensor_begin() const {
  return impl_->tensor_begin_;
}
std::size_t TableStepper::first_slot(std::size_t k) const {
  return impl_->first_slot_[k];
}
StepReport TableStepper::step_contiguous(float* params_fp32, bf16* params_bf16, std::size_t params_size,
                                         std::span<const float> grad, std::span<const TensorState> states,
                                         std::int64_t tau, std::size_t fragment) {
  return impl_->step_contiguous(params_fp32, params_bf16, params_size, grad, states, tau, fragment);
}
std::pair<std::size_t, std::size_t> TableStepper::touched(std::size_t fragment) const {
  return impl_->touched(fragment);
}

const StepPlanner& detail::TableStepperInternals::planner(const TableStepper& stepper) {
  return stepper.impl_->planner_;
}

}  // namespace cgad::fastpath
