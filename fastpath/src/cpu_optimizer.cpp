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
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
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

// A q8 moment's codes for one block (quantize_moment, block_step.hpp). They go to a local array first: a
// byte store through `out` may alias anything, which would stop the vectorizer; one memcpy writes them out.
template <class F>
CGAD_CPU_CLONES void quantize_block(const StepArgs& a, const MomentView& view, const float* fresh, float absmax,
                                    std::uint64_t count, const RandomWords* random, std::uint8_t* out) {
  constexpr bool stochastic = F::stochastic(StepArgs{});
  std::uint8_t codes[kQ8BlockSize];
  for (std::uint64_t j = 0; j < count; ++j) {
    codes[j] = quantize_moment<F>(a, view, fresh[j], absmax, random[stochastic ? j : 0]);
  }
  std::memcpy(out, codes, count);
}

// One block of the step (block_step.hpp), in three passes over the block so that each is a simple loop the
// compiler vectorizes: update every element (the per-element update, the same calls the CUDA kernel makes),
// then each q8 moment's new absmax, then its codes. F fixes the formats at compile time (one instantiation
// per configuration). Every element reads and writes only its own index of each buffer, so the update loop
// has no loop-carried dependence (ivdep says so to the vectorizer, which cannot prove that the caller's
// buffers do not overlap).
template <class F>
CGAD_CPU_CLONES void step_block(const StepArgs& args, std::uint64_t block) {
  // A local copy: no store of the step can reach it, so its pointers and coefficients stay in registers and
  // its fields may be read unconditionally.
  const StepArgs a = args;
  const std::uint64_t begin = block * kQ8BlockSize;
  const std::uint64_t count = std::min<std::uint64_t>(kQ8BlockSize, a.size - begin);
  constexpr bool q8 = F::state(StepArgs{}) == StateCode::q8;
  constexpr bool stochastic = F::stochastic(StepArgs{});
  constexpr int moments = F::family(StepArgs{}) == UpdateFamily::adam ? 2 : 1;
  float old_absmax[2] = {0.0f, 0.0f};
  if constexpr (q8) {
    for (int k = 0; k < moments; ++k) old_absmax[k] = a.moment[k].absmax[block];
  }
  float fresh[2][kQ8BlockSize];
  RandomWords random[stochastic ? kQ8BlockSize : 1] = {};  // nearest rounding reads no random bits
#pragma GCC ivdep
  for (std::uint64_t local = 0; local < count; ++local) {
    const std::uint64_t i = begin + local;
    const RandomWords& bits = random[stochastic ? local : 0];
    if constexpr (stochastic) random[local] = random_for<F>(a, i);
    float out[2];
    update_element<F>(a, i, a.grad[i], old_absmax, out, bits);
    for (int k = 0; k < moments; ++k) {
      if constexpr (q8) {
        fresh[k][local] = out[k];
      } else {
        store_moment_elementwise<F>(a, a.moment[k], i, out[k], bits);
      }
    }
  }
  if constexpr (q8) {
    for (int k = 0; k < moments; ++k) {
      const float absmax = block_absmax(fresh[k], count);
      args.moment[k].absmax[block] = absmax;
      quantize_block<F>(a, a.moment[k], fresh[k], absmax, count, random, a.moment[k].codes + begin);
    }
  }
}

// Whether any of values[0..count) is NaN or ±Inf (all exponent bits set), as a branch-free OR over the
// chunk so that the scan vectorizes; the caller then looks for the first such index.
CGAD_CPU_CLONES bool any_nonfinite(const float* values, std::uint64_t count) {
  std::uint32_t found = 0;
  for (std::uint64_t j = 0; j < count; ++j) {
    found |= static_cast<std::uint32_t>((float_to_bits(values[j]) & 0x7F800000u) == 0x7F800000u);
  }
  return found != 0;
}

using BlockFunction = void (*)(const StepArgs&, std::uint64_t);

// The instantiation of step_block for the step's runtime formats.
template <UpdateFamily Family, ParamCode Params, StateCode State>
BlockFunction pick_rounding(bool stochastic) {
  return stochastic ? &step_block<FixedFormats<Family, Params, State, true>>
                    : &step_block<FixedFormats<Family, Params, State, false>>;
}
template <UpdateFamily Family, ParamCode Params>
BlockFunction pick_state(const StepArgs& a) {
  switch (a.state) {
    case StateCode::fp32: return pick_rounding<Family, Params, StateCode::fp32>(a.stochastic);
    case StateCode::bf16: return pick_rounding<Family, Params, StateCode::bf16>(a.stochastic);
    case StateCode::q8: return pick_rounding<Family, Params, StateCode::q8>(a.stochastic);
  }
  return nullptr;
}
template <UpdateFamily Family>
BlockFunction pick_params(const StepArgs& a) {
  return a.params == ParamCode::fp32 ? pick_state<Family, ParamCode::fp32>(a) : pick_state<Family, ParamCode::bf16>(a);
}
BlockFunction block_function_for(const StepArgs& a) {
  return a.family == UpdateFamily::adam ? pick_params<UpdateFamily::adam>(a) : pick_params<UpdateFamily::nesterov>(a);
}

}  // namespace

