#include "cgad/simulate/objectives.hpp"

#include "cgad/core/errors.hpp"
#include "cgad/simulate/lr_scale.hpp"
#include "cgad/theory/objectives.hpp"

#include <cmath>
#include <string>
#include <utility>

namespace cgad::simulate {
namespace {

std::vector<float> standard_normals(std::size_t n, reference::PhiloxStream stream) {
  std::vector<float> out(n);
  for (float& x : out) x = static_cast<float>(stream.normal());
  return out;
}

class NoisyQuadraticModel final : public Objective {
 public:
  NoisyQuadraticModel(std::size_t dimension, std::uint64_t problem_seed, double noise, WorkerRounding round)
      : f_(dimension, problem_seed), noise_scale_(dimension), x_(dimension), exact_(dimension), round_(round) {
    for (std::size_t i = 0; i < dimension; ++i) noise_scale_[i] = noise * std::sqrt(f_.spectrum()[i]);
  }
  std::size_t parameters() const override { return x_.size(); }
  std::vector<float> initial_point(std::uint64_t run_seed) const override {
    return standard_normals(x_.size(), reference::PhiloxStream(run_seed, reference::StreamPurpose::initial_point));
  }
  double loss(std::span<const float> x) const override { return f_.value(std::vector<double>(x.begin(), x.end())); }
  void gradient(std::span<const float> x, reference::PhiloxStream& stream, std::span<float> g) override {
    x_.assign(x.begin(), x.end());
    f_.gradient(x_, exact_);
    for (std::size_t i = 0; i < g.size(); ++i) {
      g[i] = round_(static_cast<float>(exact_[i] + noise_scale_[i] * stream.normal()));
    }
  }

 private:
  theory::NoisyQuadratic<double> f_;
  std::vector<double> noise_scale_;  // s·sqrt(λ_i)
  std::vector<double> x_, exact_;    // scratch
  WorkerRounding round_;
};

// Every W_l ~ N(0, 1/fan_in), biases 0, w_out ~ N(0, 1/hidden) (LeCun-normal: unit-variance pre-activations),
// drawn in the layout's order; w_out's standard deviation times `readout_multiplier` (μP's readout, lr_scale.hpp;
// 1 for the teacher).
template <class T>
std::vector<T> mlp_initialization(const MlpShape& shape, reference::PhiloxStream stream,
                                  double readout_multiplier = 1.0) {
  std::vector<T> p(shape.parameters(), T(0));
  for (std::size_t l = 0; l < shape.depth; ++l) {
    const double scale = 1.0 / std::sqrt(static_cast<double>(shape.fan_in(l)));
    for (std::size_t k = 0; k < shape.hidden * shape.fan_in(l); ++k) {
      p[shape.weight(l) + k] = static_cast<T>(scale * stream.normal());
    }
  }
  const double readout_scale = readout_multiplier / std::sqrt(static_cast<double>(shape.hidden));
  for (std::size_t j = 0; j < shape.hidden; ++j)
    p[shape.readout() + j] = static_cast<T>(readout_scale * stream.normal());
  return p;
}

// The input features' scales: the first `outlier_features` of the inputs' dimensions are drawn with standard
// deviation `outlier_scale`, the rest with 1 (SimulationSpec::outlier_features).
std::vector<double> feature_scales(const SimulationSpec& spec) {
  std::vector<double> scales(kTeacherShape.inputs, 1.0);
  for (std::size_t i = 0; i < spec.outlier_features; ++i) scales[i] = spec.outlier_scale;
  return scales;
}

class TeacherStudent final : public Objective {
 public:
  TeacherStudent(MlpShape student, std::vector<double> feature_scales, std::uint64_t problem_seed, double label_noise,
                 WorkerRounding round, double readout_multiplier)
      : student_(student),
        feature_scales_(std::move(feature_scales)),
        teacher_(mlp_initialization<double>(kTeacherShape,
                                            reference::PhiloxStream(problem_seed, reference::StreamPurpose::teacher))),
        label_noise_(label_noise),
        round_(round),
        readout_multiplier_(readout_multiplier),
        inputs_(kMinibatch * student_.inputs),
        targets_(kMinibatch) {
    reference::PhiloxStream stream(problem_seed, reference::StreamPurpose::evaluation);
    evaluation_inputs_.resize(kEvaluationSamples * student_.inputs);
    for (std::size_t k = 0; k < evaluation_inputs_.size(); ++k) {
      evaluation_inputs_[k] = scaled(stream.normal(), k % student_.inputs);
    }
    std::vector<double> hidden_values;
    for (std::size_t s = 0; s < kEvaluationSamples; ++s) {
      evaluation_targets_.push_back(
          mlp_output<double>(kTeacherShape, teacher_, evaluation_inputs_.data() + s * student_.inputs, hidden_values));
    }
  }
  std::size_t parameters() const override { return student_.parameters(); }
  std::vector<std::size_t> tensor_sizes() const override { return student_.tensor_sizes(); }
  std::vector<float> initial_point(std::uint64_t run_seed) const override {
    return mlp_initialization<float>(
        student_, reference::PhiloxStream(run_seed, reference::StreamPurpose::initial_point), readout_multiplier_);
  }
  double loss(std::span<const float> x) const override {
    const std::vector<double> params(x.begin(), x.end());
    std::vector<double> hidden_values;
    return mlp_loss<double>(student_, params, evaluation_inputs_, evaluation_targets_, {}, hidden_values);
  }
  void gradient(std::span<const float> x, reference::PhiloxStream& stream, std::span<float> g) override {
    // The label is the teacher's output on exactly the float input the student sees, plus noise.
    std::vector<double>& sample = teacher_input_;
    sample.resize(student_.inputs);
    for (std::size_t s = 0; s < kMinibatch; ++s) {
      for (std::size_t i = 0; i < student_.inputs; ++i) {
        inputs_[s * student_.inputs + i] = round_(static_cast<float>(scaled(stream.normal(), i)));
        sample[i] = inputs_[s * student_.inputs + i];
      }
      const double label = mlp_output<double>(kTeacherShape, teacher_, sample.data(), teacher_hidden_);
      targets_[s] = round_(static_cast<float>(label + label_noise_ * stream.normal()));
    }
    mlp_loss<float>(student_, x, inputs_, targets_, g, student_hidden_, round_);
  }

