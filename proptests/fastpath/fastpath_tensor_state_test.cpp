// CpuOptimizer::tensor_state(k), the per-tensor entries over its own state that the owning optimizer hands the
// table step (table_stepper.hpp): the tensors' slices tile every state buffer in order, without gaps, in every
// format (q8 absmax, fp32 fallback moments under min_q8_size; q8 codes lie at the tensor's elements); and a load
// copies into those buffers,
// so that slices taken before it still see the state after it.
#include "support/fastpath_test_support.hpp"

#include "cgad/core/errors.hpp"
#include "cgad/fastpath/detail/cpu_optimizer_internals.hpp"

#include <gtest/gtest.h>

using cgad::fastpath::detail::host_state_of;

namespace cgad::fastpath {
namespace {

using core::OptimizerKind;
using testing::all_format_configs;
using testing::describe;
using testing::Params;
using testing::random_vector;
using testing::state_bytes;

std::vector<StepConfig> configs() {
  std::vector<StepConfig> out;
  for (const OptimizerKind kind : {OptimizerKind::cgad, OptimizerKind::nesterov}) {
    for (StepConfig config : all_format_configs(kind)) {
      out.push_back(config);
      config.min_q8_size = 300;
      out.push_back(config);
    }
  }
  StepConfig pa = all_format_configs(OptimizerKind::pa_cgad)[4];  // fp32 parameters, q8 state
  pa.fragments = 3;
  out.push_back(pa);
  return out;
}

// Checks that the spans `part(tensor_state(k))` of k = 0, 1, ... follow each other from the start of `whole`
// to its end.
template <class T, class Part>
void expect_tiles(CpuOptimizer& opt, const std::vector<T>& whole, Part part, const std::string& where) {
  const T* at = whole.data();
  for (std::size_t k = 0; k < opt.tensor_sizes().size(); ++k) {
    const std::span<T> s = part(opt.tensor_state(k));
    if (s.empty()) continue;
    EXPECT_EQ(s.data(), at) << where << " tensor " << k;
    at = s.data() + s.size();
  }
  EXPECT_EQ(at, whole.data() + whole.size()) << where;
}

TEST(FastpathTensorState, SlicesTileTheLiveStateBuffers) {
  for (const StepConfig& config : configs()) {
    for (const auto& sizes : testing::tensor_layouts()) {
      const std::string where = describe(config);
      CpuOptimizer opt(config, sizes, 1);
      const HostState& s = host_state_of(opt);
      const std::size_t min_q8 = effective_min_q8_size(config);
      for (std::size_t k = 0; k < sizes.size(); ++k) {
        const TensorState t = opt.tensor_state(k);
        EXPECT_EQ(t.moments, s.moments) << where;
        EXPECT_EQ(t.fp32_fallback, config.state == StateFormat::q8 && sizes[k] < min_q8) << where << " tensor " << k;
        for (int m = 0; m < t.moments; ++m) {
          const bool q8 = config.state == StateFormat::q8 && !t.fp32_fallback;
          EXPECT_EQ(t.fp32[m].size(), config.state == StateFormat::fp32 || t.fp32_fallback ? sizes[k] : 0) << where;
          EXPECT_EQ(t.bf16_values[m].size(), config.state == StateFormat::bf16 ? sizes[k] : 0) << where;
          EXPECT_EQ(t.codes[m].size(), q8 ? sizes[k] : 0) << where;
          if (q8 && config.fragments == 1) {
            EXPECT_EQ(t.absmax[m].size(), (sizes[k] + 255) / 256) << where;
          }
        }
      }
      for (int m = 0; m < s.moments; ++m) {
        expect_tiles(
            opt, s.fp32[m], [m](const TensorState& t) { return t.fp32[m]; }, where);
        expect_tiles(
            opt, s.bf16_values[m], [m](const TensorState& t) { return t.bf16_values[m]; }, where);
        // The codes are one per parameter (a tensor under min_q8_size leaves its codes unused): tensor k's start
        // at its first element.
        for (std::size_t k = 0, begin = 0; k < sizes.size(); begin += sizes[k], ++k) {
          const std::span<std::uint8_t> codes = opt.tensor_state(k).codes[m];
          if (!codes.empty()) {
            EXPECT_EQ(codes.data(), s.codes[m].data() + begin) << where << " tensor " << k;
          }
        }
        expect_tiles(
            opt, s.absmax[m], [m](const TensorState& t) { return t.absmax[m]; }, where);
      }
      EXPECT_THROW(opt.tensor_state(sizes.size()), core::InputError);
    }
  }
}

TEST(FastpathTensorState, LoadCopiesIntoTheBuffersTheSlicesSee) {
  for (const StepConfig& config : configs()) {
    const std::vector<std::size_t> sizes{257, 0, 300, 1};
    const std::string where = describe(config);
    CpuOptimizer opt(config, sizes, 1);
    const std::size_t n = opt.parameters();
    Params params(config, random_vector(n, 5));
    const std::size_t slice = opt.fragment_size(0);
    params.step(opt, random_vector(slice, 6), 1);
    const std::vector<unsigned char> saved = opt.save_bytes();
    const std::vector<unsigned char> expected = state_bytes(opt);
    const TensorState before = opt.tensor_state(0);
    params.step(opt, random_vector(slice, 7), 0);
    ASSERT_NE(state_bytes(opt), expected) << where;
    opt.load_bytes(saved);
    EXPECT_EQ(state_bytes(opt), expected) << where;
    const TensorState after = opt.tensor_state(0);  // empty spans may point anywhere: compare non-empty ones
    for (int m = 0; m < after.moments; ++m) {
      if (!after.fp32[m].empty()) {
        EXPECT_EQ(before.fp32[m].data(), after.fp32[m].data()) << where;
      }
      if (!after.bf16_values[m].empty()) {
        EXPECT_EQ(before.bf16_values[m].data(), after.bf16_values[m].data()) << where;
      }
      if (!after.codes[m].empty()) {
        EXPECT_EQ(before.codes[m].data(), after.codes[m].data()) << where;
      }
      if (!after.absmax[m].empty()) {
        EXPECT_EQ(before.absmax[m].data(), after.absmax[m].data()) << where;
      }
    }
  }
}

}  // namespace
}  // namespace cgad::fastpath
