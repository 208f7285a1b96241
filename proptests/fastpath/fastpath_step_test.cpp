// The CPU step: sizes around the block, thread-count invariance (bit patterns), the NaN/Inf and zero-gate
// skips, the q8 requantization from the pre-quantization moments, and PA-CGAD's fragments and ages against
// the reference.
#include "support/fastpath_kernel_emulation.hpp"
#include "support/fastpath_test_support.hpp"

#include "cgad/fastpath/cpu_isa.hpp"
#include "cgad/fastpath/detail/q8_maps.hpp"
#include "cgad/core/errors.hpp"
#include "cgad/reference/optimizers.hpp"
#include "cgad/fastpath/detail/cpu_optimizer_internals.hpp"
#include "cgad/fastpath/thread_pool.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>

using cgad::fastpath::detail::host_state_of;

namespace cgad::fastpath {
namespace {

using core::OptimizerKind;
using testing::all_format_configs;
using testing::describe;
using testing::Params;
using testing::random_vector;
using testing::state_bytes;

constexpr std::size_t kSizes[] = {0, 1, 255, 256, 257, 1000, 3 * 256 + 17};
constexpr OptimizerKind kKinds[] = {OptimizerKind::cgad, OptimizerKind::adam_decay, OptimizerKind::adam,
                                    OptimizerKind::nesterov, OptimizerKind::sdm};

// Runs three events (τ = 0, 2, 5) through an optimizer with `threads` threads; returns params and state bytes.
std::vector<unsigned char> run_three_steps(const StepConfig& config, const std::vector<std::size_t>& tensors,
                                           unsigned threads) {
  CpuOptimizer opt(config, tensors, threads);
  const std::size_t n = opt.parameters();
  Params params(config, random_vector(n, 11));
  for (const std::int64_t tau : {0, 2, 5}) {
    const StepReport report = params.step(opt, random_vector(n, 100 + static_cast<std::uint32_t>(tau)), tau);
    EXPECT_TRUE(report.applied);
  }
  std::vector<unsigned char> out = params.bytes();
  const std::vector<unsigned char> state = state_bytes(opt);
  out.insert(out.end(), state.begin(), state.end());
  return out;
}

// Every format configuration and the q8 ones with the zero-free v map, each also with min_q8_size = 300 (so that
// some tensors of the layouts keep fp32 state), over every tensor layout.
std::vector<StepConfig> configs_with_min_q8_size(OptimizerKind kind) {
  std::vector<StepConfig> out;
  std::vector<StepConfig> configs = all_format_configs(kind);
  for (const StepConfig& config : testing::zero_free_configs(kind)) configs.push_back(config);
  for (StepConfig config : configs) {
    out.push_back(config);
    config.min_q8_size = 300;
    out.push_back(config);
  }
  return out;
}

// The shared layouts are under the CPU backend's serial threshold (128 chunks, cpu_optimizer.cpp), where every
// thread count runs on the caller; one layout past it (35 000 elements, 138 chunks) is split across the threads.
TEST(FastpathStep, BitIdenticalForAnyThreadCount) {
  std::vector<std::vector<std::size_t>> layouts = testing::tensor_layouts();
  layouts.push_back({128 * 256 + 300, 2000, 17});
  for (const OptimizerKind kind : kKinds) {
    for (const StepConfig& config : configs_with_min_q8_size(kind)) {
      for (const auto& tensors : layouts) {
        const auto serial = run_three_steps(config, tensors, 1);
        for (const unsigned threads : {2u, 3u, 7u}) {
          ASSERT_EQ(serial, run_three_steps(config, tensors, threads)) << describe(config) << " threads=" << threads;
        }
      }
    }
  }
}

// fp32 and bf16 state are elementwise: element i of an n-element step equals the same element stepped alone
// (nearest rounding; stochastic rounding is keyed by the global index, so it is checked by thread invariance).
TEST(FastpathStep, ElementwiseFormatsDoNotDependOnTheSize) {
  for (const OptimizerKind kind : kKinds) {
    for (StepConfig config : all_format_configs(kind)) {
      if (config.state == StateFormat::q8 || config.rounding == Rounding::stochastic) continue;
      for (const std::size_t n : kSizes) {
        const auto initial = random_vector(n, 5);
        const auto grad = random_vector(n, 6);
        CpuOptimizer whole(config, n, 2);
        Params params(config, initial);
        params.step(whole, grad, 1);
        std::vector<float> m(n);
        whole.read_buffer(whole.buffer_names()[0], m);
        for (std::size_t i = 0; i < n; i += std::max<std::size_t>(1, n / 7)) {
          CpuOptimizer single(config, 1, 1);
          Params one(config, {initial[i]});
          one.step(single, {grad[i]}, 1);
          std::vector<float> m_one(1);
          single.read_buffer(single.buffer_names()[0], m_one);
          const float theta = config.params == ParamFormat::fp32 ? params.fp32[i] : to_float(params.bf16_values[i]);
          const float theta_one = config.params == ParamFormat::fp32 ? one.fp32[0] : to_float(one.bf16_values[0]);
          ASSERT_EQ(std::bit_cast<std::uint32_t>(theta), std::bit_cast<std::uint32_t>(theta_one))
              << describe(config) << " i=" << i;
          ASSERT_EQ(std::bit_cast<std::uint32_t>(m[i]), std::bit_cast<std::uint32_t>(m_one[0]))
              << describe(config) << " i=" << i;
        }
      }
    }
  }
}

// Moment k of q8 `state`: each block's absmax the max |moment| over exactly its (tail-aware) elements, each code
// the nearest to moment/absmax in `map`.
void expect_requantized(const HostState& state, int k, const std::vector<float>& moment, const Q8Map& map,
                        std::size_t n) {
  for (std::size_t block = 0; block * 256 < n; ++block) {
    const std::size_t end = std::min(n, block * 256 + 256);
    float absmax = 0;
    for (std::size_t i = block * 256; i < end; ++i) absmax = std::max(absmax, std::fabs(moment[i]));
    ASSERT_EQ(state.absmax[k][block], absmax) << "n=" << n << " block " << block;
    for (std::size_t i = block * 256; i < end; ++i) {
      ASSERT_EQ(state.codes[k][i], q8_nearest(q8_normalize(moment[i], absmax), map)) << "i=" << i;
    }
  }
}

// q8: one step from the zero state gives exactly the fp32-state moments before quantization (the dequantized
// old state is 0·absmax = 0); each block's absmax must be the max |moment| over exactly its (tail-aware)
// elements and each code the nearest to moment/absmax — and θ must equal the fp32-state θ, since it is
// updated from the pre-quantization moments. The same with the zero-free v map, under its codes.
TEST(FastpathStep, Q8RequantizesEachBlockFromThePreQuantizationMoments) {
  for (const OptimizerKind kind : kKinds) {
    for (const std::size_t n : kSizes) {
      StepConfig q8_config = all_format_configs(kind)[0];
      q8_config.params = ParamFormat::fp32;
      StepConfig fp32_config = q8_config;
      q8_config.state = StateFormat::q8;
      CpuOptimizer q8(q8_config, n, 3);
      CpuOptimizer exact(fp32_config, n, 3);
      Params q8_params(q8_config, random_vector(n, 1));
      Params exact_params(fp32_config, random_vector(n, 1));
      const auto grad = random_vector(n, 2);
      q8_params.step(q8, grad, 1);
      exact_params.step(exact, grad, 1);
      ASSERT_EQ(q8_params.bytes(), exact_params.bytes()) << describe(q8_config) << " n=" << n;
      for (int k = 0; k < host_state_of(q8).moments; ++k) {
        const Q8Map& map = dynamic_map(k == 1 ? Q8MapKind::unsigned_map : Q8MapKind::signed_map);
        const std::vector<float>& moment = host_state_of(exact).fp32[k];
        ASSERT_EQ(host_state_of(q8).absmax[k].size(), (n + 255) / 256);
        expect_requantized(host_state_of(q8), k, moment, map, n);
        if (k == 1) {
          StepConfig zero_free_config = q8_config;
          zero_free_config.v_map = VMap::zero_free;
          CpuOptimizer zero_free(zero_free_config, n, 3);
          Params zero_free_params(zero_free_config, random_vector(n, 1));
          zero_free_params.step(zero_free, grad, 1);
          ASSERT_EQ(zero_free_params.bytes(), exact_params.bytes()) << "zero-free n=" << n;
          expect_requantized(host_state_of(zero_free), k, moment, dynamic_map(Q8MapKind::unsigned_zero_free), n);
        }
      }
    }
  }
}

TEST(FastpathStep, NonfiniteGradientChangesNothingAndIsReported) {
  for (const OptimizerKind kind : kKinds) {
    for (const StepConfig& config : all_format_configs(kind)) {
      const std::size_t n = 600;
      CpuOptimizer opt(config, n, 3);
      Params params(config, random_vector(n, 3));
      params.step(opt, random_vector(n, 4), 0);
      const auto params_before = params.bytes();
      const auto state_before = state_bytes(opt);
      for (const float bad : {std::numeric_limits<float>::quiet_NaN(), INFINITY, -INFINITY}) {
        auto grad = random_vector(n, 5);
        grad[599] = bad;
        grad[411] = bad;
        const StepReport report = params.step(opt, grad, 0);
        EXPECT_FALSE(report.applied);
        EXPECT_EQ(report.reason, core::SkipReason::nonfinite_gradient);
        EXPECT_EQ(report.nonfinite_index, 411u) << "the first bad element";
        ASSERT_EQ(params.bytes(), params_before) << describe(config);
        ASSERT_EQ(state_bytes(opt), state_before) << describe(config);
      }
    }
  }
}

TEST(FastpathStep, ZeroGateSkipsOrAppliesAsConfigured) {
  for (const auto policy : {core::ZeroGatePolicy::apply, core::ZeroGatePolicy::skip}) {
    StepConfig config = all_format_configs(OptimizerKind::cgad)[4];  // fp32 params, q8 state
    config.on_zero_gate = policy;
    CpuOptimizer opt(config, 300, 2);
    Params params(config, random_vector(300, 8));
    params.step(opt, random_vector(300, 9), 0);
    const auto params_before = params.bytes();
    const auto state_before = state_bytes(opt);
    const StepReport report = params.step(opt, random_vector(300, 10), 32);  // τ = τ_cut: σ = 0 exactly
    EXPECT_EQ(report.sigma, 0.0f);
    if (policy == core::ZeroGatePolicy::skip) {
      EXPECT_FALSE(report.applied);
      EXPECT_EQ(report.reason, core::SkipReason::zero_gate);
      EXPECT_EQ(params.bytes(), params_before);
      EXPECT_EQ(state_bytes(opt), state_before);
    } else {
      EXPECT_TRUE(report.applied);
      EXPECT_NE(params.bytes(), params_before) << "θ moves on its momentum";
      EXPECT_EQ(opt.counters()[0].values[0], 2);
    }
  }
}

TEST(FastpathStep, BadInputIsRefused) {
  StepConfig config;
  config.params = ParamFormat::fp32;
  CpuOptimizer opt(config, 10, 1);
  std::vector<float> params(10), grad(10);
  EXPECT_THROW(opt.step(std::span<float>(params), std::vector<float>(9), 0), core::InputError);
  EXPECT_THROW(opt.step(std::span<float>(params.data(), 9), grad, 0), core::InputError);
  EXPECT_THROW(opt.step(std::span<float>(params), grad, -1), core::InputError);
  EXPECT_THROW(opt.step(std::span<float>(params), grad, 0, 1), core::InputError);
  std::vector<bf16> bf16_values(10);
  EXPECT_THROW(opt.step(std::span<bf16>(bf16_values), grad, 0), core::InputError);
  EXPECT_THROW(opt.read_buffer("b", params), core::InputError);
  StepConfig bad = config;
  bad.optimizer = OptimizerKind::delayed_nesterov;
  EXPECT_THROW(CpuOptimizer(bad, 10), core::InputError);
  bad = config;
  bad.adam.beta2 = 1.0f;
  EXPECT_THROW(CpuOptimizer(bad, 10), core::InputError);
  bad = config;
  bad.fragments = 2;
  EXPECT_THROW(CpuOptimizer(bad, 10), core::InputError);
  bad.optimizer = OptimizerKind::pa_cgad;
  EXPECT_THROW(CpuOptimizer(bad, 1), core::InputError) << "an empty fragment";
}

// PA-CGAD: a stream of events over 3 fragments with rounds advancing; the reported σ, τ_eff, applied flag and
// the counters t and age must match the reference event for event (σ as the float nearest to the
// reference's, within the double evaluation's 2^-50 relative error).
TEST(FastpathStep, PaCgadFragmentsAndAgesFollowTheReference) {
  reference::set_working_precision_bits(256);
  StepConfig config;
  config.optimizer = OptimizerKind::pa_cgad;
  config.params = ParamFormat::fp32;
  config.fragments = 3;
  config.tau_cut = 6.0f;
  config.on_zero_gate = core::ZeroGatePolicy::skip;
  const std::size_t n = 700;
  CpuOptimizer opt(config, n, 2);
  core::OptimizerConfig<reference::mpfr_real> ref_config;
  ref_config.optimizer = OptimizerKind::pa_cgad;
  ref_config.fragments = 3;
  ref_config.alpha = reference::mpfr_real(config.alpha);
  ref_config.tau_cut = reference::mpfr_real(config.tau_cut);
  ref_config.on_zero_gate = config.on_zero_gate;
  auto ref = reference::make_optimizer(ref_config, n);
  std::vector<float> params(n, 0.5f);
  std::vector<reference::mpfr_real> ref_params(n, reference::mpfr_real(0.5f));
  const std::size_t order[] = {0, 1, 1, 2, 0, 0, 0, 1, 2, 2};
  const std::int64_t taus[] = {0, 1, 0, 3, 2, 0, 7, 0, 1, 0};
  for (int e = 0; e < 10; ++e) {
    const std::size_t f = order[e];
    const std::size_t size = opt.fragment_size(f);
    const auto grad = random_vector(size, 40 + static_cast<std::uint32_t>(e));
    std::vector<reference::mpfr_real> ref_grad(grad.begin(), grad.end());
    const StepReport got = opt.step(std::span<float>(params), grad, taus[e], f);
    const auto want = ref->apply(ref_params, {ref_grad, taus[e], f});
    EXPECT_EQ(got.applied, want.applied) << "event " << e;
    EXPECT_EQ(got.reason, want.reason) << "event " << e;
    EXPECT_EQ(got.tau_effective, want.tau_effective) << "event " << e;
    const double sigma_ref = want.sigma.convert_to<double>();
    EXPECT_LE(std::fabs(got.sigma - sigma_ref), sigma_ref * (0x1p-24 + 0x1p-50)) << "event " << e;
    opt.advance_round();
    ref->advance_round();
    const auto got_counters = opt.counters();
    const auto want_counters = ref->counters();
    ASSERT_EQ(got_counters.size(), want_counters.size());
    for (std::size_t c = 0; c < got_counters.size(); ++c) {
      EXPECT_EQ(got_counters[c].name, want_counters[c].name);
      EXPECT_EQ(got_counters[c].values, want_counters[c].values) << got_counters[c].name << " after event " << e;
    }
  }
}

// Stochastic rounding is keyed by (seed, step, index): the same seed reproduces every bit, another seed changes
// the rounding of some elements (bf16 parameters and q8 state both round stochastically here).
TEST(FastpathStep, StochasticRoundingIsReproducibleAndKeyedBySeed) {
  StepConfig config = all_format_configs(OptimizerKind::cgad)[11];  // bf16 params, q8 state, stochastic
  const auto run = [&](std::uint64_t seed) {
    StepConfig c = config;
    c.seed = seed;
    CpuOptimizer opt(c, 2000, 3);
    Params params(c, random_vector(2000, 90));
    for (int e = 0; e < 3; ++e) params.step(opt, random_vector(2000, 91 + static_cast<std::uint32_t>(e)), e);
    auto out = params.bytes();
    const auto state = state_bytes(opt);
    out.insert(out.end(), state.begin(), state.end());
    return out;
  };
  EXPECT_EQ(run(7), run(7));
  EXPECT_NE(run(7), run(8));
}

// 64-bit indexing where it can be checked without terabytes: the block count and the thread split of a range
// past 2^32 elements (a no-op body records the parts: they must tile [0, count) exactly).
TEST(FastpathStep, IndexArithmeticIsSixtyFourBit) {
  constexpr std::uint64_t count = (std::uint64_t{1} << 40) + 257;
  EXPECT_EQ(block_count(count), (std::uint64_t{1} << 32) + 2);
  ThreadPool pool(7);
  std::vector<std::pair<std::uint64_t, std::uint64_t>> parts(7);
  std::atomic<int> calls{0};
  pool.parallel_for(count, [&](std::uint64_t begin, std::uint64_t end) {
    parts[static_cast<std::size_t>(calls++)] = {begin, end};
  });
  ASSERT_EQ(calls.load(), 7);
  std::sort(parts.begin(), parts.end());
  EXPECT_EQ(parts.front().first, 0u);
  for (std::size_t p = 1; p < parts.size(); ++p) EXPECT_EQ(parts[p].first, parts[p - 1].second);
  EXPECT_EQ(parts.back().second, count);
}

struct Event {
  std::size_t fragment;
  std::int64_t tau;
};

// Event e's pseudo-gradient for fragment f (its slice only).
std::vector<float> event_grad(std::size_t fragment_size, std::size_t e) {
  return random_vector(fragment_size, 100 + static_cast<std::uint32_t>(e));
}

// The CPU backend after `events` (2 threads), a round advancing after each; `edit` changes its state before event
// `edit_at` (the invalid-state guard's tests: a write past the optimizer, as a caller's past a version counter).
struct CpuRun {
  Params params;
  HostState state;
  std::uint64_t invalid = 0;  // the steps' reported elements with invalid state
  // Parameter bytes then state bytes.
  std::vector<unsigned char> bytes() const {
    std::vector<unsigned char> out = params.bytes();
    const auto arrays = testing::state_arrays(state);
    out.insert(out.end(), arrays.begin(), arrays.end());
    return out;
  }
};
CpuRun cpu_run(const StepConfig& config, const std::vector<std::size_t>& tensors, const std::vector<Event>& events,
               const std::function<void(HostState&)>& edit = {}, std::size_t edit_at = 0) {
  CpuOptimizer opt(config, tensors, 2);
  CpuRun run{Params(config, random_vector(opt.parameters(), 11)), HostState{}, 0};
  for (std::size_t e = 0; e < events.size(); ++e) {
    if (edit && e == edit_at) edit(const_cast<HostState&>(host_state_of(opt)));  // NOLINT: the state is the test's
    const StepReport report =
        run.params.step(opt, event_grad(opt.fragment_size(events[e].fragment), e), events[e].tau, events[e].fragment);
    EXPECT_TRUE(report.applied);
    run.invalid += report.invalid_state;
    opt.advance_round();
  }
  run.state = host_state_of(opt);
  return run;
}

// Parameter bytes then state bytes after `events` on the CPU backend.
std::vector<unsigned char> cpu_steps(const StepConfig& config, const std::vector<std::size_t>& tensors,
                                     const std::vector<Event>& events) {
  return cpu_run(config, tensors, events).bytes();
}

// The same through the emulated kernel.
std::vector<unsigned char> emulate_kernel_steps(const StepConfig& config, const std::vector<std::size_t>& tensors,
                                                const std::vector<Event>& events, testing::KernelPaths& paths,
                                                const std::function<void(HostState&)>& edit = {},
                                                std::size_t edit_at = 0, std::uint64_t* invalid = nullptr) {
  StepPlanner planner(config, tensors);
  HostState state = HostState::zeros(planner);
  const std::size_t n = planner.parameters();
  Params params(config, random_vector(n, 11));
  for (std::size_t e = 0; e < events.size(); ++e) {
    const std::size_t f = events[e].fragment;
    const auto grad = event_grad(planner.fragment_size(events[e].fragment), e);
    StepPlanner::Plan plan = planner.plan(n, grad.size(), events[e].tau, f);
    EXPECT_TRUE(plan.scheduled.applied);
    if (edit && e == edit_at) edit(state);
    state.bind(plan);
    StepArgs& step = plan.args;
    step.grad = grad.data();
    step.params_fp32 = config.params == ParamFormat::fp32 ? params.fp32.data() : nullptr;
    step.params_bf16 = config.params == ParamFormat::bf16 ? params.bf16_values.data() : nullptr;
    for (std::size_t c = planner.chunk_begin(f); c < planner.chunk_begin(f + 1); ++c) {
      const StepChunk& chunk = planner.chunks()[c];
      StepArgs a = chunk_args(step, chunk);
      // θ lies at the chunk's element (as the state), Δ at its position in the fragment's slice.
      const bool vectorized = testing::vectorizable(chunk, chunk.begin - plan.offset);
      const std::uint32_t found = testing::emulate_kernel_block(step, chunk, a, vectorized, paths, describe(config));
      if (invalid != nullptr) *invalid += found;
    }
    planner.commit(plan, StepOutcome::applied);
    planner.advance_round();
  }
  std::vector<unsigned char> out = params.bytes();
  const auto bytes = testing::state_arrays(state);
  out.insert(out.end(), bytes.begin(), bytes.end());
  return out;
}

// Every optimizer and format configuration (with and without min_q8_size) over the tensor layouts and single
// tensors around the block size, and PA-CGAD with P = 3 and 7 over sizes whose fragments start at ⌊f·n/P⌋ off any
// 16-byte boundary (1000, 7·768 + 5) or all on one (7·768, 7·768 + 1), each fragment stepped twice. The emulation
// must reach the vectorized path, the guarded path of a full but misaligned chunk and the tail.
TEST(FastpathStep, KernelAgentOnTheHostMatchesTheCpuBackend) {
  testing::KernelPaths paths;
  std::vector<std::vector<std::size_t>> layouts = testing::tensor_layouts();
  for (const std::size_t n : {0u, 1u, 255u, 256u, 257u}) layouts.push_back({n});
  for (const OptimizerKind kind : kKinds) {
    for (const StepConfig& config : configs_with_min_q8_size(kind)) {
      for (const auto& tensors : layouts) {
        const std::vector<Event> events = {{0, 0}, {0, 2}, {0, 5}};
        ASSERT_EQ(emulate_kernel_steps(config, tensors, events, paths), cpu_steps(config, tensors, events))
            << describe(config) << " tensors=" << tensors.size() << " first=" << tensors[0];
      }
    }
  }
  for (StepConfig config : configs_with_min_q8_size(OptimizerKind::pa_cgad)) {
    for (const std::size_t fragments : {3u, 7u}) {
      config.fragments = fragments;
      std::vector<Event> events;
      for (std::size_t f = 0; f < fragments; ++f) events.push_back({f, static_cast<std::int64_t>(f % 3)});
      for (std::size_t f = fragments; f-- > 0;) events.push_back({f, 1});
      for (const std::vector<std::size_t>& tensors : {std::vector<std::size_t>{257},
                                                      {1000},
                                                      {7 * 768},
                                                      {7 * 768 + 1},
                                                      {7 * 768 + 5},
                                                      {3 * 256 + 17, 1000, 299}}) {
        ASSERT_EQ(emulate_kernel_steps(config, tensors, events, paths), cpu_steps(config, tensors, events))
            << describe(config) << " P=" << fragments << " n=" << tensors[0];
      }
    }
  }
  EXPECT_GT(paths.vectorized, 0u);
  EXPECT_GT(paths.guarded_full, 0u);
  EXPECT_GT(paths.tail, 0u);
  std::printf("kernel paths emulated: %zu vectorized, %zu guarded full, %zu tail chunks\n", paths.vectorized,
              paths.guarded_full, paths.tail);
}

// The same with q8 maps given as data (StepConfig::q8_codes): the kernel reads the optimizer's maps, not the built-in
// ones. The maps: the built-in codes with every seventh one (but the 0 and the 1) moved a quarter of the way to the
// code below, so that codes and decoded values differ from the built-in maps' (checked on the state's bytes).
TEST(FastpathStep, KernelAgentOnTheHostMatchesTheCpuBackendWithGivenMaps) {
  Q8Codes codes;
  for (int m = 0; m < 2; ++m) {
    auto& into = m == 0 ? codes.signed_codes : codes.unsigned_codes;
    const Q8Map& map = dynamic_map(m == 0 ? Q8MapKind::signed_map : Q8MapKind::unsigned_map);
    for (int k = 0; k < kQ8Codes; ++k) {
      const bool fixed = map.code[k] == 0.0f || k == kQ8Codes - 1;
      into[static_cast<std::size_t>(k)] =
          fixed || k % 7 != 3 ? map.code[k] : map.code[k] - (map.code[k] - map.code[k - 1]) / 4;
    }
  }
  testing::KernelPaths paths;
  for (const OptimizerKind kind : kKinds) {
    for (StepConfig config : configs_with_min_q8_size(kind)) {
      if (config.state != StateFormat::q8) continue;
      config.q8_codes = codes;
      if (!config.min_q8_size) config.min_q8_size = 0;  // bnb's default 4096 would keep these tensors in fp32 state
      for (const auto& tensors : testing::tensor_layouts()) {
        const std::vector<Event> events = {{0, 0}, {0, 2}, {0, 5}};
        const auto cpu = cpu_steps(config, tensors, events);
        ASSERT_EQ(emulate_kernel_steps(config, tensors, events, paths), cpu)
            << describe(config) << " tensors=" << tensors.size() << " first=" << tensors[0];
        StepConfig built_in = config;
        built_in.q8_codes.reset();
        EXPECT_NE(cpu_steps(built_in, tensors, events), cpu) << describe(config) << ": the given maps changed nothing";
      }
    }
  }
}

// The invalid-state guard (block_step.hpp's update_element, docs/design.md §3): state made invalid between steps —
// NaN or Inf moments, a negative v, a NaN or Inf q8 absmax, in every state format and a q8 configuration's fp32
// fallback — is left as it was, with its element's θ, and counted; every other element takes today's step, bit for
// bit; no parameter becomes NaN or Inf; and the kernel's agent, run on the host, does exactly what the CPU does.
// The unit kept is the element, or the whole q8 block whose absmax or codes the invalid element would feed.
const StepChunk& chunk_of(const StepPlanner& planner, std::size_t i) {
  const auto& chunks = planner.chunks();
  return *std::find_if(chunks.begin(), chunks.end(), [i](const StepChunk& c) { return i < c.begin + c.count; });
}

// Writes `value` into moment k of element i: its own value, or its q8 block's absmax.
void write_state(HostState& s, const StepPlanner& planner, int k, std::size_t i, float value) {
  const StepChunk& c = chunk_of(planner, i);
  if (c.fp32_state != 0) {
    s.fp32[k][c.slot + (i - c.begin)] = value;
  } else if (s.format == StateFormat::q8) {
    s.absmax[k][c.slot] = value;
  } else if (s.format == StateFormat::bf16) {
    s.bf16_values[k][i] = round_nearest_even_bf16(value);
  } else {
    s.fp32[k][i] = value;
  }
}

// Element i's θ bits and the bits of every moment's state it is stepped from (its value, or its code and its block's
// absmax).
std::vector<std::uint32_t> element_bits(const CpuRun& run, const StepPlanner& planner, std::size_t i) {
  const HostState& s = run.state;
  const StepChunk& c = chunk_of(planner, i);
  std::vector<std::uint32_t> out = {run.params.fp32.empty() ? run.params.bf16_values[i].bits
                                                            : float_to_bits(run.params.fp32[i])};
  for (int k = 0; k < s.moments; ++k) {
    if (c.fp32_state != 0) {
      out.push_back(float_to_bits(s.fp32[k][c.slot + (i - c.begin)]));
    } else if (s.format == StateFormat::q8) {
      out.insert(out.end(), {s.codes[k][i], float_to_bits(s.absmax[k][c.slot])});
    } else {
      out.push_back(s.format == StateFormat::bf16 ? s.bf16_values[k][i].bits : float_to_bits(s.fp32[k][i]));
    }
  }
  return out;
}

TEST(FastpathStep, InvalidStateIsLeftAsItWasCountedAndTheRestSteps) {
  const std::vector<std::size_t> tensors = {300, 260};
  const std::vector<Event> events = {{0, 0}, {0, 2}, {0, 1}};
  const std::vector<Event> first_two(events.begin(), events.end() - 1);
  testing::KernelPaths paths;
  for (const OptimizerKind kind : {OptimizerKind::cgad, OptimizerKind::adam, OptimizerKind::nesterov}) {
    for (const StepConfig& config : configs_with_min_q8_size(kind)) {
      const StepPlanner planner(config, tensors);
      const bool adam = kind != OptimizerKind::nesterov;
      // Element 5's v (Nesterov: b) negative, NaN for a q8 absmax (a negative one is a valid v of −0 for code 0);
      // element 301's m (b) +Inf. Both before the last event.
      const auto edit = [&](HostState& s) {
        const bool q8_block = s.format == StateFormat::q8 && chunk_of(planner, 5).fp32_state == 0;
        write_state(s, planner, adam ? 1 : 0, 5, adam && !q8_block ? -1.0f : std::nanf(""));
        write_state(s, planner, 0, 301, std::numeric_limits<float>::infinity());
      };
      const CpuRun clean = cpu_run(config, tensors, events);
      CpuRun before = cpu_run(config, tensors, first_two);
      edit(before.state);
      const CpuRun run = cpu_run(config, tensors, events, edit, 2);
      // The units kept: the element, or its whole q8 block.
      const auto kept = [&](std::size_t i) {
        for (const std::size_t bad : {std::size_t{5}, std::size_t{301}}) {
          const StepChunk& c = chunk_of(planner, bad);
          const bool block = config.state == StateFormat::q8 && c.fp32_state == 0;
          if (block ? chunk_of(planner, i).begin == c.begin : i == bad) return true;
        }
        return false;
      };
      std::uint64_t expected = 0;
      for (std::size_t i = 0; i < planner.parameters(); ++i) {
        const float theta = run.params.fp32.empty() ? to_float(run.params.bf16_values[i]) : run.params.fp32[i];
        ASSERT_TRUE(std::isfinite(theta)) << describe(config) << " element " << i;
        expected += kept(i) ? 1 : 0;
        ASSERT_EQ(element_bits(run, planner, i), element_bits(kept(i) ? before : clean, planner, i))
            << describe(config) << " element " << i << (kept(i) ? " (kept)" : " (stepped)");
      }
      EXPECT_EQ(run.invalid, expected) << describe(config);
      std::uint64_t emulated = 0;
      EXPECT_EQ(emulate_kernel_steps(config, tensors, events, paths, edit, 2, &emulated), run.bytes())
          << describe(config);
      EXPECT_EQ(emulated, expected) << describe(config);
    }
  }
}

// The v = 0 guard (element_update.hpp): a second moment quantized to 0 under a nonzero first moment. After one
// step with Δ = (1, 1e-5, …), element 1 has v/absmax ≈ 1e-10, below half the smallest unsigned code (3.25e-7),
// so v stores 0 while m/absmax ≈ 1e-5 keeps a nonzero code. A zero-gate event (σ = 0, policy apply) then gives
// g = 0, v = 0 and m = β1·m ≠ 0: unguarded, θ would jump by η·m̂/ε ≈ 0.5; guarded (λ = 0) it stays put.
TEST(FastpathStep, ZeroSecondMomentUnderNonzeroFirstMomentDoesNotDivideByEpsilon) {
  StepConfig config;
  config.params = ParamFormat::fp32;
  config.state = StateFormat::q8;
  CpuOptimizer opt(config, 256, 1);
  std::vector<float> params(256, 0.25f);
  std::vector<float> grad(256, 0.0f);
  grad[0] = 1.0f;
  grad[1] = 1e-5f;
  opt.step(std::span<float>(params), grad, 0);
  std::vector<float> m(256), v(256);
  opt.read_buffer("m", m);
  opt.read_buffer("v", v);
  ASSERT_NE(m[1], 0.0f);
  ASSERT_EQ(v[1], 0.0f);
  const float theta_before = params[1];
  const StepReport report = opt.step(std::span<float>(params), std::vector<float>(256, 0.0f), 40);
  ASSERT_TRUE(report.applied);
  ASSERT_EQ(report.sigma, 0.0f);
  EXPECT_EQ(params[1], theta_before) << std::hexfloat << params[1];
  EXPECT_NE(params[0], 0.25f) << "element 0 still moves on its momentum";
}

// The trap the zero-free v map removes (q8_maps.hpp), in one block: Δ = (1, 1e-5, 0, …) stores element 1's
// v/absmax ≈ 1e-10 as 0 in the dynamic map and as the smallest code ≈ 3.25e-7 in the zero-free one, while m keeps
// a nonzero code (≈ 1e-5 of its absmax). A second event with Δ_1 = 1e-9 then steps element 1 by η·m̂/sqrt(v̂):
// from a v that forgot its history (dynamic: |Δθ| ≈ 340η in both semantics — cgad's guard acts only where g = 0 too)
// or from an overestimated one (zero-free: |Δθ| ≈ 0.01η). Both semantics store no v as 0 under the zero-free map.
TEST(FastpathStep, ZeroFreeVMapKeepsASmallSecondMomentNonzeroAndItsStepSmall) {
  for (const Q8Semantics semantics : {Q8Semantics::cgad, Q8Semantics::bnb}) {
    for (const VMap v_map : {VMap::dynamic, VMap::zero_free}) {
      StepConfig config;
      config.params = ParamFormat::fp32;
      config.state = StateFormat::q8;
      config.q8_semantics = semantics;
      config.min_q8_size = 0;
      config.v_map = v_map;
      const std::string what = std::string(to_string(semantics)) + "/" + std::string(to_string(v_map));
      CpuOptimizer opt(config, 256, 1);
      std::vector<float> params(256, 0.25f);
      std::vector<float> grad(256, 0.0f);
      grad[0] = 1.0f;
      grad[1] = 1e-5f;
      opt.step(std::span<float>(params), grad, 0);
      std::vector<float> m(256), v(256);
      opt.read_buffer("m", m);
      opt.read_buffer("v", v);
      ASSERT_NE(m[1], 0.0f) << what;
      const Q8Map& map = dynamic_map(second_moment_map(v_map), semantics);
      const float absmax = host_state_of(opt).absmax[1][0];
      EXPECT_EQ(v[1], v_map == VMap::dynamic ? 0.0f : map.code[0] * absmax) << what << std::hexfloat << " v " << v[1];
      const std::size_t zeros = static_cast<std::size_t>(std::count(v.begin(), v.end(), 0.0f));
      EXPECT_EQ(zeros, v_map == VMap::dynamic ? 255u : 0u) << what << ": v stored as 0";
      grad[1] = 1e-9f;
      const float before = params[1];
      opt.step(std::span<float>(params), grad, 0);
      const double step_over_lr = std::fabs(static_cast<double>(params[1]) - before) / config.adam.lr;
      std::printf("%s: element 1 stepped %a lr\n", what.c_str(), step_over_lr);
      if (v_map == VMap::zero_free) {
        EXPECT_LT(step_over_lr, 0.1) << what;
      } else {
        EXPECT_GT(step_over_lr, 100.0) << what;
      }
    }
  }
}

// PA-CGAD over q8 state: fragments whose boundaries fall inside a 256-block still own their blocks (each
// fragment's first element starts a block), so stepping one fragment leaves every byte of the others' state —
// codes and absmax — and their parameters untouched.
TEST(FastpathStep, PaCgadFragmentStepTouchesOnlyItsOwnBlocks) {
  StepConfig config;
  config.optimizer = OptimizerKind::pa_cgad;
  config.params = ParamFormat::bf16;
  config.state = StateFormat::q8;
  config.rounding = Rounding::stochastic;
  config.fragments = 3;
  const std::size_t n = 1000;  // fragments [0,333), [333,666), [666,1000): none starts on a multiple of 256
  CpuOptimizer opt(config, n, 3);
  Params params(config, random_vector(n, 50));
  for (std::size_t f = 0; f < 3; ++f) {
    params.step(opt, random_vector(opt.fragment_size(f), 51 + static_cast<std::uint32_t>(f)), 0, f);
  }
  EXPECT_EQ(host_state_of(opt).absmax[0].size(), 2u + 2u + 2u);
  const HostState before = host_state_of(opt);
  const auto params_before = params.bf16_values;
  params.step(opt, random_vector(opt.fragment_size(1), 60), 0, 1);
  const HostState& after = host_state_of(opt);
  for (int k = 0; k < 2; ++k) {
    for (std::size_t i = 0; i < n; ++i) {
      if (i >= 333 && i < 666) continue;
      ASSERT_EQ(after.codes[k][i], before.codes[k][i]) << "moment " << k << " element " << i;
      ASSERT_EQ(params.bf16_values[i].bits, params_before[i].bits) << "element " << i;
    }
    for (const std::size_t block : {0u, 1u, 4u, 5u}) {
      ASSERT_EQ(after.absmax[k][block], before.absmax[k][block]) << "moment " << k << " block " << block;
    }
    EXPECT_NE(after.absmax[k][2], before.absmax[k][2]) << "fragment 1's first block was requantized";
  }
}

// CGAD_CPU_ISA picks each ISA the CPU and build can run, and refuses one they cannot (or an unknown name) with an
// InputError naming the ones they can, before any state exists.
TEST(FastpathStep, CpuIsaIsChosenByTheEnvironmentAndAnUnrunnableOneIsRefused) {
  const testing::CpuIsaEnvironment environment;
  const std::vector<CpuIsa> isas = supported_cpu_isas();
  ASSERT_FALSE(isas.empty());
  EXPECT_EQ(isas.front(), CpuIsa::generic);
  environment.clear();
  EXPECT_EQ(selected_cpu_isa(), isas.back());
  for (CpuIsa isa : isas) {
    environment.set(std::string(to_string(isa)));
    EXPECT_EQ(CpuOptimizer(StepConfig{}, 10, 1).isa(), isa);
  }
  for (const char* wrong : {"avx9", "AVX2", " avx2"}) {
    environment.set(wrong);
    try {
      CpuOptimizer opt(StepConfig{}, 10, 1);
      ADD_FAILURE() << wrong << " was accepted";
    } catch (const core::InputError& e) {
      EXPECT_NE(std::string(e.what()).find("generic"), std::string::npos) << e.what();
    }
  }
  if (isas.back() != CpuIsa::avx512) {
    environment.set("avx512");
    EXPECT_THROW(CpuOptimizer(StepConfig{}, 10, 1), core::InputError) << "this CPU or build has no AVX-512";
  }
}

}  // namespace
}  // namespace cgad::fastpath
