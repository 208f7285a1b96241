// The CPU step over caller-owned state (TableStepper, table_stepper.hpp: what cgad.torch's CPU groups step, their
// state torch tensors) checked bit for bit against the owning CpuOptimizer's contiguous step over the same tensors
// concatenated: every optimizer and format (both q8 semantics, with min_q8_size), layouts with tensor boundaries
// inside blocks and around min_q8_size, 1-3 threads, PA-CGAD fragments, refused events; a tensor left out of a step
// (null gradient) untouched; the state check refusing what the state file refuses; a reused preview.
#include "support/fastpath_test_support.hpp"

#include "cgad/core/errors.hpp"
#include "cgad/fastpath/detail/host_state.hpp"
#include "cgad/fastpath/thread_pool.hpp"
#include "cgad/fastpath/table_stepper.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <memory>

namespace cgad::fastpath {
namespace {

using core::OptimizerKind;
using testing::describe;
using testing::expect_same_report;
using testing::Params;
using testing::random_vector;

// One tensor's state in buffers of its own, as torch allocates them, at the all-zero state.
struct OwnState {
  std::vector<float> values32[2];
  std::vector<bf16> values16[2];
  std::vector<std::uint8_t> codes[2];
  std::vector<float> absmax[2];
  TensorState entry;

  OwnState(const TableStepper& s, std::size_t k) {
    const TensorStateShape shape = s.shape(k);
    std::vector<void*> buffers(2 * static_cast<std::size_t>(shape.moments), nullptr);
    for (int m = 0; m < shape.moments; ++m) {
      if (shape.kind == "bf16") {
        values16[m].assign(shape.values, bf16{});
        buffers[2 * m] = values16[m].data();
      } else if (shape.kind == "q8") {
        codes[m].assign(shape.values, shape.initial_code[m]);
        absmax[m].assign(shape.absmax, 0.0f);
        buffers[2 * m] = codes[m].data();
        buffers[2 * m + 1] = absmax[m].data();
      } else {
        values32[m].assign(shape.values, 0.0f);
        buffers[2 * m] = values32[m].data();
      }
    }
    entry = s.entry(k, buffers);
  }
};

// A TensorState's bytes, moment by moment (values or codes, then absmax).
std::vector<unsigned char> bytes_of(const TensorState& t) {
  std::vector<unsigned char> out;
  const auto append = [&out](const auto& span) {
    const auto* b = reinterpret_cast<const unsigned char*>(span.data());
    out.insert(out.end(), b, b + span.size_bytes());
  };
  for (int m = 0; m < t.moments; ++m) {
    append(t.fp32[m]);
    append(t.bf16_values[m]);
    append(t.codes[m]);
    append(t.absmax[m]);
  }
  return out;
}

struct Caller {
  TableStepper stepper;
  std::vector<OwnState> state;
  std::vector<std::vector<float>> fp32;
  std::vector<std::vector<bf16>> bf16_values;

