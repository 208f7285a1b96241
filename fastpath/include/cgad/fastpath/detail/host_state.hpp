#pragma once
// The optimizer state as it lives in host memory: one or two moment buffers (m, v for the Adam family; b for
// Nesterov) in fp32, bf16 or q8 (codes + one fp32 absmax per q8 chunk, and fp32 moments for the tensors under
// min_q8_size in `fp32`). The CPU backend steps it in place; save/load serialize it in the state file's format
// (state_file.hpp; the functions at the end, fastpath/src/state_file.cpp); the CUDA backend mirrors it on the device.
#include "cgad/fastpath/detail/block_step.hpp"
#include "cgad/fastpath/config.hpp"
#include "cgad/fastpath/detail/q8_maps.hpp"
#include "cgad/fastpath/detail/step_planner.hpp"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace cgad::fastpath {

struct HostState {
  StateFormat format = StateFormat::fp32;
  int moments = 2;
  std::vector<float> fp32[2];  // fp32 state; in a q8 configuration the fallback moments (StepPlanner)
  std::vector<bf16> bf16_values[2];
  std::vector<std::uint8_t> codes[2];
  std::vector<float> absmax[2];

  // The initial state for `planner`'s optimizer: all zero. q8 codes point at the map's exact zero with cgad
  // semantics (the zero-free v map's smallest code: absmax 0 decodes it to 0); with bnb semantics they are 0, as
  // bitsandbytes' init_state makes them (torch.zeros_like uint8: code 0 is −0.99… in the signed map, harmless under
  // absmax 0).
  static HostState zeros(const StepPlanner& planner);

  // Fills plan.args' moment pointers (the buffers' starts; chunk_args() moves them to a chunk).
  void bind(StepPlanner::Plan& plan);
  // Dequantized moment `k` as float, for every parameter.
  void read(const StepPlanner& planner, int k, std::span<float> out) const;
  // Same shape (format, moment count, lengths) as `other`.
  bool same_shape(const HostState& other) const;
};

// Points a step's moment views at a state's buffers, wherever they live: HostState's vectors, or the CUDA backend's
// device buffers, which have the same members (format, moments, fp32, bf16_values, codes, absmax). The one place that
// says which buffers each state format steps.
template <class State>
void bind_moments(State& state, StepArgs& args) {
  for (int k = 0; k < state.moments; ++k) {
    MomentView& view = args.moment[k];
    switch (state.format) {
      case StateFormat::fp32:
        view.fp32 = state.fp32[k].data();
        break;
      case StateFormat::bf16:
        view.bf16_values = state.bf16_values[k].data();
        break;
      case StateFormat::q8:
        view.codes = state.codes[k].data();
        view.absmax = state.absmax[k].data();
        view.fallback = state.fp32[k].data();
        break;
    }
  }
}

// The code moment `moment` of `planner`'s optimizer starts from in its all-zero state (HostState::zeros; a
// caller-owned state starts from the same: table_stepper.hpp): with cgad semantics the index of 0 in the moment's
// q8 map (StepPlanner::q8_map) or, in the zero-free map, which has none, of its smallest code (an all-zero state
// has absmax 0, so every code decodes to 0 there); with bnb's, 0.
std::uint8_t initial_code(int moment, const StepPlanner& planner);

// The state's bytes in the state file's format (state_file.hpp), and the file (written atomically).
std::vector<unsigned char> state_bytes(const StepPlanner& planner, const HostState& state);
void write_state_file(const std::filesystem::path& path, const StepPlanner& planner, const HostState& state);

struct LoadedState {
  StepCounters counters;
  HostState state;
};
// `planner` and `current` give the configuration and the shape the bytes must have; `what` names them in errors
// ("state file /tmp/x", "the fast-path state").
LoadedState parse_state_bytes(std::span<const unsigned char> bytes, const std::string& what, const StepPlanner& planner,
                              const HostState& current);
LoadedState read_state_file(const std::filesystem::path& path, const StepPlanner& planner, const HostState& current);

}  // namespace cgad::fastpath
