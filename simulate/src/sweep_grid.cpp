// The sweep's grid: validation, the run numbering and shards.
#include "cgad/simulate/sweep.hpp"

#include "cgad/core/errors.hpp"
#include "cgad/reference/optimizers.hpp"
#include "cgad/simulate/objectives.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>

namespace cgad::simulate {
namespace {

using core::InputError;

template <class T>
void require_axis(const std::vector<T>& axis, const std::string& name) {
  if (axis.empty()) throw InputError("sweep: the " + name + " list is empty");
  const std::set<T> distinct(axis.begin(), axis.end());
  if (distinct.size() != axis.size()) throw InputError("sweep: the " + name + " list repeats a value");
}

// kMaxSweepRecordBytes (sweep.hpp), estimated from the grid alone.
void require_record_memory(const SweepGrid& grid) {
  const SimulationSpec& b = grid.base;
  if (b.rounds < 1 || b.log_every < 1) return;  // the engine refuses these, with its own message
  const double points = static_cast<double>(b.rounds / b.log_every) + 3.0;
  double parameters = 0;
  for (const std::size_t size : grid.sizes)
    parameters += static_cast<double>(parameter_count(b.objective, size, b.depth));
  const double runs_per_size =
      static_cast<double>(grid.methods.size() * grid.taus.size() * grid.states.size() * grid.seeds.size());
  const double bytes =
      runs_per_size * (static_cast<double>(grid.sizes.size()) * points * kBytesPerCurvePoint + 4.0 * parameters);
  if (bytes > kMaxSweepRecordBytes) {
    char text[160];
    std::snprintf(text, sizeof text,
                  "sweep: its records (loss curves of %.0f points per run, final parameters) would "
                  "take %.3g GiB, over the %.0f GiB limit: raise --log-every, or fewer runs",
                  points, bytes / (1024.0 * 1024.0 * 1024.0), kMaxSweepRecordBytes / (1024.0 * 1024.0 * 1024.0));
    throw InputError(text);
  }
}

std::size_t parse_count(std::string_view text, std::string_view whole) {
  std::size_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) {
    throw InputError("shard must be I/N with integers 0 <= I < N, got '" + std::string(whole) + "'");
  }
  return value;
}

}  // namespace

void validate(const SweepGrid& grid) {
  std::size_t runs = 1;
  for (const std::size_t length :
       {grid.methods.size(), grid.taus.size(), grid.sizes.size(), grid.states.size(), grid.seeds.size()}) {
    // Checked before each product, so that it cannot wrap around.
    if (length != 0 && runs > kMaxRuns / length) {
      throw InputError("sweep: more than " + std::to_string(kMaxRuns) + " runs (the most a sweep holds)");
    }
    runs *= length;
  }
  require_axis(grid.methods, "method");
  require_record_memory(grid);
  require_axis(grid.taus, "tau");
  require_axis(grid.sizes, "size");
  require_axis(grid.states, "state");
  require_axis(grid.seeds, "seed");
  for (const auto& method : grid.methods) core::parse_optimizer(method);
  for (const long tau : grid.taus) {
    if (tau < 0) throw InputError("sweep: tau must be >= 0, got " + std::to_string(tau));
  }
  for (const std::size_t size : grid.sizes) {
    if (size == 0) throw InputError("sweep: size must be >= 1");
  }
  // Which combinations the engine accepts (its validation does not depend on the seed, so the first seed of
  // each cell decides). A value on an axis none of whose runs can run is bad input, not a result — a τ past
  // the engine's limit, or Delayed Nesterov with bf16 parameters — and is refused with the engine's reason.
  constexpr std::array<const char*, 4> kAxes{"method", "tau", "size", "state"};
  // Per axis: value → the engine's reason while no run with that value has been accepted, nullopt after.
  std::array<std::map<std::string, std::optional<std::string>>, 4> refusals;
  std::string first_reason;
  for (std::size_t index = 0; index < run_count(grid); index += grid.seeds.size()) {
    const RunKey key = run_key(grid, index);
    std::optional<std::string> reason;
    try {
      validate(run_spec(grid, key));
    } catch (const InputError& e) {
      reason = e.what();
      if (first_reason.empty()) first_reason = e.what();
    }
    const std::array<std::string, 4> values{key.method, std::to_string(key.tau), std::to_string(key.size),
                                            std::string(fastpath::to_string(key.state))};
    for (std::size_t a = 0; a < kAxes.size(); ++a) {
      const auto [at, inserted] = refusals[a].emplace(values[a], reason);
      if (!inserted && !reason) at->second.reset();
    }
  }
  const auto refused = [](const auto& entry) { return entry.second.has_value(); };
  if (std::all_of(refusals[0].begin(), refusals[0].end(), refused)) {
    throw InputError("sweep: no run of this sweep can run: " + first_reason);
  }
  for (std::size_t a = 0; a < kAxes.size(); ++a) {
    const auto bad = std::find_if(refusals[a].begin(), refusals[a].end(), refused);
    if (bad != refusals[a].end()) {
      throw InputError(std::string("sweep: no run with ") + kAxes[a] + " " + bad->first + " can run: " + *bad->second);
    }
  }
}

