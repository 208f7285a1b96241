// What the Python package (python/) needs from the CPU fast path, checked bit for bit: the step over a table of
// per-tensor pointers (torch parameters updated where they lie) against the contiguous step over the same
// tensors concatenated -- over tensor layouts whose boundaries fall inside 256-blocks and around min_q8_size,
// every format, both q8 semantics, 1-3 threads, PA-CGAD fragments and refused events --, the preview that changes
// nothing, the in-memory state bytes (one format with the state file), and new hyperparameters between steps.
#include "support/fastpath_kernel_emulation.hpp"
#include "support/fastpath_test_support.hpp"

#include "cgad/fastpath/detail/tensor_batch.hpp"
#include "cgad/fastpath/detail/replan.hpp"
#include "cgad/fastpath/detail/tensor_table.hpp"
#include "cgad/fastpath/detail/table_stepper_internals.hpp"
#include "cgad/fastpath/thread_pool.hpp"

#include "cgad/fastpath/state_file.hpp"
#include "cgad/core/errors.hpp"
#include "cgad/fastpath/detail/cpu_optimizer_internals.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <memory>
#include <numeric>
#include <unistd.h>

using cgad::fastpath::detail::host_state_of;

namespace cgad::fastpath {
namespace {

using core::OptimizerKind;
using testing::all_format_configs;
using testing::describe;
using testing::expect_same_report;
using testing::Params;
using testing::random_vector;
using testing::state_bytes;

// Layouts beyond the shared ones: a tensor boundary one element before and after a block's, many one-element
// tensors, and an empty tensor first and last.
std::vector<std::vector<std::size_t>> layouts() {
  std::vector<std::vector<std::size_t>> out = testing::tensor_layouts();
  out.push_back({255, 257, 256});
  out.push_back({1, 1, 1, 300, 1, 1});
  out.push_back({0, 700, 0});
  return out;
}

// The tensors as separate allocations, in the optimizer's parameter format, with the pointer tables a caller
// such as the Python package passes.
struct Tensors {
  std::vector<std::vector<float>> fp32;
  std::vector<std::vector<bf16>> bf16_values;

