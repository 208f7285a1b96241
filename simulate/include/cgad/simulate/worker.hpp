#pragma once
// A DiLoCo worker: H inner steps of SGD or AdamW (float arithmetic) from the parameters it was handed, with its own
// gradient stream (run seed, worker index) and its own inner-optimizer state, both kept across rounds; with bf16
// worker parameters (objectives.hpp) every new parameter value is rounded to bf16.
#include "cgad/reference/outer_optimizer.hpp"
#include "cgad/reference/random.hpp"
#include "cgad/simulate/objectives.hpp"
#include "cgad/simulate/simulation.hpp"

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace cgad::simulate {

// SGD: x = x − lr·g, applied whatever g holds (a non-finite g makes a non-finite Δ, which the outer step
// skips and counts). AdamW (Loshchilov & Hutter, decoupled weight decay) is the reference's Adam in float
// (reference::make_optimizer<float> with OptimizerKind::adam: σ ≡ 1, so the same maths,
// x = x − lr·(m̂/(sqrt(v̂) + ε) + wd·x)), one outer-optimizer event per inner step. A gradient with a NaN, an Inf
// or an element past the overflow rule (|g| ≥ 2^63, core/overflow_rule.hpp) is refused whole, leaving x and
// the state untouched. Per-tensor learning rates (`lr_multipliers`, μP: lr_scale.hpp) make one AdamW per run of
// consecutive tensors with the same multiplier — torch's param groups; with one multiplier there is one.
class InnerOptimizer {
 public:
  InnerOptimizer(const InnerConfig& config, const std::vector<std::size_t>& tensors,
                 const std::vector<float>& lr_multipliers, WorkerRounding round);
  // One step; false when the step was skipped because g was not finite (AdamW only).
  bool step(std::span<float> x, std::span<const float> g);

 private:
  struct Group {
    std::size_t offset = 0, size = 0;
    std::unique_ptr<reference::OuterOptimizer<float>> adamw;
  };
  float sgd_lr_;
  std::vector<Group> adamw_;  // empty for SGD
  WorkerRounding round_;
};

class Worker {
 public:
  Worker(const InnerConfig& config, const std::vector<std::size_t>& tensors, const std::vector<float>& lr_multipliers,
         WorkerRounding round, std::uint64_t run_seed, std::uint32_t index);
  // H inner steps on `objective`, starting from and updating x in place. `grad` is scratch of x's length,
  // shared by all the run's workers (they run one at a time). Returns the number of skipped steps.
  std::int64_t run(Objective& objective, std::span<float> x, std::span<float> grad);

 private:
  std::int64_t steps_;
  InnerOptimizer optimizer_;
  reference::PhiloxStream stream_;
};

}  // namespace cgad::simulate
