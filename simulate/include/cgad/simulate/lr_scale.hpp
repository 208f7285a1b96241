#pragma once
// `--lr-scale mup`: the learning rates and the readout's initialization follow the width by μP, the maximal update
// parametrization (Yang et al., "Tensor Programs V", arXiv 2203.03466), so that a learning rate tuned at one width
// holds at every width and the scale axis of a sweep no longer mixes scale with a learning rate that is too large
// for wide students.
//
// μP for Adam (their Table 3; Table 8 is the same rules relative to a base width, as the `mup` package applies
// them): input weights and all biases keep the Adam lr η and the standard 1/fan_in initialization variance; hidden
// weights (both dimensions grow with width) get lr η/fan_in; the output (readout) weights get lr η/fan_in and
// initialization variance 1/fan_in². Written relative to a base width n₀ (Table 8; the `mup` package's MuReadout
// and MuAdam), where the parametrization is the standard one, at width n:
//   * teacher-student 16 → n → … → n → 1: W1 (n × 16) is the input layer, its fan_in 16 does not grow: lr η, init
//     N(0, 1/16). Biases: lr η, init 0. The hidden matrices W2..W_depth (n × n, present from depth 2) are hidden
//     weights: lr η·n₀/n, init N(0, 1/n) (the standard variance, which is μP's for hidden weights under Adam).
//     The readout w_out (1 × n), fan_in n: lr η·n₀/n and init N(0, (1/n)·(n₀/n)), which is 1/n at n = n₀ and
//     ∝ 1/n² as n grows.
//   * nqm: x is one vector (a bias-like tensor, one dimension that grows): lr η, unchanged.
// n₀ = 32, the teacher's width and the default student's, where the default learning rates were derived
// (simulation.hpp): at width 32 `mup` is `none` bit for bit.
//
// The multipliers apply to every Adam learning rate of a run: the outer optimizer's (Adam family) and the workers'
// inner AdamW's — each tensor is its own parameter group, as torch.optim param groups carry μP's per-tensor lr.
// μP's SGD rules (their Table 3, SGD column) are not implemented: `mup` is refused with the Nesterov family, Delayed
// Nesterov and inner SGD, and with PA-CGAD (its fragments are slices of the flat vector, not of param groups).
#include "cgad/simulate/simulation.hpp"

#include <cstddef>
#include <vector>

namespace cgad::simulate {

inline constexpr std::size_t kMupBaseWidth = 32;

// Per tensor of tensor_sizes(kind, size, depth), in that order: the factor on every Adam learning rate.
std::vector<float> lr_multipliers(ObjectiveKind kind, std::size_t size, LrScale scale, std::size_t depth = 1);

// The factor on the teacher-student readout's initialization standard deviation (1/sqrt(n) in the standard
// parametrization): sqrt(n₀/n) under mup, 1 otherwise.
double readout_init_multiplier(std::size_t width, LrScale scale);

// InputError unless `scale` can be applied to this spec's methods (see above); a no-op for LrScale::none.
void validate_lr_scale(const SimulationSpec& spec);

}  // namespace cgad::simulate