  Tensors(const StepConfig& config, const std::vector<std::size_t>& sizes, const std::vector<float>& initial) {
    std::size_t at = 0;
    for (const std::size_t n : sizes) {
      const std::vector<float> part(initial.begin() + static_cast<std::ptrdiff_t>(at),
                                    initial.begin() + static_cast<std::ptrdiff_t>(at + n));
      const Params p(config, part);
      fp32.push_back(p.fp32);
      bf16_values.push_back(p.bf16_values);
      at += n;
    }
  }
  // `grad` is the whole vector's pseudo-gradient (every tensor's, as a torch .grad per parameter).
  StepReport step(CpuOptimizer& opt, const std::vector<std::vector<float>>& grads, std::int64_t tau,
                  std::size_t fragment = 0) {
    std::vector<const float*> g;
    for (const auto& x : grads) g.push_back(x.empty() ? nullptr : x.data());
    if (opt.config().params == ParamFormat::fp32) {
      std::vector<float*> p;
      for (auto& x : fp32) p.push_back(x.empty() ? nullptr : x.data());
      return opt.step(std::span<float* const>(p), std::span<const float* const>(g), tau, fragment);
    }
    std::vector<bf16*> p;
    for (auto& x : bf16_values) p.push_back(x.empty() ? nullptr : x.data());
    return opt.step(std::span<bf16* const>(p), std::span<const float* const>(g), tau, fragment);
  }
  // The parameters' bytes in the order Params::bytes() gives for the concatenated vector.
  std::vector<unsigned char> bytes() const {
    std::vector<unsigned char> out;
    for (const auto& x : fp32) {
      const auto* b = reinterpret_cast<const unsigned char*>(x.data());
      out.insert(out.end(), b, b + x.size() * 4);
    }
    for (const auto& x : bf16_values) {
      const auto* b = reinterpret_cast<const unsigned char*>(x.data());
      out.insert(out.end(), b, b + x.size() * 2);
    }
    return out;
  }
};

std::vector<std::vector<float>> split(const std::vector<float>& whole, const std::vector<std::size_t>& sizes) {
  std::vector<std::vector<float>> out;
  std::size_t at = 0;
  for (const std::size_t n : sizes) {
    out.emplace_back(whole.begin() + static_cast<std::ptrdiff_t>(at),
                     whole.begin() + static_cast<std::ptrdiff_t>(at + n));
    at += n;
  }
  return out;
}

// Every format configuration of `kind` (both q8 semantics), each also with min_q8_size = 300.
std::vector<StepConfig> configs(OptimizerKind kind) {
  std::vector<StepConfig> out;
  for (StepConfig config : all_format_configs(kind)) {
    out.push_back(config);
    config.min_q8_size = 300;
    out.push_back(config);
  }
  return out;
}

// Events with mixed staleness; the fourth holds a NaN in the last tensor (refused whole by both steps), the
// fifth a gradient past the overflow rule (refused too).
constexpr std::int64_t kTaus[] = {0, 3, 1, 2, 7, 40, 0};

std::vector<float> event_grad(std::size_t n, std::size_t event) {
  std::vector<float> g = random_vector(n, 900 + static_cast<std::uint32_t>(event));
  if (n != 0 && event == 3) g[n - 1] = std::numeric_limits<float>::quiet_NaN();
  if (n != 0 && event == 4) g[n / 2] = 0x1p100f;
  return g;
}

TEST(FastpathTensorTable, BitIdenticalToTheContiguousStep) {
  for (const OptimizerKind kind : {OptimizerKind::cgad, OptimizerKind::adam_decay, OptimizerKind::adam,
                                   OptimizerKind::nesterov, OptimizerKind::sdm}) {
    for (const StepConfig& config : configs(kind)) {
      for (const auto& sizes : layouts()) {
        for (const unsigned threads : {1u, 2u, 3u}) {
          const std::string where = describe(config) + " threads=" + std::to_string(threads);
          CpuOptimizer contiguous(config, sizes, threads), table(config, sizes, threads);
          const std::size_t n = contiguous.parameters();
          const std::vector<float> initial = random_vector(n, 17);
          Params whole(config, initial);
          Tensors tensors(config, sizes, initial);
          for (std::size_t e = 0; e < std::size(kTaus); ++e) {
            const std::vector<float> grad = event_grad(n, e);
            const StepReport a = whole.step(contiguous, grad, kTaus[e]);
            const StepReport b = tensors.step(table, split(grad, sizes), kTaus[e]);
            expect_same_report(a, b, where + " event " + std::to_string(e));
            ASSERT_EQ(whole.bytes(), tensors.bytes()) << where << " event " << e;
            ASSERT_EQ(state_bytes(contiguous), state_bytes(table)) << where << " event " << e;
          }
        }
      }
    }
  }
}

// PA-CGAD: fragments cut the concatenated vector across tensor boundaries; a fragment's step reads only its part of
// each tensor's pseudo-gradient (the rest is NaN here, and tensors wholly outside it pass null).
TEST(FastpathTensorTable, PaCgadFragmentsAcrossTensorsMatchTheContiguousStep) {
  for (StepConfig config : configs(OptimizerKind::pa_cgad)) {
    config.fragments = 3;
    for (const auto& sizes : layouts()) {
      if (std::accumulate(sizes.begin(), sizes.end(), std::size_t{0}) < config.fragments) continue;
      for (const unsigned threads : {1u, 3u}) {
        const std::string where = describe(config) + " threads=" + std::to_string(threads);
        CpuOptimizer contiguous(config, sizes, threads), table(config, sizes, threads);
        const std::size_t n = contiguous.parameters();
        const std::vector<float> initial = random_vector(n, 23);
        Params whole(config, initial);
        Tensors tensors(config, sizes, initial);
        const auto& layout = contiguous.layout();
        for (std::size_t e = 0; e < 9; ++e) {
          const std::size_t f = (e * 2) % config.fragments;
          const std::vector<float> all = random_vector(n, 300 + static_cast<std::uint32_t>(e));
          const std::size_t offset = layout.offset(f), size = layout.size(f);
          std::vector<float> masked(n, std::numeric_limits<float>::quiet_NaN());
          std::copy(all.begin() + static_cast<std::ptrdiff_t>(offset),
                    all.begin() + static_cast<std::ptrdiff_t>(offset + size),
                    masked.begin() + static_cast<std::ptrdiff_t>(offset));
          std::vector<std::vector<float>> grads = split(masked, sizes);
          for (std::size_t k = 0, at = 0; k < sizes.size(); at += sizes[k], ++k) {
            if (at + sizes[k] <= offset || at >= offset + size) grads[k].clear();  // no element in fragment f: null
          }
          const std::vector<float> slice(all.begin() + static_cast<std::ptrdiff_t>(offset),
                                         all.begin() + static_cast<std::ptrdiff_t>(offset + size));
          const StepReport a = whole.step(contiguous, slice, static_cast<std::int64_t>(e % 4), f);
          const StepReport b = tensors.step(table, grads, static_cast<std::int64_t>(e % 4), f);
          expect_same_report(a, b, where + " event " + std::to_string(e));
          ASSERT_EQ(whole.bytes(), tensors.bytes()) << where << " event " << e;
          ASSERT_EQ(state_bytes(contiguous), state_bytes(table)) << where << " event " << e;
          contiguous.advance_round();
          table.advance_round();
        }
      }
    }
  }
}

// Per-tensor optimizer state in separate allocations, as cgad.torch allocates it on the parameter's device (one
// buffer per moment's values, one per q8 absmax), starting from HostState::zeros' values, with the TensorState
// entries tensor_state_entry makes over them (as CudaTableStepper::entry does); whole() puts it back into the whole
// vector's buffers (values at the tensor's first element, absmax or fallback moments at its first slot) to compare
// with a CpuOptimizer's HostState.
struct OwnedStates {
  std::vector<std::size_t> begin, chunk_tensor, first_chunk, first_slot;
  std::vector<std::vector<unsigned char>> buffers;  // per tensor and moment: values, then absmax
  std::vector<TensorState> entries;