  Caller(const StepConfig& config, const std::vector<std::size_t>& sizes, unsigned threads,
         const std::vector<float>& initial)
      : stepper(config, sizes, std::make_shared<ThreadPool>(threads)) {
    std::size_t at = 0;
    for (std::size_t k = 0; k < sizes.size(); ++k) {
      state.emplace_back(stepper, k);
      const Params p(config, std::vector<float>(initial.begin() + static_cast<std::ptrdiff_t>(at),
                                                initial.begin() + static_cast<std::ptrdiff_t>(at + sizes[k])));
      fp32.push_back(p.fp32);
      bf16_values.push_back(p.bf16_values);
      at += sizes[k];
    }
  }
  // grads[k] empty: tensor k is left out (a null gradient).
  StepReport step(const std::vector<std::vector<float>>& grads, std::int64_t tau, std::size_t fragment = 0,
                  bool reuse_preview = false) {
    std::vector<const float*> g;
    std::vector<TensorState> entries;
    for (std::size_t k = 0; k < grads.size(); ++k) {
      g.push_back(grads[k].empty() ? nullptr : grads[k].data());
      entries.push_back(state[k].entry);
    }
    if (stepper.config().params == ParamFormat::fp32) {
      std::vector<float*> p;
      for (auto& x : fp32) p.push_back(x.empty() ? nullptr : x.data());
      return stepper.step(std::span<float* const>(p), g, entries, tau, fragment, reuse_preview);
    }
    std::vector<bf16*> p;
    for (auto& x : bf16_values) p.push_back(x.empty() ? nullptr : x.data());
    return stepper.step(std::span<bf16* const>(p), g, entries, tau, fragment, reuse_preview);
  }
  std::vector<unsigned char> param_bytes(std::size_t k) const {
    const auto* b = fp32[k].empty() ? reinterpret_cast<const unsigned char*>(bf16_values[k].data())
                                    : reinterpret_cast<const unsigned char*>(fp32[k].data());
    return {b, b + (fp32[k].empty() ? bf16_values[k].size() * 2 : fp32[k].size() * 4)};
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

std::vector<unsigned char> whole_param_bytes(const Params& p, std::size_t begin, std::size_t n) {
  const auto* b = p.fp32.empty() ? reinterpret_cast<const unsigned char*>(p.bf16_values.data() + begin)
                                 : reinterpret_cast<const unsigned char*>(p.fp32.data() + begin);
  return {b, b + n * (p.fp32.empty() ? 2 : 4)};
}

std::vector<StepConfig> configs(OptimizerKind kind) {
  std::vector<StepConfig> out;
  for (StepConfig config : testing::all_format_configs(kind)) {
    out.push_back(config);
    config.min_q8_size = 300;
    out.push_back(config);
  }
  return out;
}

std::vector<std::vector<std::size_t>> layouts() {
  std::vector<std::vector<std::size_t>> out = testing::tensor_layouts();
  out.push_back({255, 257, 256});
  out.push_back({1, 1, 1, 300, 1, 1});
  out.push_back({0, 700, 0});
  return out;
}

constexpr std::int64_t kTaus[] = {0, 3, 1, 2, 7, 0};

std::vector<float> event_grad(std::size_t n, std::size_t event) {
  std::vector<float> g = random_vector(n, 900 + static_cast<std::uint32_t>(event));
  if (n != 0 && event == 3) g[n - 1] = std::numeric_limits<float>::quiet_NaN();
  if (n != 0 && event == 4) g[n / 2] = 0x1p100f;
  return g;
}

// Every tensor's parameters and state equal the owning optimizer's slice of them (tensor_state(k)).
void expect_same(const CpuOptimizer& owned_const, const Params& whole, const Caller& caller,
                 const std::vector<std::size_t>& sizes, const std::string& where) {
  auto& owned = const_cast<CpuOptimizer&>(owned_const);
  std::size_t at = 0;
  for (std::size_t k = 0; k < sizes.size(); at += sizes[k], ++k) {
    ASSERT_EQ(whole_param_bytes(whole, at, sizes[k]), caller.param_bytes(k)) << where << " tensor " << k;
    ASSERT_EQ(bytes_of(owned.tensor_state(k)), bytes_of(caller.state[k].entry)) << where << " tensor " << k;
  }
}

TEST(FastpathCallerState, BitIdenticalToTheOwnedContiguousStep) {
  for (const OptimizerKind kind : {OptimizerKind::cgad, OptimizerKind::adam_decay, OptimizerKind::adam,
                                   OptimizerKind::nesterov, OptimizerKind::sdm}) {
    for (const StepConfig& config : configs(kind)) {
      for (const auto& sizes : layouts()) {
        for (const unsigned threads : {1u, 3u}) {
          const std::string where = describe(config) + " threads=" + std::to_string(threads);
          CpuOptimizer owned(config, sizes, threads);
          const std::size_t n = owned.parameters();
          const std::vector<float> initial = random_vector(n, 17);
          Params whole(config, initial);
          Caller caller(config, sizes, threads, initial);
          for (std::size_t e = 0; e < std::size(kTaus); ++e) {
            const std::vector<float> grad = event_grad(n, e);
            expect_same_report(whole.step(owned, grad, kTaus[e]), caller.step(split(grad, sizes), kTaus[e]),
                               where + " event " + std::to_string(e));
            expect_same(owned, whole, caller, sizes, where + " event " + std::to_string(e));
          }
        }
      }
    }
  }
}

TEST(FastpathCallerState, PaCgadFragmentsMatchTheOwnedContiguousStep) {
  for (StepConfig config : configs(OptimizerKind::pa_cgad)) {
    config.fragments = 3;
    for (const auto& sizes : layouts()) {
      CpuOptimizer owned(config, sizes, 2);
      const std::size_t n = owned.parameters();
      if (n < config.fragments) continue;
      const std::vector<float> initial = random_vector(n, 23);
      Params whole(config, initial);
      Caller caller(config, sizes, 2, initial);
      for (std::size_t e = 0; e < 7; ++e) {
        const std::size_t f = (e * 2) % config.fragments;
        const std::vector<float> all = random_vector(n, 300 + static_cast<std::uint32_t>(e));
        const std::size_t offset = owned.layout().offset(f), size = owned.layout().size(f);
        std::vector<std::vector<float>> grads = split(all, sizes);
        for (std::size_t k = 0, at = 0; k < sizes.size(); at += sizes[k], ++k) {
          if (at + sizes[k] <= offset || at >= offset + size) grads[k].clear();
        }
        const std::vector<float> slice(all.begin() + static_cast<std::ptrdiff_t>(offset),
                                       all.begin() + static_cast<std::ptrdiff_t>(offset + size));
        const std::string where = describe(config) + " event " + std::to_string(e);
        expect_same_report(whole.step(owned, slice, static_cast<std::int64_t>(e % 4), f),
                           caller.step(grads, static_cast<std::int64_t>(e % 4), f), where);
        expect_same(owned, whole, caller, sizes, where);
        owned.advance_round();
        caller.stepper.advance_round();
      }
    }
  }
}

// A tensor left out (null gradient) keeps its parameters and state; every other tensor steps exactly as in the
// owning step that gives the left-out tensor a zero pseudo-gradient (each element's update reads only its own
// operands and the step's constants).
TEST(FastpathCallerState, ATensorLeftOutIsUntouchedAndTheOthersStepAsBefore) {
  for (const OptimizerKind kind : {OptimizerKind::cgad, OptimizerKind::nesterov}) {
    for (const StepConfig& config : configs(kind)) {
      const std::vector<std::size_t> sizes{300, 257, 40};
      const std::size_t n = 597;
      const std::vector<float> initial = random_vector(n, 5);
      for (std::size_t e = 0; e < sizes.size(); ++e) {
        // One event per config and left-out tensor, from the start (the owner steps the left-out tensor with zeros,
        // so later events would differ there).
        Params whole(config, initial);
        CpuOptimizer owned(config, sizes, 2);
        Caller caller(config, sizes, 2, initial);
        const std::vector<float> first = random_vector(n, 30);  // a full event first: state and θ not at rest
        expect_same_report(whole.step(owned, first, 0), caller.step(split(first, sizes), 0), describe(config));
        std::vector<float> grad = random_vector(n, 40 + static_cast<std::uint32_t>(e));
        std::vector<std::vector<float>> grads = split(grad, sizes);
        const std::size_t left_out = e;
        const auto params_before = caller.param_bytes(left_out);
        const auto state_before = bytes_of(caller.state[left_out].entry);
        grads[left_out].clear();
        std::size_t at = 0;
        for (std::size_t k = 0; k < left_out; ++k) at += sizes[k];
        std::fill(grad.begin() + static_cast<std::ptrdiff_t>(at),
                  grad.begin() + static_cast<std::ptrdiff_t>(at + sizes[left_out]), 0.0f);
        const std::string where = describe(config) + " event " + std::to_string(e);
        expect_same_report(whole.step(owned, grad, 1), caller.step(grads, 1), where);
        ASSERT_EQ(params_before, caller.param_bytes(left_out)) << where;
        ASSERT_EQ(state_before, bytes_of(caller.state[left_out].entry)) << where;
        at = 0;
        for (std::size_t k = 0; k < sizes.size(); at += sizes[k], ++k) {
          if (k == left_out) continue;
          ASSERT_EQ(whole_param_bytes(whole, at, sizes[k]), caller.param_bytes(k)) << where << " tensor " << k;
          ASSERT_EQ(bytes_of(owned.tensor_state(k)), bytes_of(caller.state[k].entry)) << where << " tensor " << k;
        }
      }
      Caller caller(config, sizes, 2, initial);
      std::vector<std::vector<float>> none(sizes.size());
      EXPECT_THROW(caller.step(none, 0), core::InputError);
    }
  }
}

// check_states refuses what the state file's loader refuses (impossible m, v, absmax), naming the tensor, and takes
// a state a run reached.
TEST(FastpathCallerState, CheckStatesRefusesImpossibleStateAndTakesReachedState) {
  for (const StepConfig& config : configs(OptimizerKind::cgad)) {
    const std::vector<std::size_t> sizes{300, 40};
    const std::vector<float> initial = random_vector(340, 5);
    Caller caller(config, sizes, 1, initial);
    caller.step(split(random_vector(340, 6), sizes), 0);
    std::vector<TensorState> entries{caller.state[0].entry, caller.state[1].entry};
    caller.stepper.check_states(entries);
    const std::string where = describe(config);
    for (const std::size_t k : {std::size_t{0}, std::size_t{1}}) {
      TensorState& t = entries[k];
      const auto poke = [&](auto& span, auto bad) {
        if (span.empty()) return;
        const auto saved = span[0];
        span[0] = bad;
        try {
          caller.stepper.check_states(entries);
          ADD_FAILURE() << where << " tensor " << k << ": an impossible state was taken";
        } catch (const core::InputError& e) {
          EXPECT_NE(std::string(e.what()).find("tensor " + std::to_string(k)), std::string::npos) << e.what();
        }
        span[0] = saved;
      };
      poke(t.fp32[1], std::numeric_limits<float>::quiet_NaN());
      poke(t.fp32[1], -1.0f);
      poke(t.fp32[0], std::numeric_limits<float>::infinity());
      poke(t.bf16_values[0], bf16{0x7F7F});  // 3.39e38: beyond |m| <= 2^63
      poke(t.absmax[1], std::numeric_limits<float>::quiet_NaN());
      poke(t.absmax[0], 3e38f);
      caller.stepper.check_states(entries);
    }
  }
}

// A step that reuses its preview's scan reports and changes what the scanning step does; a load or new round
// in between makes it scan again.
TEST(FastpathCallerState, AReusedPreviewStepsAsTheScanningStep) {
  for (const StepConfig& config : configs(OptimizerKind::cgad)) {
    const std::vector<std::size_t> sizes{300, 257};
    const std::vector<float> initial = random_vector(557, 8);
    Caller a(config, sizes, 2, initial), b(config, sizes, 2, initial);
    for (std::size_t e = 0; e < std::size(kTaus); ++e) {
      const auto grads = split(event_grad(557, e), sizes);
      std::vector<const float*> g;
      for (const auto& x : grads) g.push_back(x.data());
      const StepReport preview = b.stepper.preview(g, kTaus[e]);
      const StepReport reused = b.step(grads, kTaus[e], 0, true);
      expect_same_report(preview, reused, describe(config));
      expect_same_report(a.step(grads, kTaus[e]), reused, describe(config));
      for (std::size_t k = 0; k < sizes.size(); ++k) {
        ASSERT_EQ(a.param_bytes(k), b.param_bytes(k));
        ASSERT_EQ(bytes_of(a.state[k].entry), bytes_of(b.state[k].entry));
      }
    }
    // A preview of a NaN event, then new counters: the step must scan again (its Δ is finite now).
    auto grads = split(event_grad(557, 0), sizes);
    std::vector<const float*> g;
    grads[0][0] = std::numeric_limits<float>::quiet_NaN();
    for (const auto& x : grads) g.push_back(x.data());
    EXPECT_FALSE(b.stepper.preview(g, 0).applied);
    b.stepper.set_raw_counters(b.stepper.raw_counters());
    grads[0][0] = 0.5f;
    EXPECT_TRUE(b.step(grads, 0, 0, true).applied);
  }
}

}  // namespace
}  // namespace cgad::fastpath
