#pragma once
// The host side of a step that both backends share: argument checks, the gate at the event's τ, the layout, and
// (for the CPU backend) the counters, which step_schedule.hpp turns into the step-wide fp32 constants and advances
// after the step; the CUDA backend keeps its counters on the device and runs the same schedule there. σ(τ), σ(a)
// for PA-CGAD's ages and SDM's 1/(1 + τ) are the floats staleness.hpp computes (the float nearest the reference's,
// with the bound stated there).
//
// Ages (PA-CGAD) follow the reference's GatedAdam exactly (reference/detail/gated_adam.hpp): a_f = max(0, round −
// last_sync_f − 1), an event for fragment f is gated by σ(max(τ, a_f)) and synchronizes f whether it is applied or
// skipped for a zero gate; an event refused for a NaN/Inf or overflowing pseudo-gradient changes nothing.
//
// Layout: the parameter vector is a sequence of tensors (sizes summing to the parameter count; one tensor by
// default) and, for PA-CGAD, of P contiguous fragments. The planner cuts it into chunks (block_step.hpp) that
// restart at every tensor and every fragment boundary, so q8 blocks never straddle either; in a q8
// configuration the chunks of a tensor under min_q8_size keep fp32 moments in a separate fallback buffer.
#include "cgad/fastpath/detail/block_step.hpp"
#include "cgad/fastpath/config.hpp"
#include "cgad/fastpath/detail/derived_constants.hpp"
#include "cgad/fastpath/detail/q8_maps.hpp"
#include "cgad/fastpath/step_counters.hpp"
#include "cgad/fastpath/detail/staleness.hpp"
#include "cgad/fastpath/detail/step_schedule.hpp"
#include "cgad/core/fragments.hpp"
#include "cgad/core/step_report.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cgad::fastpath {

class StepPlanner {
 public:
  // One tensor of `parameters` elements.
  StepPlanner(const StepConfig& config, std::size_t parameters);
  // InputError unless the sizes are positive (an empty vector is one empty tensor) and sum without overflow.
  StepPlanner(const StepConfig& config, std::vector<std::size_t> tensor_sizes);

  struct Plan {
    StepEvent event;
    ScheduledStep scheduled;  // plan() only; applied = false when the zero gate skips the event
    StepArgs args;            // formats, sizes and (plan() only) coefficients; the caller fills the pointers
    std::size_t fragment = 0;
    std::size_t offset = 0;  // first element of the fragment
  };

  // Checks the event's shape (InputError) and fills everything but the schedule; changes nothing.
  Plan prepare(std::size_t params_size, std::size_t grad_size, std::int64_t tau, std::size_t fragment) const;
  // prepare() and the schedule from this planner's counters; changes nothing.
  Plan plan(std::size_t params_size, std::size_t grad_size, std::int64_t tau, std::size_t fragment) const;
  // Records the outcome of a planned step in the counters (step_schedule.hpp's commit_step).
  void commit(const Plan& plan, StepOutcome outcome);
  void advance_round() { ++counters_.round; }
  // The report of an event that ended so; `index` is the first refused element's (nonfinite, overflow).
  static StepReport report_of(const StepEvent& event, const ScheduledStep& scheduled, StepOutcome outcome,
                              std::uint64_t index);

  // What the schedule needs of the configuration; age_sigma points into this planner's table of σ(a).
  ScheduleConstants schedule_constants() const;
  const std::vector<float>& age_sigma() const { return age_sigma_; }

  const StepConfig& config() const { return config_; }
  // The q8 map of moment k (HostState's order): the built-in maps or the configuration's q8_codes (q8_maps.hpp).
  const Q8Map& q8_map(int k) const { return maps_.moment(k); }
  const core::FragmentLayout& layout() const { return layout_; }
  bool adam_family() const { return core::is_adam_family(config_.optimizer); }
  int moments() const { return adam_family() ? 2 : 1; }
  // The state buffers by name, in HostState's moment order: "m", "v" (Adam family) or "b" (Nesterov family).
  std::vector<std::string> buffer_names() const;
  // The moment index of buffer `name`, to be read into `out_size` floats; InputError for a name this optimizer
  // has not, or an output that is not one float per parameter (both backends' read_buffer).
  int buffer_to_read(std::string_view name, std::size_t out_size) const;
  std::size_t parameters() const { return empty_ ? 0 : layout_.parameters(); }
  std::size_t fragment_size(std::size_t f) const { return empty_ ? 0 : layout_.size(f); }
  const std::vector<std::size_t>& tensor_sizes() const { return tensors_; }
  // Every chunk, fragment by fragment; fragment f's are chunks()[chunk_begin(f) .. chunk_begin(f + 1)).
  const std::vector<StepChunk>& chunks() const { return chunks_; }
  std::size_t chunk_begin(std::size_t fragment) const { return chunk_begin_[fragment]; }
  std::size_t q8_blocks() const { return q8_blocks_; }          // absmax slots per q8 moment
  std::size_t fallback_size() const { return fallback_size_; }  // fp32 moments of tensors under min_q8_size
  std::int64_t age(std::size_t fragment) const;

  // The counters, as the reference names them ("t", "age" for PA-CGAD), plus the applied-step count.
  std::vector<core::StateCounter> counters() const;
  using Counters = StepCounters;  // step_counters.hpp
  const Counters& raw_counters() const { return counters_; }
  // InputError on a length mismatch, a negative count or round, one of 2^62 or more, or a synchronization after
  // the current round.
  void set_raw_counters(Counters counters);

 private:
  CounterValues values() const;

  StepConfig config_;
  core::GateParams<long double> gate_;  // built once: the step itself parses and allocates nothing
  BetaConstants betas_;                 // built once, from the decimals (derived_constants.hpp)
  Q8Maps maps_;
  core::FragmentLayout layout_;
  bool empty_ = false;  // zero parameters (the layout is then built over one)
  std::vector<std::size_t> tensors_;
  std::vector<StepChunk> chunks_;
  std::vector<std::size_t> chunk_begin_;  // P + 1 entries
  std::size_t q8_blocks_ = 0;
  std::size_t fallback_size_ = 0;
  std::vector<float> age_sigma_;  // PA-CGAD: σ(a) for every age a whose γ(a) is not 0
  Counters counters_;
};

}  // namespace cgad::fastpath