  explicit OwnedStates(const StepPlanner& planner)
      : begin(tensor_begins(planner.tensor_sizes())),
        chunk_tensor(chunk_tensors(planner, begin)),
        first_chunk(tensor_first_chunks(chunk_tensor, planner.tensor_sizes().size())),
        first_slot(tensor_first_slots(planner, chunk_tensor, planner.tensor_sizes().size())) {
    const HostState zeros = HostState::zeros(planner);
    const std::size_t tensors = planner.tensor_sizes().size();
    buffers.reserve(4 * tensors);  // no reallocation: the entries point into the buffers
    for (std::size_t k = 0; k < tensors; ++k) {
      std::vector<void*> pointers;
      for (int m = 0; m < planner.moments(); ++m) {
        const auto [values, absmax] = regions(zeros, planner, k, m);
        buffers.emplace_back(values.first, values.first + values.second);
        buffers.emplace_back(absmax.first, absmax.first + absmax.second);
        pointers.push_back(buffers[buffers.size() - 2].data());
        pointers.push_back(buffers.back().data());
      }
      entries.push_back(tensor_state_entry(planner, first_chunk, k, pointers));
    }
  }
  // Tensor k's moment m within the whole buffers of `s`: its values' and its absmax's bytes (start, length).
  std::pair<std::pair<unsigned char*, std::size_t>, std::pair<unsigned char*, std::size_t>> regions(
      const HostState& s, const StepPlanner& planner, std::size_t k, int m) const {
    auto& w = const_cast<HostState&>(s);
    const TensorStateShape shape = tensor_state_shape(planner, first_chunk, k);
    const auto bytes = [](auto& v, std::size_t at, std::size_t n) {
      return std::pair{reinterpret_cast<unsigned char*>(v.data() + at), n * sizeof(v[0])};
    };
    if (shape.kind == "fp32-fallback") return {bytes(w.fp32[m], first_slot[k], shape.values), {nullptr, 0}};
    switch (planner.config().state) {
      case StateFormat::fp32:
        return {bytes(w.fp32[m], begin[k], shape.values), {nullptr, 0}};
      case StateFormat::bf16:
        return {bytes(w.bf16_values[m], begin[k], shape.values), {nullptr, 0}};
      case StateFormat::q8:
        break;
    }
    return {bytes(w.codes[m], begin[k], shape.values), bytes(w.absmax[m], first_slot[k], shape.absmax)};
  }
  HostState whole(const StepPlanner& planner) const {
    HostState out = HostState::zeros(planner);
    for (std::size_t k = 0, b = 0; k < entries.size(); ++k) {
      for (int m = 0; m < planner.moments(); ++m, b += 2) {
        const auto [values, absmax] = regions(out, planner, k, m);
        std::copy(buffers[b].begin(), buffers[b].end(), values.first);
        std::copy(buffers[b + 1].begin(), buffers[b + 1].end(), absmax.first);
      }
    }
    return out;
  }
};

// θ and Δ tables as the host passes them to table_batch: one pointer per tensor (null for an empty gradient).
std::vector<void*> param_pointers(const StepConfig& config, Tensors& tensors) {
  std::vector<void*> out;
  for (std::size_t k = 0; k < tensors.fp32.size(); ++k) {
    out.push_back(config.params == ParamFormat::fp32 ? static_cast<void*>(tensors.fp32[k].data())
                                                     : static_cast<void*>(tensors.bf16_values[k].data()));
  }
  return out;
}
template <class T>
std::vector<T*> pointers(std::vector<std::vector<T>>& tensors) {
  std::vector<T*> out;
  for (auto& t : tensors) out.push_back(t.data());
  return out;
}
std::vector<float> join(const std::vector<std::vector<float>>& parts) {
  std::vector<float> out;
  for (const auto& part : parts) out.insert(out.end(), part.begin(), part.end());
  return out;
}
std::vector<std::uint32_t> bits_of(const std::vector<float>& values) {
  std::vector<std::uint32_t> out;
  for (const float x : values) out.push_back(float_to_bits(x));
  return out;
}
std::vector<const float*> grad_pointers(const std::vector<std::vector<float>>& grads) {
  std::vector<const float*> out;
  for (const auto& g : grads) out.push_back(g.empty() ? nullptr : g.data());
  return out;
}

// Chunks [launch.first_chunk, launch.end_chunk) of a CUDA table launch run by the agent's emulated block, each at
// table_chunk_args's operands from the batch the host forms (table_batch); θ, Δ and each tensor's own state lie in
// their own 16-byte aligned allocations, so the agent must vectorize exactly the full chunks whose place in their
// tensor (and fallback slot in the tensor's) is a multiple of 4.
void emulate_launch(const StepPlanner& planner, const StepArgs& step, const TableLaunch& launch,
                    const OwnedStates& owned, std::span<void* const> params, std::span<const float* const> grads,
                    testing::KernelPaths& paths, const std::string& where) {
  EXPECT_LE(launch.end_tensor - launch.first_tensor, static_cast<std::size_t>(agent::kTableBatch)) << where;
  const agent::TensorBatch batch = table_batch(launch, owned.begin, owned.first_slot, params, grads, owned.entries);
  for (std::size_t c = launch.first_chunk; c < launch.end_chunk; ++c) {
    const StepChunk& chunk = planner.chunks()[c];
    const std::size_t k = owned.chunk_tensor[c];
    if (grads[k] == nullptr) continue;  // left out (table_step_kernel's left_out)
    const StepArgs a = agent::table_chunk_args(step, chunk, k, batch);
    const std::size_t at = chunk.begin - owned.begin[k];
    const bool vectorized = testing::vectorizable(chunk, at, at, chunk.slot - owned.first_slot[k]);
    testing::emulate_kernel_block(step, chunk, a, vectorized, paths, where);
  }
}

// The CUDA table step (cuda_table_stepper.cpp's step_table and cuda_kernels.cu's table_step_kernel) on the host,
// over caller-owned per-tensor state: the launches table_launches cuts, each with the TensorBatch of the tensors'
// pointers (θ, Δ and state) the host fills, every chunk of a launch at table_chunk_args's operands (through the
// chunk → tensor map) run by the agent's emulated block. One event per fragment, applied (the scan, a plain
// elementwise check, is not part of the agent).
std::pair<std::vector<unsigned char>, std::vector<unsigned char>> emulate_table_kernel(
    const StepConfig& config, const std::vector<std::size_t>& sizes, const std::vector<float>& initial,
    const std::vector<std::vector<std::vector<float>>>& events, testing::KernelPaths& paths, const std::string& where) {
  StepPlanner planner(config, sizes);
  OwnedStates owned(planner);
  Tensors tensors(config, sizes, initial);
  for (std::size_t e = 0; e < events.size(); ++e) {
    const std::size_t f = e % config.fragments;
    StepPlanner::Plan plan =
        planner.plan(planner.parameters(), planner.fragment_size(f), static_cast<std::int64_t>(e % 3), f);
    EXPECT_TRUE(plan.scheduled.applied) << where;
    const std::vector<void*> params = param_pointers(config, tensors);
    const std::vector<const float*> grads = grad_pointers(events[e]);
    for (const TableLaunch& launch :
         table_launches(owned.chunk_tensor, planner.chunk_begin(f), planner.chunk_begin(f + 1), agent::kTableBatch)) {
      emulate_launch(planner, plan.args, launch, owned, params, grads, paths, where);
    }
    planner.commit(plan, StepOutcome::applied);
    planner.advance_round();
  }
  return {tensors.bytes(), testing::state_arrays(owned.whole(planner))};
}

// Against the CPU table step, bit for bit, both over per-tensor state the caller owns: every optimizer and format
// (both q8 semantics, with and without min_q8_size), a tensor left out of one event, over layouts with more tensors
// than one launch holds (kTableBatch + 7, 2·kTableBatch + 1, so a step
// spans two and three launches) and tensor boundaries off 16-byte multiples, and PA-CGAD fragments that cut
// tensors. The emulation must reach the vectorized path, the guarded path of a full misaligned chunk and the tail.
TEST(FastpathTensorTable, CudaTableKernelEmulatedOnTheHostMatchesTheCpuTableStep) {
  std::vector<std::vector<std::size_t>> many = {{257, 256, 0, 300}, {}, {}};
  for (int k = 0; k < agent::kTableBatch + 7; ++k) many[1].push_back(static_cast<std::size_t>((k * 37) % 300 + 1));
  for (int k = 0; k <= 2 * agent::kTableBatch; ++k) many[2].push_back(k == agent::kTableBatch ? 600 : 3);
  testing::KernelPaths paths;
  std::vector<std::pair<OptimizerKind, std::size_t>> kinds = {
      {OptimizerKind::cgad, 1},     {OptimizerKind::adam, 1}, {OptimizerKind::adam_decay, 1},
      {OptimizerKind::nesterov, 1}, {OptimizerKind::sdm, 1},  {OptimizerKind::pa_cgad, 3}};
  for (const auto& [kind, fragments] : kinds) {
    for (StepConfig config : configs(kind)) {
      config.fragments = fragments;
      for (const auto& sizes : many) {
        const std::string where = describe(config) + " tensors=" + std::to_string(sizes.size());
        TableStepper table(config, sizes, std::make_shared<ThreadPool>(2));
        OwnedStates states(detail::TableStepperInternals::planner(table));
        const std::size_t n = table.parameters();
        const std::vector<float> initial = random_vector(n, 29);
        std::vector<std::vector<std::vector<float>>> events;
        for (std::size_t e = 0; e < 2 * fragments + 1; ++e) {
          events.push_back(split(random_vector(n, 500 + static_cast<std::uint32_t>(e)), sizes));
        }
        events[1][0].clear();  // a parameter without a gradient: left out of event 1 by both steps
        Tensors tensors(config, sizes, initial);
        for (std::size_t e = 0; e < events.size(); ++e) {
          const std::vector<const float*> grads = grad_pointers(events[e]);
          const std::int64_t tau = static_cast<std::int64_t>(e % 3);
          const StepReport r = config.params == ParamFormat::fp32
                                   ? table.step(std::span<float* const>(pointers(tensors.fp32)), grads, states.entries,
                                                tau, e % fragments)
                                   : table.step(std::span<bf16* const>(pointers(tensors.bf16_values)), grads,
                                                states.entries, tau, e % fragments);
          ASSERT_TRUE(r.applied) << where;
          table.advance_round();
        }
        const auto [params, state] = emulate_table_kernel(config, sizes, initial, events, paths, where);
        ASSERT_EQ(params, tensors.bytes()) << where;
        ASSERT_EQ(state, testing::state_arrays(states.whole(detail::TableStepperInternals::planner(table)))) << where;
      }
    }
  }
  EXPECT_GT(paths.vectorized, 0u);
  EXPECT_GT(paths.guarded_full, 0u);
  EXPECT_GT(paths.tail, 0u);
  std::printf("table kernel paths emulated: %zu vectorized, %zu guarded full, %zu tail chunks\n", paths.vectorized,
              paths.guarded_full, paths.tail);
}

// One CUDA optimizer of a multi-group event (cuda_optimizer.cpp's preview and step_previewed, cuda_kernels.cu's
// kernels) on the host: the counters packed as on the device and changed only by the schedule and commit functions the
// one-thread kernels run (step_schedule.hpp), the planner replaced by replan() on new hyperparameters as
// set_hyperparameters replaces it (the device counters kept), the refusal scan over the fragment's Δ, the shared
// veto, and the table launches' chunks run by the agent's emulated block.
struct EmulatedCudaGroup {
  StepPlanner planner;
  OwnedStates owned;  // the group's state, as cgad.torch allocates it per parameter
  Tensors tensors;
  std::vector<std::int64_t> counters;  // t[P], last_sync[P], round, steps: the device's layout
  StepOutcome outcome = StepOutcome::applied;
  std::uint64_t refused_at = 0;
  ScheduledStep scheduled;
  StepEvent event;

