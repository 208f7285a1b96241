// The teacher-student objective's deeper students and outlier input features (objectives.hpp, mlp.hpp): the
// layout of a depth-L network and its tensors, μP's rule for its hidden matrices, and that outlier features reach
// the inputs a worker trains on (and a scale of 1 changes nothing).
#include <gtest/gtest.h>

#include "cgad/reference/random.hpp"
#include "cgad/simulate/lr_scale.hpp"
#include "cgad/simulate/mlp.hpp"
#include "cgad/simulate/objectives.hpp"
#include "cgad/simulate/simulation.hpp"

#include <bit>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

namespace {

using cgad::simulate::MlpShape;
using cgad::simulate::ObjectiveKind;
using cgad::simulate::SimulationSpec;

TEST(SimulateDeepStudent, TensorsOfADepthThreeNetworkTileItsParametersInLayerOrder) {
  const MlpShape shape{16, 7, 3};
  const std::vector<std::size_t> sizes = shape.tensor_sizes();
  EXPECT_EQ(sizes, (std::vector<std::size_t>{7 * 16, 7, 7 * 7, 7, 7 * 7, 7, 7, 1}));
  EXPECT_EQ(shape.tensor_names(), (std::vector<std::string>{"W1", "b1", "W2", "b2", "W3", "b3", "w4", "b4"}));
  // Each tensor starts where the previous one ends, at the accessor that reads it.
  std::vector<std::size_t> starts;
  for (std::size_t l = 0; l < shape.depth; ++l) {
    starts.push_back(shape.weight(l));
    starts.push_back(shape.bias(l));
  }
  starts.push_back(shape.readout());
  starts.push_back(shape.readout_bias());
  std::size_t at = 0;
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    EXPECT_EQ(starts[k], at) << shape.tensor_names()[k];
    at += sizes[k];
  }
  EXPECT_EQ(at, shape.parameters());
  EXPECT_EQ(cgad::simulate::parameter_count(ObjectiveKind::teacher_student, 7, 3), shape.parameters());
  EXPECT_EQ(cgad::simulate::tensor_sizes(ObjectiveKind::teacher_student, 7, 3), sizes);
  // Depth 1 is the two-layer network W1, b1, w2, b2 of 16 → n → 1.
  EXPECT_EQ((MlpShape{16, 7, 1}.tensor_names()), (std::vector<std::string>{"W1", "b1", "w2", "b2"}));
  EXPECT_EQ((MlpShape{16, 7, 1}.parameters()), 7u * 18u + 1u);
}

TEST(SimulateDeepStudent, MupGivesHiddenMatricesAndTheReadoutLrTimesBaseOverWidth) {
  using cgad::simulate::LrScale;
  const float r = 32.0f / 128.0f;
  EXPECT_EQ(cgad::simulate::lr_multipliers(ObjectiveKind::teacher_student, 128, LrScale::mup, 3),
            (std::vector<float>{1, 1, r, 1, r, 1, r, 1}));
  EXPECT_EQ(cgad::simulate::lr_multipliers(ObjectiveKind::teacher_student, 128, LrScale::none, 3),
            (std::vector<float>(8, 1.0f)));
}

std::vector<float> one_gradient(const SimulationSpec& spec) {
  auto objective = cgad::simulate::make_objective(spec);
  const std::vector<float> x = objective->initial_point(spec.seed);
  std::vector<float> g(x.size());
  cgad::reference::PhiloxStream stream(7, cgad::reference::StreamPurpose::evaluation);
  objective->gradient(x, stream, g);
  return g;
}

TEST(SimulateDeepStudent, OutlierFeaturesOfScaleOneChangeNoBit) {
  SimulationSpec plain;
  plain.objective = ObjectiveKind::teacher_student;
  plain.size = 24;
  plain.depth = 2;
  SimulationSpec unit = plain;
  unit.outlier_features = 16;
  unit.outlier_scale = 1.0;
  const std::vector<float> a = one_gradient(plain), b = one_gradient(unit);
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(std::bit_cast<std::uint32_t>(a[i]), std::bit_cast<std::uint32_t>(b[i])) << "element " << i;
  }
  auto pa = cgad::simulate::make_objective(plain), pb = cgad::simulate::make_objective(unit);
  const std::vector<float> x = pa->initial_point(1);
  EXPECT_EQ(std::bit_cast<std::uint64_t>(pa->loss(x)), std::bit_cast<std::uint64_t>(pb->loss(x)));
}

// ∂L/∂W1[j, i] = Σ_s δ_{s,j}·x_{s,i}: every entry of input column i carries x_i, so the outlier columns' RMS is
// R times the others' up to the spread of 16-sample sums of products of draws (each column's RMS over 64 rows
// has a relative spread of a few tens of percent); a factor 3 either side of R = 100 cannot be reached without
// the scale reaching the inputs, and R = 1 gives a ratio near 1.
TEST(SimulateDeepStudent, OutlierFeaturesScaleTheirColumnsOfTheFirstLayersGradient) {
  SimulationSpec spec;
  spec.objective = ObjectiveKind::teacher_student;
  spec.size = 64;
  spec.outlier_features = 4;
  spec.outlier_scale = 100;
  const std::vector<float> g = one_gradient(spec);
  const auto column_rms = [&](std::size_t first, std::size_t last) {
    double sum = 0;
    for (std::size_t j = 0; j < spec.size; ++j) {
      for (std::size_t i = first; i < last; ++i) sum += static_cast<double>(g[j * 16 + i]) * g[j * 16 + i];
    }
    return std::sqrt(sum / static_cast<double>(spec.size * (last - first)));
  };
  const double ratio = column_rms(0, 4) / column_rms(4, 16);
  EXPECT_GT(ratio, 100.0 / 3) << ratio;
  EXPECT_LT(ratio, 100.0 * 3) << ratio;
}

TEST(SimulateDeepStudent, DepthAndOutliersAreRefusedWhereTheyCannotApply) {
  SimulationSpec nqm;
  nqm.depth = 2;
  EXPECT_THROW(cgad::simulate::validate(nqm), cgad::core::InputError);
  nqm.depth = 1;
  nqm.outlier_features = 1;
  nqm.outlier_scale = 10;
  EXPECT_THROW(cgad::simulate::validate(nqm), cgad::core::InputError);
  SimulationSpec ts;
  ts.objective = ObjectiveKind::teacher_student;
  ts.size = 8;
  for (const std::size_t depth : {0u, 17u}) {
    ts.depth = depth;
    EXPECT_THROW(cgad::simulate::validate(ts), cgad::core::InputError) << depth;
  }
  ts.depth = 16;
  EXPECT_NO_THROW(cgad::simulate::validate(ts));
  ts.outlier_features = 17;
  EXPECT_THROW(cgad::simulate::validate(ts), cgad::core::InputError);
  ts.outlier_features = 16;
  for (const double scale : {0.0, -1.0, 1e7, std::nan("")}) {
    ts.outlier_scale = scale;
    EXPECT_THROW(cgad::simulate::validate(ts), cgad::core::InputError) << scale;
  }
}

}  // namespace
