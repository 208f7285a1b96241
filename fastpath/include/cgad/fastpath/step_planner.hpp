#pragma once
// The host side of a step that both backends share: argument checks, the gate, the step counts and ages,
// and the step-wide fp32 constants. σ(τ) and the bias corrections 1 − β^t are evaluated once per step in
// double (reference::sigma<double>, std::pow) and rounded once to float: their relative error is then at
// most 2^-24 (the final rounding) plus a few units of 2^-53, far below one float ulp.
//
// Ages (PA-CGAD) follow the reference's GatedAdam exactly: advance_round() adds 1 to every age, an event
// for fragment f is gated by σ(max(τ, a_f)), and an applied event resets a_f to 0. A skipped event (zero
// gate with `skip`, or a NaN/Inf pseudo-gradient) changes nothing.
#include "cgad/fastpath/block_step.hpp"
#include "cgad/fastpath/config.hpp"
#include "cgad/reference/fragments.hpp"
#include "cgad/reference/outer_optimizer.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace cgad::fastpath {

using StepReport = reference::StepReport<float>;

class StepPlanner {
 public:
  StepPlanner(const StepConfig& config, std::size_t parameters);

  struct Plan {
    StepReport report;         // applied = false when the zero gate skips the event
    StepArgs args;             // coefficients, formats and counters; the caller fills the pointers
    std::size_t fragment = 0;
    std::size_t offset = 0;    // first element of the fragment
    std::size_t first_block = 0;
  };

  // Checks the event's shape (InputError) and computes the step's constants; changes nothing.
  Plan plan(std::size_t params_size, std::size_t grad_size, std::int64_t tau, std::size_t fragment) const;
  // Records an applied step: t_f and the step count advance, the fragment's age resets.
  void commit(const Plan& plan);
  void advance_round();

  const StepConfig& config() const { return config_; }
  const reference::FragmentLayout& layout() const { return layout_; }
  bool adam_family() const { return reference::is_adam_family(config_.optimizer); }
  int moments() const { return adam_family() ? 2 : 1; }
  std::size_t first_block(std::size_t fragment) const { return first_block_[fragment]; }
  std::size_t total_blocks() const { return first_block_.back(); }
  std::size_t parameters() const { return empty_ ? 0 : layout_.parameters(); }
  std::size_t fragment_size(std::size_t f) const { return empty_ ? 0 : layout_.size(f); }

  // The counters, as the reference names them ("t", "age" for PA-CGAD), plus the applied-step count.
  std::vector<reference::StateCounter> counters() const;
  struct Counters {
    std::vector<std::int64_t> t;
    std::vector<std::int64_t> ages;
    std::uint64_t steps = 0;
  };
  const Counters& raw_counters() const { return counters_; }
  void set_raw_counters(Counters counters);  // InputError on a length mismatch or a negative count

 private:
  StepConfig config_;
  reference::GateParams<double> gate_;  // built once: the step itself parses and allocates nothing
  reference::FragmentLayout layout_;
  bool empty_ = false;                    // zero parameters (the layout is then built over one)
  std::vector<std::size_t> first_block_;  // P + 1 entries: prefix sums of each fragment's block count
  Counters counters_;
};

}  // namespace cgad::fastpath