  EmulatedCudaGroup(const StepConfig& config, const std::vector<std::size_t>& sizes, const std::vector<float>& initial)
      : planner(config, sizes), owned(planner), tensors(config, sizes, initial) {
    const std::size_t p = config.fragments;
    counters.assign(2 * p + 2, 0);
    std::fill(counters.begin() + static_cast<std::ptrdiff_t>(p), counters.begin() + static_cast<std::ptrdiff_t>(2 * p),
              -1);
  }
  CounterView view() {
    const std::size_t p = planner.config().fragments;
    return {counters.data(), counters.data() + p, counters.data() + 2 * p,
            reinterpret_cast<std::uint64_t*>(counters.data() + 2 * p + 1)};
  }
  // preview(): the schedule kernel, the scans, the refusal published; returns whether it vetoes the event.
  bool preview(const std::vector<std::vector<float>>& grads, std::int64_t tau, std::size_t fragment) {
    const StepPlanner::Plan plan =
        planner.prepare(planner.parameters(), planner.fragment_size(fragment), tau, fragment);
    const CounterView v = view();
    ScheduleConstants constants = planner.schedule_constants();
    event = plan.event;
    scheduled = schedule_step(constants, CounterValues{v.t, v.last_sync, *v.round, *v.steps}, plan.event);
    const float sigma = scheduled.applied ? scheduled.sigma : 0.0f;
    std::vector<float> whole;
    for (const auto& g : grads) whole.insert(whole.end(), g.begin(), g.end());
    bool nonfinite = false, overflow = false;
    std::uint64_t first_nonfinite = 0, first_overflow = 0;
    for (std::size_t i = 0; i < planner.fragment_size(fragment); ++i) {
      const float g = whole[plan.offset + i];
      if (!std::isfinite(g)) {
        if (!nonfinite) first_nonfinite = i;
        nonfinite = true;
      } else if (refuses_event(sigma, g) && !overflow) {
        first_overflow = i;
        overflow = true;
      }
    }
    outcome = outcome_of(scheduled, nonfinite, overflow);
    refused_at = outcome == StepOutcome::nonfinite ? first_nonfinite : first_overflow;
    return outcome == StepOutcome::nonfinite || outcome == StepOutcome::overflow;
  }
  StepReport report() const { return StepPlanner::report_of(event, scheduled, outcome, refused_at); }
  // step_previewed(): the fused launches and the commit, nothing while vetoed.
  void step(const std::vector<std::vector<float>>& grads, std::int64_t tau, std::size_t fragment, bool vetoed,
            testing::KernelPaths& paths, const std::string& where) {
    if (vetoed) return;
    StepPlanner::Plan plan = planner.prepare(planner.parameters(), planner.fragment_size(fragment), tau, fragment);
    if (outcome == StepOutcome::applied) {
      apply_schedule(plan.args, scheduled);  // as step_chunks does with the record's schedule
      const std::vector<void*> params = param_pointers(planner.config(), tensors);
      const std::vector<const float*> pointers = grad_pointers(grads);
      for (const TableLaunch& launch : table_launches(owned.chunk_tensor, planner.chunk_begin(fragment),
                                                      planner.chunk_begin(fragment + 1), agent::kTableBatch)) {
        emulate_launch(planner, plan.args, launch, owned, params, pointers, paths, where);
      }
    }
    commit_step(planner.schedule_constants(), view(), fragment, outcome);
  }
  StepCounters raw_counters() const {
    const std::size_t p = planner.config().fragments;
    StepCounters c;
    c.t.assign(counters.begin(), counters.begin() + static_cast<std::ptrdiff_t>(p));
    c.last_sync.assign(counters.begin() + static_cast<std::ptrdiff_t>(p),
                       counters.begin() + static_cast<std::ptrdiff_t>(2 * p));
    c.round = counters[2 * p];
    c.steps = static_cast<std::uint64_t>(counters[2 * p + 1]);
    return c;
  }
};

// The hyperparameters of event e in a schedule: lr decays every event (an lr schedule), and from event 3 on alpha
// and tau_cut change too (PA-CGAD's table of σ(a) is rebuilt, so set_hyperparameters uploads a new one).
StepConfig scheduled_config(StepConfig config, std::size_t e) {
  const float decay = 1.0f / static_cast<float>(1 + e);
  config.adam.lr *= decay;
  config.nesterov.lr *= decay;
  if (e >= 3) {
    config.alpha = 0.05;
    config.tau_cut = 24;
  }
  return config;
}

// A cgad.torch optimizer of three CUDA param groups under an lr schedule (python/cgad/torch/_groups.py's
// step_cuda_event: set_hyperparameters on every group, every group previewed against one veto, then stepped), emulated
// on the host, against three CpuOptimizers stepped as the CPU groups are (set_hyperparameters, a preview of each, the
// steps only if no preview refused): bit for bit in parameters, state and counters, every group's report the same,
// for every optimizer (PA-CGAD with two fragments) and three different formats per event. Event 3 holds a NaN in the
// second group only and event 5 an overflowing element in the third: each changes no group.
TEST(FastpathTensorTable, ThreeCudaGroupsWithAnLrScheduleEmulatedOnTheHostMatchThreeCpuGroups) {
  const std::vector<std::vector<std::size_t>> sizes = {{257, 0, 300}, {5, 1024}, {agent::kTableBatch + 3, 700}};
  testing::KernelPaths paths;
  std::size_t refused_events = 0;
  for (const auto& [kind, fragments] :
       std::vector<std::pair<OptimizerKind, std::size_t>>{{OptimizerKind::cgad, 1},
                                                          {OptimizerKind::adam, 1},
                                                          {OptimizerKind::adam_decay, 1},
                                                          {OptimizerKind::nesterov, 1},
                                                          {OptimizerKind::sdm, 1},
                                                          {OptimizerKind::pa_cgad, 2}}) {
    const std::vector<StepConfig> all = configs(kind);
    for (std::size_t pick = 0; pick + 2 < all.size(); pick += 3) {
      std::vector<StepConfig> base;
      std::vector<std::unique_ptr<CpuOptimizer>> cpu;
      std::vector<std::unique_ptr<EmulatedCudaGroup>> cuda;
      std::vector<Tensors> cpu_tensors;
      std::string where = "";
      for (std::size_t g = 0; g < 3; ++g) {
        StepConfig config = all[pick + g];
        config.fragments = fragments;
        base.push_back(config);
        where += describe(config) + (g < 2 ? " | " : "");
        const std::vector<std::size_t>& layout = sizes[g];
        cpu.push_back(std::make_unique<CpuOptimizer>(config, layout, 2));
        const std::vector<float> initial = random_vector(cpu.back()->parameters(), 40 + static_cast<std::uint32_t>(g));
        cpu_tensors.emplace_back(config, layout, initial);
        cuda.push_back(std::make_unique<EmulatedCudaGroup>(config, layout, initial));
      }
      for (std::size_t e = 0; e < 7; ++e) {
        const std::int64_t tau = static_cast<std::int64_t>(e % 3);
        const std::size_t fragment = e % fragments;
        const std::string at = where + " event " + std::to_string(e);
        std::vector<std::vector<std::vector<float>>> grads;
        for (std::size_t g = 0; g < 3; ++g) {
          std::vector<float> whole = random_vector(cpu[g]->parameters(), 700 + static_cast<std::uint32_t>(10 * e + g));
          if (e == 3 && g == 1) whole[whole.size() - 1] = std::numeric_limits<float>::quiet_NaN();
          if (e == 5 && g == 2) whole[cpu[g]->parameters() - 1] = 0x1p100f;
          grads.push_back(split(whole, sizes[g]));
        }
        bool cpu_refused = false, veto = false;
        std::vector<StepReport> previews;
        for (std::size_t g = 0; g < 3; ++g) {
          const StepConfig next = scheduled_config(base[g], e);
          cpu[g]->set_hyperparameters(next);
          cuda[g]->planner = replan(cuda[g]->planner, next);
          std::vector<const float*> pointers;
          for (const auto& x : grads[g]) pointers.push_back(x.empty() ? nullptr : x.data());
          previews.push_back(cpu[g]->preview(pointers, tau, fragment));
          cpu_refused = cpu_refused || previews.back().reason == core::SkipReason::nonfinite_gradient ||
                        previews.back().reason == core::SkipReason::overflowing_gradient;
          veto = cuda[g]->preview(grads[g], tau, fragment) || veto;
        }
        ASSERT_EQ(cpu_refused, veto) << at;
        ASSERT_EQ(veto, e == 3 || e == 5) << at;
        refused_events += veto ? 1 : 0;
        for (std::size_t g = 0; g < 3; ++g) {
          expect_same_report(cuda[g]->report(), previews[g], at + " group " + std::to_string(g));
          if (!cpu_refused) cpu_tensors[g].step(*cpu[g], grads[g], tau, fragment);
          cuda[g]->step(grads[g], tau, fragment, veto, paths, at);
          if (kind == OptimizerKind::pa_cgad) {
            cpu[g]->advance_round();
            *cuda[g]->view().round += 1;
          }
        }
        for (std::size_t g = 0; g < 3; ++g) {
          ASSERT_EQ(cuda[g]->tensors.bytes(), cpu_tensors[g].bytes()) << at << " group " << g;
          ASSERT_EQ(testing::state_arrays(cuda[g]->owned.whole(cuda[g]->planner)),
                    testing::state_arrays(host_state_of(*cpu[g])))
              << at << " group " << g;
          const StepCounters c = cuda[g]->raw_counters(), expected = cpu[g]->raw_counters();
          ASSERT_EQ(c.t, expected.t) << at;
          ASSERT_EQ(c.last_sync, expected.last_sync) << at;
          ASSERT_EQ(c.round, expected.round) << at;
          ASSERT_EQ(c.steps, expected.steps) << at;
        }
      }
    }
  }
  EXPECT_GT(refused_events, 0u);
  EXPECT_GT(paths.vectorized, 0u);
  EXPECT_GT(paths.tail, 0u);
}

TEST(FastpathTensorTable, PreviewReportsTheStepAndChangesNothing) {
  for (const StepConfig& config : configs(OptimizerKind::cgad)) {
    const std::vector<std::size_t> sizes{257, 0, 300, 1};
    CpuOptimizer opt(config, sizes, 2);
    const std::size_t n = opt.parameters();
    Tensors tensors(config, sizes, random_vector(n, 3));
    tensors.step(opt, split(random_vector(n, 4), sizes), 1);
    for (std::size_t e = 0; e < std::size(kTaus); ++e) {
      const auto grads = split(event_grad(n, e), sizes);
      std::vector<const float*> g;
      for (const auto& x : grads) g.push_back(x.empty() ? nullptr : x.data());
      const auto params_before = tensors.bytes();
      const auto state_before = state_bytes(opt);
      const StepReport preview = opt.preview(g, kTaus[e]);
      ASSERT_EQ(params_before, tensors.bytes());
      ASSERT_EQ(state_before, state_bytes(opt));
      expect_same_report(preview, tensors.step(opt, grads, kTaus[e]), describe(config) + " event " + std::to_string(e));
    }
  }
}

// A step wakes the pool once (docs/design.md §5, "One dispatch per step"): its refusal scan and its update are one
// job whose parts meet at a barrier -- an applied event, a refused one (a NaN in the last part's chunks, which the
// other parts, having found nothing, must not step past), and a previewed one, whose step only updates. The layout
// (35 000 elements, 138 chunks) is past the serial threshold, so that the two threads split it.
TEST(FastpathTensorTable, AStepIsOneDispatchAndARefusalInAnyPartChangesNothing) {
  for (const StepConfig& config : configs(OptimizerKind::cgad)) {
    const std::vector<std::size_t> sizes{20000, 15000};
    const auto pool = std::make_shared<ThreadPool>(2);
    TableStepper table(config, sizes, pool);
    OwnedStates states(detail::TableStepperInternals::planner(table));
    const std::size_t n = table.parameters();
    Tensors tensors(config, sizes, random_vector(n, 31));
    const auto step = [&](const std::vector<std::vector<float>>& grads, bool reuse_preview) {
      const std::vector<const float*> g = grad_pointers(grads);
      const std::uint64_t before = pool->dispatches();
      const StepReport r =
          config.params == ParamFormat::fp32
              ? table.step(std::span<float* const>(pointers(tensors.fp32)), g, states.entries, 1, 0, reuse_preview)
              : table.step(std::span<bf16* const>(pointers(tensors.bf16_values)), g, states.entries, 1, 0,
                           reuse_preview);
      EXPECT_EQ(pool->dispatches() - before, 1u) << describe(config);
      return r;
    };
    EXPECT_TRUE(step(split(random_vector(n, 32), sizes), false).applied);
    const auto params_before = tensors.bytes();
    const auto state_before = testing::state_arrays(states.whole(detail::TableStepperInternals::planner(table)));
    std::vector<float> bad = random_vector(n, 33);
    bad[n - 1] = std::numeric_limits<float>::quiet_NaN();
    const StepReport refused = step(split(bad, sizes), false);
    EXPECT_EQ(refused.reason, core::SkipReason::nonfinite_gradient) << describe(config);
    EXPECT_EQ(refused.nonfinite_index, n - 1);
    ASSERT_EQ(tensors.bytes(), params_before) << describe(config);
    ASSERT_EQ(testing::state_arrays(states.whole(detail::TableStepperInternals::planner(table))), state_before);
    const auto grads = split(random_vector(n, 34), sizes);
    EXPECT_TRUE(table.preview(grad_pointers(grads), 1, 0).applied);
    EXPECT_TRUE(step(grads, true).applied);
    EXPECT_NE(tensors.bytes(), params_before);
  }
}

// Δ checked where it is formed (docs/design.md §5): form_pseudo_gradient writes start − θ bit for bit and records
// its look at Δ; a step of those Δ then skips its scan and its bits are a raw Δ's step's. A formed Δ holding a NaN or
// an overflowing element is scanned by the step, which reports the first as a raw Δ's does and changes nothing; a
// step given other Δ pointers, or a second step, scans. Over a layout the threads split and one they do not.
TEST(FastpathTensorTable, AFormedPseudoGradientIsTheDifferenceAndItsStepSkipsTheScan) {
  for (const StepConfig& config : configs(OptimizerKind::cgad)) {
    for (const std::vector<std::size_t>& sizes :
         {std::vector<std::size_t>{20000, 0, 15000}, std::vector<std::size_t>{257, 300, 1}}) {
      const std::string where = describe(config) + " tensors=" + std::to_string(sizes.size());
      const auto pool = std::make_shared<ThreadPool>(2);
      TableStepper formed(config, sizes, pool), raw(config, sizes, pool);
      OwnedStates formed_states(detail::TableStepperInternals::planner(formed));
      OwnedStates raw_states(detail::TableStepperInternals::planner(raw));
      const std::size_t n = formed.parameters();
      const std::vector<float> initial = random_vector(n, 41);
      Tensors formed_params(config, sizes, initial), raw_params(config, sizes, initial);
      std::vector<std::vector<float>> deltas = split(std::vector<float>(n, 0.0f), sizes);
      const auto form = [&](const std::vector<std::vector<float>>& start) {
        formed.form_pseudo_gradient(grad_pointers(start), grad_pointers(formed_params.fp32), pointers(deltas));
      };
      if (config.params != ParamFormat::fp32) {
        EXPECT_THROW(form(split(initial, sizes)), core::InputError) << where;
        continue;
      }
      const auto step = [&](TableStepper& t, Tensors& p, OwnedStates& s, const std::vector<std::vector<float>>& g,
                            bool reuse) {
        return t.step(std::span<float* const>(pointers(p.fp32)), grad_pointers(g), s.entries, 1, 0, reuse);
      };
      const auto state_of = [&](const TableStepper& t, const OwnedStates& s) {
        return testing::state_arrays(s.whole(detail::TableStepperInternals::planner(t)));
      };
      for (int e = 0; e < 3; ++e) {
        std::vector<float> start = random_vector(n, 42 + static_cast<std::uint32_t>(e));
        for (std::size_t i = 0; i < n; ++i) start[i] += initial[i];
        form(split(start, sizes));
        std::vector<float> expected(n);
        for (std::size_t i = 0, k = 0, at = 0; i < n; ++i, ++at) {
          while (at == sizes[k]) at = 0, ++k;
          expected[i] = start[i] - formed_params.fp32[k][at];
        }
        ASSERT_EQ(bits_of(expected), bits_of(join(deltas))) << where;
        expect_same_report(step(formed, formed_params, formed_states, deltas, true),
                           step(raw, raw_params, raw_states, split(expected, sizes), false), where);
        ASSERT_EQ(formed_params.bytes(), raw_params.bytes()) << where;
        ASSERT_EQ(state_of(formed, formed_states), state_of(raw, raw_states)) << where;
      }
      // Formed with a NaN, or with an element past the overflow rule: the step scans and reports it, changing
      // nothing; so does a step given other Δ pointers than the formed ones.
      const auto params_before = formed_params.bytes();
      const std::vector<float> theta = join(formed_params.fp32);
      for (const float bad : {std::numeric_limits<float>::quiet_NaN(), 0x1p100f}) {
        std::vector<float> with_bad = theta;
        with_bad[n / 2] = bad;
        form(split(with_bad, sizes));
        const StepReport r = step(formed, formed_params, formed_states, deltas, true);
        EXPECT_EQ(r.reason,
                  std::isnan(bad) ? core::SkipReason::nonfinite_gradient : core::SkipReason::overflowing_gradient)
            << where;
        EXPECT_EQ(r.nonfinite_index, n / 2) << where;
        ASSERT_EQ(formed_params.bytes(), params_before) << where;
      }
      form(split(theta, sizes));
      auto other = deltas;
      other.back().back() = std::numeric_limits<float>::quiet_NaN();
      EXPECT_EQ(step(formed, formed_params, formed_states, other, true).reason, core::SkipReason::nonfinite_gradient);
      // The record is the step's only look: a NaN written behind it (which the caller vouches does not happen:
      // cgad.torch checks the version counters) is not seen. The next step, with no formation, scans again.
      form(split(theta, sizes));
      deltas.back().back() = std::numeric_limits<float>::quiet_NaN();
      EXPECT_TRUE(step(formed, formed_params, formed_states, deltas, true).applied) << where;
      EXPECT_EQ(step(formed, formed_params, formed_states, deltas, true).reason, core::SkipReason::nonfinite_gradient);
    }
  }
}

TEST(FastpathTensorTable, BadTablesAreRefusedAndChangeNothing) {
  StepConfig config = all_format_configs(OptimizerKind::cgad).front();
  const std::vector<std::size_t> sizes{10, 0, 5};
  CpuOptimizer opt(config, sizes, 1);
  std::vector<float> a(10, 1.0f), c(5, 1.0f), ga(10, 0.5f), gc(5, 0.5f);
  const auto before = state_bytes(opt);
  const auto refused = [&](std::vector<float*> p, std::vector<const float*> g, const std::string& expected) {
    try {
      opt.step(std::span<float* const>(p), std::span<const float* const>(g), 0);
      ADD_FAILURE() << "accepted a bad table (" << expected << ")";
    } catch (const core::InputError& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
    EXPECT_EQ(before, state_bytes(opt));
    EXPECT_EQ(a, std::vector<float>(10, 1.0f));
  };
  refused({a.data(), nullptr}, {ga.data(), nullptr, gc.data()}, "2 parameter pointers, the optimizer 3 tensors");
  refused({a.data(), nullptr, c.data()}, {ga.data(), nullptr}, "2 gradient pointers, the optimizer 3 tensors");
  refused({a.data(), nullptr, nullptr}, {ga.data(), nullptr, gc.data()}, "parameter pointer for tensor 2");
  refused({a.data(), nullptr, c.data()}, {nullptr, nullptr, gc.data()}, "gradient pointer for tensor 0");
  std::vector<bf16*> bf16_values{nullptr, nullptr, nullptr};
  std::vector<const float*> g{ga.data(), nullptr, gc.data()};
  EXPECT_THROW(opt.step(std::span<bf16* const>(bf16_values), std::span<const float* const>(g), 0), core::InputError);
}

// The in-memory bytes are the state file's bytes, and loading them resumes bit for bit; any corrupted byte, and
// bytes of another configuration, are refused with the state kept.
TEST(FastpathStateBytes, SameAsTheFileAndResumeBitForBit) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("cgad_state_bytes_" + std::to_string(::getpid()) + ".bin");
  for (const StepConfig& config : configs(OptimizerKind::cgad)) {
    const std::vector<std::size_t> sizes{257, 300, 45};
    CpuOptimizer opt(config, sizes, 2);
    const std::size_t n = opt.parameters();
    Params params(config, random_vector(n, 8));
    for (const std::int64_t tau : {0, 2, 5})
      params.step(opt, random_vector(n, 50 + static_cast<std::uint32_t>(tau)), tau);
    const std::vector<unsigned char> bytes = opt.save_bytes();
    opt.save(path);
    std::ifstream file(path, std::ios::binary);
    const std::vector<unsigned char> on_disk{std::istreambuf_iterator<char>(file), {}};
    ASSERT_EQ(bytes, on_disk) << describe(config);

    CpuOptimizer resumed(config, sizes, 3);
    resumed.load_bytes(bytes);
    ASSERT_EQ(state_bytes(opt), state_bytes(resumed)) << describe(config);
    Params copy = params;
    const auto grad = random_vector(n, 77);
    params.step(opt, grad, 3);
    copy.step(resumed, grad, 3);
    ASSERT_EQ(params.bytes(), copy.bytes()) << describe(config);
    ASSERT_EQ(state_bytes(opt), state_bytes(resumed)) << describe(config);

    const auto kept = state_bytes(resumed);
    for (std::size_t i = 0; i < bytes.size(); i += 1 + bytes.size() / 97) {
      std::vector<unsigned char> bad = bytes;
      bad[i] ^= 0x10;
      EXPECT_THROW(resumed.load_bytes(bad), core::InputError) << describe(config) << " byte " << i;
      ASSERT_EQ(kept, state_bytes(resumed));
    }
    std::vector<unsigned char> longer = bytes;
    longer.push_back(0);
    EXPECT_THROW(resumed.load_bytes(longer), core::InputError);
    EXPECT_THROW(resumed.load_bytes(std::span<const unsigned char>(bytes.data(), 10)), core::InputError);
    StepConfig other = config;
    other.adam.lr = 0.02f;
    CpuOptimizer different(other, sizes, 1);
    try {
      different.load_bytes(bytes);
      ADD_FAILURE() << "bytes of another lr accepted";
    } catch (const core::InputError& e) {
      EXPECT_NE(std::string(e.what()).find("the fast-path state was saved with another lr"), std::string::npos)
          << e.what();
    }
    CpuOptimizer other_layout(config, std::vector<std::size_t>{257, 345}, 1);
    EXPECT_THROW(other_layout.load_bytes(bytes), core::InputError);
  }
  std::filesystem::remove(path);
}

// New hyperparameters keep the state and the counters: switching the lr away and back before a step gives the
// never-switched run bit for bit, a step at another lr moves the parameters differently, and changes of what
// the state depends on are refused with the configuration kept.
TEST(FastpathHyperparameters, NewLearningRateKeepsTheState) {
  for (const StepConfig& config : configs(OptimizerKind::cgad)) {
    const std::vector<std::size_t> sizes{300, 257};
    CpuOptimizer plain(config, sizes, 2), switched(config, sizes, 2);
    const std::size_t n = plain.parameters();
    Params a(config, random_vector(n, 1)), b = a;
    StepConfig faster = config;
    faster.adam.lr = config.adam.lr * 4.0f;
    for (const std::int64_t tau : {0, 1, 4}) {
      const auto grad = random_vector(n, 60 + static_cast<std::uint32_t>(tau));
      switched.set_hyperparameters(faster);
      ASSERT_EQ(state_bytes(plain), state_bytes(switched)) << describe(config);
      EXPECT_EQ(switched.config().adam.lr, faster.adam.lr);
      switched.set_hyperparameters(config);
      a.step(plain, grad, tau);
      b.step(switched, grad, tau);
      ASSERT_EQ(a.bytes(), b.bytes()) << describe(config);
      ASSERT_EQ(state_bytes(plain), state_bytes(switched)) << describe(config);
    }
    switched.set_hyperparameters(faster);
    const auto grad = random_vector(n, 99);
    a.step(plain, grad, 0);
    b.step(switched, grad, 0);
    EXPECT_NE(a.bytes(), b.bytes()) << describe(config);
    EXPECT_EQ(plain.raw_counters().t, switched.raw_counters().t);

    for (const auto& change : std::vector<std::function<void(StepConfig&)>>{
             [](StepConfig& c) { c.state = c.state == StateFormat::q8 ? StateFormat::fp32 : StateFormat::q8; },
             [](StepConfig& c) { c.seed += 1; }, [](StepConfig& c) { c.min_q8_size = 7; },
             [](StepConfig& c) { c.v_map = c.v_map == VMap::dynamic ? VMap::zero_free : VMap::dynamic; },
             [](StepConfig& c) { c.optimizer = OptimizerKind::adam; }, [](StepConfig& c) { c.adam.lr = -1.0f; }}) {
      StepConfig bad = faster;
      change(bad);
      EXPECT_THROW(switched.set_hyperparameters(bad), core::InputError) << describe(config);
      EXPECT_EQ(switched.config().adam.lr, faster.adam.lr);
      EXPECT_EQ(switched.config().state, config.state);
      EXPECT_EQ(switched.config().v_map, config.v_map);
    }
  }
}

}  // namespace
}  // namespace cgad::fastpath
