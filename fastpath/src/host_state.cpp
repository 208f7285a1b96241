#include "cgad/fastpath/detail/host_state.hpp"

#include "cgad/fastpath/detail/q8_maps.hpp"

namespace cgad::fastpath {

namespace {

std::uint8_t zero_code(const Q8Map& map) {
  for (int k = 0; k < kQ8Codes; ++k) {
    if (map.code[k] == 0.0f) return static_cast<std::uint8_t>(k);
  }
  return q8_nearest(0.0f, map);  // the zero-free map: index 0, its smallest code
}

}  // namespace

std::uint8_t initial_code(int moment, const StepPlanner& planner) {
  return planner.config().q8_semantics == Q8Semantics::bnb ? std::uint8_t{0} : zero_code(planner.q8_map(moment));
}

HostState HostState::zeros(const StepPlanner& planner) {
  HostState s;
  const StepConfig& config = planner.config();
  s.format = config.state;
  s.moments = planner.moments();
  const std::size_t n = planner.parameters();
  for (int k = 0; k < s.moments; ++k) {
    switch (s.format) {
      case StateFormat::fp32:
        s.fp32[k].assign(n, 0.0f);
        break;
      case StateFormat::bf16:
        s.bf16_values[k].assign(n, bf16{});
        break;
      case StateFormat::q8:
        s.codes[k].assign(n, initial_code(k, planner));
        s.absmax[k].assign(planner.q8_blocks(), 0.0f);
        s.fp32[k].assign(planner.fallback_size(), 0.0f);
        break;
    }
  }
  return s;
}

void HostState::bind(StepPlanner::Plan& plan) {
  bind_moments(*this, plan.args);
}

void HostState::read(const StepPlanner& planner, int k, std::span<float> out) const {
  const Q8Map& map = planner.q8_map(k);
  for (const StepChunk& c : planner.chunks()) {
    for (std::size_t i = 0; i < c.count; ++i) {
      const std::size_t j = c.begin + i;
      if (c.fp32_state != 0) {
        out[j] = fp32[k][c.slot + i];
        continue;
      }
      switch (format) {
        case StateFormat::fp32:
          out[j] = fp32[k][j];
          break;
        case StateFormat::bf16:
          out[j] = to_float(bf16_values[k][j]);
          break;
        case StateFormat::q8:
          out[j] = q8_dequantize(codes[k][j], absmax[k][c.slot], map);
          break;
      }
    }
  }
}

bool HostState::same_shape(const HostState& other) const {
  if (format != other.format || moments != other.moments) return false;
  for (int k = 0; k < 2; ++k) {
    if (fp32[k].size() != other.fp32[k].size() || bf16_values[k].size() != other.bf16_values[k].size() ||
        codes[k].size() != other.codes[k].size() || absmax[k].size() != other.absmax[k].size()) {
      return false;
    }
  }
  return true;
}

}  // namespace cgad::fastpath