std::size_t run_count(const SweepGrid& grid) {
  return grid.methods.size() * grid.taus.size() * grid.sizes.size() * grid.states.size() * grid.seeds.size();
}

RunKey run_key(const SweepGrid& grid, std::size_t index) {
  if (index >= run_count(grid)) throw std::out_of_range("run index " + std::to_string(index) + " is past the sweep");
  RunKey key;
  key.seed = grid.seeds[index % grid.seeds.size()];
  index /= grid.seeds.size();
  key.state = grid.states[index % grid.states.size()];
  index /= grid.states.size();
  key.size = grid.sizes[index % grid.sizes.size()];
  index /= grid.sizes.size();
  key.tau = grid.taus[index % grid.taus.size()];
  index /= grid.taus.size();
  key.method = grid.methods[index];
  return key;
}

SimulationSpec run_spec(const SweepGrid& grid, const RunKey& key) {
  SimulationSpec spec = grid.base;
  spec.size = key.size;
  spec.tau = key.tau;
  spec.seed = key.seed;
  spec.outer.seed = key.seed;
  spec.outer.state = key.state;
  const core::OptimizerKind kind = core::parse_optimizer(key.method);
  spec.delayed_nesterov = kind == core::OptimizerKind::delayed_nesterov;
  // Delayed Nesterov takes its η and μ from the Nesterov hyperparameters; outer.optimizer names the fast-path
  // optimizer, which it has none of, so the closest one stands there.
  spec.outer.optimizer = spec.delayed_nesterov ? core::OptimizerKind::nesterov : kind;
  spec.outer.fragments = kind == core::OptimizerKind::pa_cgad ? grid.base.outer.fragments : 1;
  // The grid's v map is that of the second moment of q8 state; every other run has no such map (fp32 or bf16
  // state, or the Nesterov family's one moment) and runs as it would without it.
  if (spec.outer.state != fastpath::StateFormat::q8 || !core::is_adam_family(spec.outer.optimizer)) {
    spec.outer.v_map = fastpath::VMap::dynamic;
  }
  return spec;
}

Shard parse_shard(std::string_view text) {
  const auto slash = text.find('/');
  if (slash == std::string_view::npos) {
    throw InputError("shard must be I/N with integers 0 <= I < N, got '" + std::string(text) + "'");
  }
  const Shard shard{parse_count(text.substr(0, slash), text), parse_count(text.substr(slash + 1), text)};
  if (shard.count == 0 || shard.index >= shard.count) {
    throw InputError("shard must be I/N with integers 0 <= I < N, got '" + std::string(text) + "'");
  }
  return shard;
}

std::vector<std::size_t> shard_runs(const SweepGrid& grid, Shard shard) {
  std::vector<std::size_t> indices;
  for (std::size_t index = shard.index; index < run_count(grid); index += shard.count) indices.push_back(index);
  return indices;
}

std::string_view to_string(RunStatus status) {
  switch (status) {
    case RunStatus::finished:
      return "finished";
    case RunStatus::diverged:
      return "diverged";
    case RunStatus::stalled:
      return "stalled";
    case RunStatus::unsupported:
      return "unsupported";
  }
  return "unknown";
}

}  // namespace cgad::simulate