 private:
  // A standard normal draw as input feature i; a feature of scale 1 is the draw itself.
  double scaled(double z, std::size_t i) const { return feature_scales_[i] == 1.0 ? z : z * feature_scales_[i]; }

  MlpShape student_;
  std::vector<double> feature_scales_;  // one per input dimension
  std::vector<double> teacher_;
  double label_noise_;
  WorkerRounding round_;
  double readout_multiplier_;
  std::vector<double> evaluation_inputs_, evaluation_targets_;
  std::vector<float> inputs_, targets_, student_hidden_;  // scratch
  std::vector<double> teacher_input_, teacher_hidden_;    // scratch
};

}  // namespace

std::size_t parameter_count(ObjectiveKind kind, std::size_t size, std::size_t depth) {
  return kind == ObjectiveKind::nqm ? size : MlpShape{kTeacherShape.inputs, size, depth}.parameters();
}

std::vector<std::size_t> tensor_sizes(ObjectiveKind kind, std::size_t size, std::size_t depth) {
  if (kind == ObjectiveKind::nqm) return {size};
  return MlpShape{kTeacherShape.inputs, size, depth}.tensor_sizes();
}

std::vector<std::string> tensor_names(ObjectiveKind kind, std::size_t size, std::size_t depth) {
  if (kind == ObjectiveKind::nqm) return {"x"};
  return MlpShape{kTeacherShape.inputs, size, depth}.tensor_names();
}

double objective_bytes_per_parameter(ObjectiveKind kind) {
  return kind == ObjectiveKind::nqm ? 6.0 * sizeof(double) : 1.0 * sizeof(double);
}

std::unique_ptr<Objective> make_objective(const SimulationSpec& spec) {
  if (spec.size == 0) throw core::InputError("objective size must be >= 1");
  const WorkerRounding round{spec.worker_params == WorkerParams::bf16};
  switch (spec.objective) {
    case ObjectiveKind::nqm:
      return std::make_unique<NoisyQuadraticModel>(spec.size, spec.problem_seed, spec.nqm_noise, round);
    case ObjectiveKind::teacher_student:
      return std::make_unique<TeacherStudent>(MlpShape{kTeacherShape.inputs, spec.size, spec.depth},
                                              feature_scales(spec), spec.problem_seed, spec.label_noise, round,
                                              readout_init_multiplier(spec.size, spec.lr_scale));
  }
  throw core::InputError("unknown objective kind");
}

}  // namespace cgad::simulate
