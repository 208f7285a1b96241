#pragma once
// The simulation's objectives (SimulationSpec::objective): what a worker differentiates and what the server's
// parameters are judged by. Workers get float stochastic gradients; the loss is evaluated in double.
//
//  * nqm: theory::NoisyQuadratic (f(x) = ½ Σ λ_i (x_i − c_i)², λ_i = i^{−3/2}, centres uniform in [−2, 2]
//    from the problem seed) with the stochastic gradient g_i = λ_i(x_i − c_i) + s·sqrt(λ_i)·z_i of Zhang et al.
//    2019 (noise covariance s²·H, see SimulationSpec::nqm_noise). Loss: f(x) exactly (in double).
//    Start: x_i ~ N(0, 1) from the run seed.
//  * teacher-student: inputs x ~ N(0, D²) with D = diag(R, …, R, 1, …, 1), the first K of the 16 dimensions
//    scaled by R (SimulationSpec::outlier_features, outlier_scale: a proxy for the massive activations of large
//    models, which widen a weight row's range of Δ; K = 0 by default, x ~ N(0, I_16)); a fixed teacher tanh MLP
//    16→32→1 (weights N(0, 1/fan_in), biases 0, from the problem seed); the student is a tanh MLP with `depth`
//    hidden layers of `size` units, 16→size→…→size→1 (same initialization, from the run seed).
//    A worker's gradient is that of ½·mean squared error on a fresh minibatch of 16 inputs drawn from its
//    stream, labelled teacher(x) + label_noise·z. Loss: ½·mean squared error against the teacher's (noise-free)
//    outputs on a fixed evaluation set of 1024 inputs from the problem seed — the excess risk, 0 at the teacher.
//    Under `--lr-scale mup` the readout starts at μP's smaller scale (lr_scale.hpp).
//
// Workers with bf16 parameters (SimulationSpec::worker_params = bf16) compute as a bf16 training run does — the
// model's parameters stored in bf16, no fp32 master copy, every op's inputs and outputs in bf16 and its arithmetic
// in fp32, as PyTorch runs a model cast to bfloat16 on a GPU: matmuls take bf16 operands, accumulate in fp32
// (tensor cores; cuBLAS's CUBLAS_COMPUTE_32F for bf16 GEMMs) and round the result, bias included, to bf16 once;
// elementwise ops (tanh, its backward, the loss's gradient) compute in fp32 ("opmath") and round once; gradients
// come out in the parameters' dtype. Here: the minibatch's inputs and labels are rounded to bf16 (the data as the
// model sees them), mlp.hpp's `round` makes every stored activation and gradient bf16 (round to nearest even, as
// torch's casts), and the NQM's gradient is rounded to bf16 as it leaves the "model". What stays fp32: every
// accumulation, the inner optimizer's state and arithmetic (worker.hpp: its new parameters are rounded to bf16,
// as torch's fused AdamW computes in fp32 and stores bf16 parameters), and the evaluation loss (in double, on the
// bf16 parameters). Deviation: torch.optim.AdamW on bf16 parameters keeps m and v in bf16 too; here they are fp32,
// as bitsandbytes' and Megatron's bf16 optimizers keep them.
#include "cgad/fastpath/bf16.hpp"
#include "cgad/simulate/mlp.hpp"
#include "cgad/reference/random.hpp"
#include "cgad/simulate/simulation.hpp"

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace cgad::simulate {

// A worker's rounding of every value it stores (see above): round to nearest even to bf16, or none.
struct WorkerRounding {
  bool bf16 = false;
  float operator()(float x) const { return bf16 ? fastpath::to_float(fastpath::round_nearest_even_bf16(x)) : x; }
};

inline constexpr MlpShape kTeacherShape{16, 32};
inline constexpr std::size_t kMinibatch = 16;
inline constexpr std::size_t kEvaluationSamples = 1024;

class Objective {
 public:
  virtual ~Objective() = default;
  virtual std::size_t parameters() const = 0;
  // The parameters as a sequence of tensors (sizes summing to parameters()), for the outer optimizer's q8 state,
  // whose blocks restart at each tensor and which keeps a tensor under min_q8_size in fp32 state. Default: one
  // tensor (the NQM's x is one vector); the teacher-student MLP has four (MlpShape::tensor_sizes).
  virtual std::vector<std::size_t> tensor_sizes() const { return {parameters()}; }
  // The starting parameters of a run, from its seed.
  virtual std::vector<float> initial_point(std::uint64_t run_seed) const = 0;
  // The evaluation loss at x, in double.
  virtual double loss(std::span<const float> x) const = 0;
  // One stochastic gradient at x, its randomness drawn from `stream` (the worker's), written to g.
  // Not const: it reuses scratch buffers, so one Objective serves one thread.
  virtual void gradient(std::span<const float> x, reference::PhiloxStream& stream, std::span<float> g) = 0;
};

// The number of parameters of the spec's objective, without building it (`depth`: the teacher-student's hidden
// layers, SimulationSpec::depth).
std::size_t parameter_count(ObjectiveKind kind, std::size_t size, std::size_t depth = 1);
// Its tensor sizes (Objective::tensor_sizes), without building it.
std::vector<std::size_t> tensor_sizes(ObjectiveKind kind, std::size_t size, std::size_t depth = 1);
// Its tensors' names, for per-tensor reports: "x" for the NQM, MlpShape::tensor_names for the teacher-student.
std::vector<std::string> tensor_names(ObjectiveKind kind, std::size_t size, std::size_t depth = 1);

// The bytes an objective of this kind holds or allocates per parameter (for SimulationSpec's memory estimate):
// NQM: λ, c, the noise scale and two gradient scratch vectors in double, plus loss()'s double copy of x;
// teacher-student: loss()'s double copy of x (its hidden activations are one sample's, `width` values, and the
// teacher and the 1024-input evaluation set have fixed sizes: none of them grows with the parameters).
double objective_bytes_per_parameter(ObjectiveKind kind);

// Builds the spec's objective (objective, size, problem_seed, nqm_noise / label_noise, worker_params, lr_scale);
// InputError on size 0.
std::unique_ptr<Objective> make_objective(const SimulationSpec& spec);

}  // namespace cgad::simulate
