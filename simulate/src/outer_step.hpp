#pragma once
// The server's optimizer in a run (simulation.cpp): the fast path's step, or the reference's Delayed Nesterov in
// float, over the objective's tensors. With per-tensor learning rates (μP, lr_scale.hpp) the fast path runs one
// CpuOptimizer per group of tensors sharing a multiplier — torch's param groups, the use fastpath::CpuOptimizer's
// table step and preview exist for: an event refused (NaN/Inf, overflow) or skipped by any group is refused by
// all before any steps, so it changes nothing anywhere. With one group it is the contiguous step over all tensors.
// It also measures the trap the noise study measures (fastpath/trap_counter.hpp), for the Adam family.
#include "cgad/fastpath/bf16.hpp"
#include "cgad/fastpath/fastpath.hpp"
#include "cgad/fastpath/trap_counter.hpp"
#include "cgad/reference/outer_optimizer.hpp"
#include "cgad/simulate/simulation.hpp"

#include <memory>
#include <optional>
#include <span>
#include <vector>

namespace cgad::simulate {

bool runs_delayed_nesterov(const SimulationSpec& spec);

class OuterStep {
 public:
  // `tensors`: the objective's tensor sizes; `lr_multipliers`: one per tensor (lr_scale.hpp).
  OuterStep(const SimulationSpec& spec, const std::vector<std::size_t>& tensors,
            const std::vector<float>& lr_multipliers);

  // One event: `grad` is the fragment's slice (the whole Δ when there is one fragment, as with several groups).
  fastpath::StepReport step(std::span<float> params, std::span<const float> grad, std::int64_t tau,
                            std::size_t fragment);
  fastpath::StepReport step(std::span<fastpath::bf16> params, std::span<const float> grad, std::int64_t tau,
                            std::size_t fragment);
  void advance_round();

  // The trap metrics so far, over every element and per tensor (SimulationResult's fields; absent outside the
  // Adam family).
  struct TrapReport {
    fastpath::TrapCounts all;
    std::vector<fastpath::TrapCounts> tensors;
  };
  std::optional<TrapReport> trap() const;

 private:
  struct Group {
    std::unique_ptr<fastpath::CpuOptimizer> optimizer;
    std::vector<std::size_t> tensors;  // indices into tensor_begin_
  };
  template <class Param>
  fastpath::StepReport step_groups(std::span<Param> params, std::span<const float> grad, std::int64_t tau,
                                   std::size_t fragment);

  std::vector<Group> groups_;
  std::unique_ptr<reference::OuterOptimizer<float>> reference_;  // Delayed Nesterov
  std::vector<std::size_t> tensor_begin_;                        // tensor k's first element; one more than tensors
  std::optional<fastpath::TrapCounter> trap_;
  std::vector<float> widened_;  // bf16 parameters widened, for the trap counter
  // A decoded moment ("m" or "v") of every group, in the tensors' layout order (groups hold their tensors in order).
  std::vector<float> moment_in_layout(const char* name) const;
};

}  // namespace cgad::simulate