CpuOptimizer::CpuOptimizer(const StepConfig& config, std::size_t parameters, unsigned threads)
    : planner_(config, parameters), state_(HostState::zeros(planner_)), pool_(threads) {}

StepReport CpuOptimizer::step(std::span<float> params, std::span<const float> grad, std::int64_t tau,
                              std::size_t fragment) {
  if (config().params != ParamFormat::fp32) {
    throw reference::InputError("this optimizer stores bf16 parameters; it was given fp32 ones");
  }
  return run(params.size(), params.data(), nullptr, grad, tau, fragment);
}

StepReport CpuOptimizer::step(std::span<bf16> params, std::span<const float> grad, std::int64_t tau,
                              std::size_t fragment) {
  if (config().params != ParamFormat::bf16) {
    throw reference::InputError("this optimizer stores fp32 parameters; it was given bf16 ones");
  }
  return run(params.size(), nullptr, params.data(), grad, tau, fragment);
}

StepReport CpuOptimizer::run(std::size_t params_size, float* params_fp32, bf16* params_bf16,
                             std::span<const float> grad, std::int64_t tau, std::size_t fragment) {
  StepPlanner::Plan plan = planner_.plan(params_size, grad.size(), tau, fragment);
  // The NaN/Inf check comes first, as in the reference's apply(): such an event is reported as nonfinite
  // even when the gate would have skipped it.
  std::atomic<std::uint64_t> first_bad{std::numeric_limits<std::uint64_t>::max()};
  pool_.parallel_for(grad.size(), [&](std::uint64_t begin, std::uint64_t end) {
    for (std::uint64_t chunk = begin; chunk < end; chunk += kQ8BlockSize) {
      const std::uint64_t stop = std::min<std::uint64_t>(chunk + kQ8BlockSize, end);
      if (!any_nonfinite(grad.data() + chunk, stop - chunk)) continue;
      std::uint64_t i = chunk;
      while (std::isfinite(grad[i])) ++i;
      std::uint64_t seen = first_bad.load();
      while (i < seen && !first_bad.compare_exchange_weak(seen, i)) {
      }
      return;
    }
  });
  if (first_bad.load() != std::numeric_limits<std::uint64_t>::max()) {
    StepReport report;
    report.applied = false;
    report.reason = reference::SkipReason::nonfinite_gradient;
    report.nonfinite_index = first_bad.load();
    report.tau_effective = tau;
    report.sigma = 0.0f;
    return report;
  }
  if (!plan.report.applied) return plan.report;

  state_.bind(plan);
  plan.args.grad = grad.data();
  plan.args.params_fp32 = params_fp32 == nullptr ? nullptr : params_fp32 + plan.offset;
  plan.args.params_bf16 = params_bf16 == nullptr ? nullptr : params_bf16 + plan.offset;
  const StepArgs& args = plan.args;
  const BlockFunction step_one = block_function_for(args);
  pool_.parallel_for(block_count(args.size), [&args, step_one](std::uint64_t begin, std::uint64_t end) {
    for (std::uint64_t block = begin; block < end; ++block) step_one(args, block);
  });
  planner_.commit(plan);
  return plan.report;
}

std::vector<std::string> CpuOptimizer::buffer_names() const {
  if (planner_.adam_family()) return {"m", "v"};
  return {"b"};
}

void CpuOptimizer::read_buffer(std::string_view name, std::span<float> out) const {
  const auto names = buffer_names();
  const auto it = std::find(names.begin(), names.end(), name);
  if (it == names.end()) throw reference::InputError("no state buffer named '" + std::string(name) + "'");
  if (out.size() != parameters()) {
    throw reference::InputError("buffer '" + std::string(name) + "' has " + std::to_string(parameters()) +
                                " elements, the output " + std::to_string(out.size()));
  }
  state_.read(planner_, static_cast<int>(it - names.begin()), out);
}

void CpuOptimizer::save(const std::filesystem::path& path) const {
  write_state_file(path, planner_, state_);
}

void CpuOptimizer::load(const std::filesystem::path& path) {
  LoadedState loaded = read_state_file(path, planner_, state_);
  planner_.set_raw_counters(std::move(loaded.counters));
  state_ = std::move(loaded.state);
}

}  // namespace cgad::fastpath
