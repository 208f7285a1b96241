#pragma once
// A DiLoCo worker: H inner steps of SGD or AdamW (float) from the parameters it was handed, with its own
// gradient stream (run seed, worker index) and its own inner-optimizer state, both kept across rounds.
#include "cgad/reference/outer_optimizer.hpp"
#include "cgad/reference/random.hpp"
#include "cgad/simulate/objectives.hpp"
#include "cgad/simulate/simulation.hpp"

#include <cstdint>
#include <memory>
#include <span>

namespace cgad::simulate {

// SGD: x = x − lr·g, applied whatever g holds (a non-finite g makes a non-finite Δ, which the outer step
// skips and counts). AdamW (Loshchilov & Hutter, decoupled weight decay) is the reference's Adam in float
// (reference::make_optimizer<float> with OptimizerKind::adam: σ ≡ 1, so the same maths,
// x = x − lr·(m̂/(sqrt(v̂) + ε) + wd·x)), one outer-optimizer event per inner step; like any reference
// optimizer it refuses a gradient with a NaN or Inf, leaving x and its state untouched.
class InnerOptimizer {
 public:
  InnerOptimizer(const InnerConfig& config, std::size_t parameters);
  // One step; false when the step was skipped because g was not finite (AdamW only).
  bool step(std::span<float> x, std::span<const float> g);

 private:
  float sgd_lr_;
  std::unique_ptr<reference::OuterOptimizer<float>> adamw_;  // null for SGD
};

class Worker {
 public:
  Worker(const InnerConfig& config, std::size_t parameters, std::uint64_t run_seed, std::uint32_t index);
  // H inner steps on `objective`, starting from and updating x in place. `grad` is scratch of x's length,
  // shared by all the run's workers (they run one at a time). Returns the number of skipped steps.
  std::int64_t run(Objective& objective, std::span<float> x, std::span<float> grad);

 private:
  std::int64_t steps_;
  InnerOptimizer optimizer_;
  reference::PhiloxStream stream_;
};

}  // namespace cgad::simulate
