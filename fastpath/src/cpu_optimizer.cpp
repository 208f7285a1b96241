#include "cgad/fastpath/fastpath.hpp"

#include "cgad/fastpath/state_file.hpp"
#include "cgad/reference/errors.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>

namespace cgad::fastpath {
namespace {

// Each block function is compiled for AVX-512 (x86-64-v4), AVX2 (x86-64-v3) and baseline x86-64, picked at
// load time by the CPU (GCC function multiversioning), never by -march=native: the binary runs anywhere. The
// bits cannot depend on the clone: -ffp-contract=off holds for vector code too, and vector division and
// square root are correctly rounded like the scalar ones.
// CGAD_NO_CPU_CLONES (CMake option CGAD_CPU_CLONES=OFF) builds one baseline version: ThreadSanitizer's runtime
// cannot start a binary whose ifunc resolvers run before it (every TSan binary segfaulted in them).
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(CGAD_NO_CPU_CLONES)
#define CGAD_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define CGAD_CPU_CLONES
#endif

// absmax_step folded over values[0..count) from 0 (block_step.hpp), as an integer max that vectorizes: the
// fold is the largest non-NaN |value| (NaN never wins a compare; −0 never beats the initial +0), and for
// non-NaN magnitudes the float order is the order of their bit patterns as unsigned integers (sign bit
// clear), so the max of the bit patterns, with NaN's patterns replaced by +0's, is the same float.
inline std::uint32_t absmax_bits(float value) {
  const std::uint32_t magnitude = float_to_bits(value) & 0x7FFFFFFFu;
  // A mask rather than a select: GCC would fold a select into the max and then not vectorize the fold.
  const std::uint32_t keep = 0u - static_cast<std::uint32_t>(magnitude <= 0x7F800000u);
  return magnitude & keep;
}

CGAD_CPU_CLONES float block_absmax(const float* values, std::uint64_t count) {
  std::uint32_t largest = 0;
  for (std::uint64_t j = 0; j < count; ++j) {
    const std::uint32_t bits = absmax_bits(values[j]);
    largest = largest < bits ? bits : largest;
  }
  return bits_to_float(largest);
}

// A q8 moment's codes for one chunk (quantize_moment, block_step.hpp). They go to a local array first: a
// byte store through `out` may alias anything, which would stop the vectorizer; one memcpy writes them out.
template <class F>
CGAD_CPU_CLONES void quantize_block(const StepArgs& a, int moment, const float* fresh, float absmax,
                                    std::uint64_t count, const RandomWords* random, std::uint8_t* out) {
  constexpr bool stochastic = F::stochastic(StepArgs{});
  const MomentView& view = a.moment[moment];
  std::uint8_t codes[kQ8BlockSize];
  for (std::uint64_t j = 0; j < count; ++j) {
    codes[j] = quantize_moment<F>(a, view, moment, fresh[j], absmax, random[stochastic ? j : 0]);
  }
  std::memcpy(out, codes, count);
}

// One chunk of the step (block_step.hpp; `chunk` is chunk_args() of the step), in three passes so that each is
// a simple loop the compiler vectorizes: update every element (the per-element update, the same calls the CUDA
// kernel makes), then each q8 moment's new absmax, then its codes. F fixes the formats at compile time (one
// instantiation per configuration). Every element reads and writes only its own index of each buffer, so the
// update loop has no loop-carried dependence (ivdep says so to the vectorizer, which cannot prove that the
// caller's buffers do not overlap).
template <class F>
CGAD_CPU_CLONES void step_block(const StepArgs& chunk) {
  // A local copy: no store of the step can reach it, so its pointers and coefficients stay in registers and
  // its fields may be read unconditionally.
  const StepArgs a = chunk;
  const std::uint64_t count = a.size;
  constexpr bool q8 = F::state(StepArgs{}) == StateFormat::q8;
  constexpr bool stochastic = F::stochastic(StepArgs{});
  constexpr int moments = F::family(StepArgs{}) == UpdateFamily::adam ? 2 : 1;
  float old_absmax[2] = {0.0f, 0.0f};
  if constexpr (q8) {
    for (int k = 0; k < moments; ++k) old_absmax[k] = a.moment[k].absmax[0];
  }
  float fresh[2][kQ8BlockSize];
  RandomWords random[stochastic ? kQ8BlockSize : 1] = {};  // nearest rounding reads no random bits
#pragma GCC ivdep
  for (std::uint64_t i = 0; i < count; ++i) {
    const RandomWords& bits = random[stochastic ? i : 0];
    if constexpr (stochastic) random[i] = random_for<F>(a, i);
    float out[2];
    update_element<F>(a, i, a.grad[i], old_absmax, out, bits);
    for (int k = 0; k < moments; ++k) {
      if constexpr (q8) {
        fresh[k][i] = out[k];
      } else {
        store_moment_elementwise<F>(a, a.moment[k], i, out[k], bits);
      }
    }
  }
  if constexpr (q8) {
    for (int k = 0; k < moments; ++k) {
      float absmax = block_absmax(fresh[k], count);
      // bnb's partial block: its padding's m takes part in the new absmax (block_step.hpp).
      if (F::bnb(a) && k == 0 && count < kQ8BlockSize) {
        absmax = absmax_step(absmax, bnb_padding_first_moment(a.adam, old_absmax[0], *a.moment[0].map));
      }
      a.moment[k].absmax[0] = absmax;
      quantize_block<F>(a, k, fresh[k], absmax, count, random, a.moment[k].codes);
    }
  }
}

// Whether any of values[0..count) would be refused: NaN or ±Inf (all exponent bits set), or — when `sigma`
// is not 0 (an applied event of any optimizer: the Adam family, and Nesterov and SDM with σ = 1 or 1/(1 + τ)) —
// the overflow rule (refuses_event, element_update.hpp). A branch-free OR over the
// chunk, so that the scan vectorizes; the caller then looks for the first such index.
CGAD_CPU_CLONES bool any_refused(const float* values, std::uint64_t count, float sigma) {
  std::uint32_t found = 0;
  for (std::uint64_t j = 0; j < count; ++j) {
    const std::uint32_t nonfinite = (float_to_bits(values[j]) & 0x7F800000u) == 0x7F800000u;
    found |= nonfinite | static_cast<std::uint32_t>(refuses_event(sigma, values[j]));
  }
  return found != 0;
}

using BlockFunction = void (*)(const StepArgs&);

// The instantiation of step_block for the step's runtime formats (bnb: Adam family, nearest rounding only).
template <UpdateFamily Family, ParamFormat Params, StateFormat State>
BlockFunction pick_rounding(const StepArgs& a) {
  if constexpr (Family == UpdateFamily::adam && State != StateFormat::bf16) {
    if (a.bnb) return &step_block<FixedFormats<Family, Params, State, false, true>>;
  }
  return a.stochastic ? &step_block<FixedFormats<Family, Params, State, true>>
                      : &step_block<FixedFormats<Family, Params, State, false>>;
}
template <UpdateFamily Family, ParamFormat Params>
BlockFunction pick_state(const StepArgs& a) {
  switch (a.state) {
    case StateFormat::fp32: return pick_rounding<Family, Params, StateFormat::fp32>(a);
    case StateFormat::bf16: return pick_rounding<Family, Params, StateFormat::bf16>(a);
    case StateFormat::q8: return pick_rounding<Family, Params, StateFormat::q8>(a);
  }
  return nullptr;
}
template <UpdateFamily Family>
BlockFunction pick_params(const StepArgs& a) {
  return a.params == ParamFormat::fp32 ? pick_state<Family, ParamFormat::fp32>(a) : pick_state<Family, ParamFormat::bf16>(a);
}
BlockFunction block_function_for(const StepArgs& a) {
  return a.family == UpdateFamily::adam ? pick_params<UpdateFamily::adam>(a) : pick_params<UpdateFamily::nesterov>(a);
}

// Refuses (InputError) a tensor table whose length is not the layout's tensor count, or that holds a null pointer
// for a tensor of which the step reads or writes anything: tensors[first..last] (empty when first > last).
template <class T>
void check_table(const char* what, std::span<T* const> pointers, std::size_t tensors, std::size_t first,
                 std::size_t last, const std::vector<std::size_t>& sizes) {
  if (pointers.size() != tensors) {
    throw reference::InputError(std::string("the tensor table has ") + std::to_string(pointers.size()) + " " + what +
                                " pointers, the optimizer " + std::to_string(tensors) + " tensors");
  }
  for (std::size_t k = first; k <= last && k < tensors; ++k) {
    if (pointers[k] == nullptr && sizes[k] != 0) {
      throw reference::InputError(std::string("the tensor table's ") + what + " pointer for tensor " +
                                  std::to_string(k) + " (" + std::to_string(sizes[k]) +
                                  " elements, read by this step) is null");
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
    : planner_(config, std::move(tensor_sizes)), state_(HostState::zeros(planner_)), pool_(threads) {
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
    throw reference::InputError("this optimizer stores bf16 parameters; it was given fp32 ones");
  }
  float* const base = params.data();
  const float* const slice = grad.data();
  return run(contiguous({&base, 1}, {}, slice, fragment), params.size(), grad.size(), tau, fragment);
}

StepReport CpuOptimizer::step(std::span<bf16> params, std::span<const float> grad, std::int64_t tau,
                              std::size_t fragment) {
  if (config().params != ParamFormat::bf16) {
    throw reference::InputError("this optimizer stores fp32 parameters; it was given bf16 ones");
  }
  bf16* const base = params.data();
  const float* const slice = grad.data();
  return run(contiguous({}, {&base, 1}, slice, fragment), params.size(), grad.size(), tau, fragment);
}

StepReport CpuOptimizer::step(std::span<float* const> params, std::span<const float* const> grads, std::int64_t tau,
                              std::size_t fragment) {
  if (config().params != ParamFormat::fp32) {
    throw reference::InputError("this optimizer stores bf16 parameters; it was given fp32 ones");
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
    throw reference::InputError("this optimizer stores fp32 parameters; it was given bf16 ones");
  }
  Operands o = table(grads, fragment);
  const auto [first, last] = touched(fragment);
  check_table("parameter", params, tensor_begin_.size() - 1, first, last, planner_.tensor_sizes());
  o.half = params;
  return run(o, parameters(), table_grad_size(fragment), tau, fragment);
}

StepReport CpuOptimizer::preview(std::span<const float* const> grads, std::int64_t tau, std::size_t fragment) {
  const Operands o = table(grads, fragment);
  return scan(o, planner_.plan(parameters(), table_grad_size(fragment), tau, fragment), tau);
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

StepReport CpuOptimizer::scan(const Operands& operands, const StepPlanner::Plan& plan, std::int64_t tau) {
  // One scan finds the first NaN/Inf and the first overflowing element. The order of the reports is the
  // reference's: a NaN/Inf event is reported as such even when the gate would have skipped it; then a zero-gate
  // skip (which still synchronizes the fragment); then an overflow.
  constexpr std::uint64_t kNone = std::numeric_limits<std::uint64_t>::max();
  // The overflow rule of every optimizer (the Adam family's, and since issue 16 Nesterov's and SDM's, whose σ is
  // 1 or 1/(1 + τ)); σ = 0 where the event is not applied, so that only NaN/Inf is looked for.
  const float sigma = plan.report.applied ? plan.report.sigma : 0.0f;
  std::atomic<std::uint64_t> first_nonfinite{kNone}, first_overflow{kNone};
  const auto lower_to = [](std::atomic<std::uint64_t>& first, std::uint64_t i) {
    std::uint64_t seen = first.load();
    while (i < seen && !first.compare_exchange_weak(seen, i)) {
    }
  };
  const StepChunk* chunks = planner_.chunks().data();
  const std::size_t first_chunk = planner_.chunk_begin(plan.fragment);
  pool_.parallel_for(planner_.chunk_begin(plan.fragment + 1) - first_chunk, [&](std::uint64_t begin, std::uint64_t end) {
    for (std::uint64_t n = begin; n < end; ++n) {
      const std::size_t chunk = first_chunk + n;
      const StepChunk& c = chunks[chunk];
      const float* grad = operands.at(chunk, c).grad;
      if (!any_refused(grad, c.count, sigma)) continue;
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
  if (first_nonfinite.load() != kNone) {
    StepReport report;
    report.applied = false;
    report.reason = reference::SkipReason::nonfinite_gradient;
    report.nonfinite_index = first_nonfinite.load();
    report.tau_effective = tau;  // as the reference: such an event never reaches the gate
    report.sigma = 0.0f;
    return report;
  }
  StepReport report = plan.report;
  if (report.applied && first_overflow.load() != kNone) {
    report.applied = false;
    report.reason = reference::SkipReason::overflowing_gradient;
    report.nonfinite_index = first_overflow.load();
  }
  return report;
}

StepReport CpuOptimizer::run(const Operands& operands, std::size_t params_size, std::size_t grad_size,
                             std::int64_t tau, std::size_t fragment) {
  StepPlanner::Plan plan = planner_.plan(params_size, grad_size, tau, fragment);
  const StepReport report = scan(operands, plan, tau);
  if (!report.applied) {
    if (report.reason == reference::SkipReason::zero_gate) planner_.commit_zero_gate_skip(plan);
    return report;
  }

  state_.bind(plan);
  StepArgs fallback_args = plan.args;
  fallback_args.state = StateFormat::fp32;
  const BlockFunction step_q8_or_only = block_function_for(plan.args);
  const BlockFunction step_fallback = block_function_for(fallback_args);
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
  planner_.commit(plan);
  return report;
}

std::vector<std::string> CpuOptimizer::buffer_names() const { return planner_.buffer_names(); }

void CpuOptimizer::read_buffer(std::string_view name, std::span<float> out) const {
  state_.read(planner_, planner_.buffer_to_read(name, out.size()), out);
}

void require_same_state_layout(const StepConfig& now, const StepConfig& next) {
  const auto differs = [](const char* what) {
    throw reference::InputError(std::string("new hyperparameters must keep the optimizer's ") + what +
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

std::vector<unsigned char> CpuOptimizer::save_bytes() const { return state_bytes(planner_, state_); }

void CpuOptimizer::load_bytes(std::span<const unsigned char> bytes) {
  adopt(parse_state_bytes(bytes, "the fast-path state", planner_, state_));
}

void CpuOptimizer::adopt(LoadedState&& loaded) {
  planner_.set_raw_counters(std::move(loaded.counters));
  state_ = std::move(loaded.state);
}

}  // namespace cgad::fastpath
