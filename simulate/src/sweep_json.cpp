// A sweep as JSON: grid, fingerprint, part files and their merge.
#include "cgad/simulate/sweep_json.hpp"

#include "record_check.hpp"

#include "cgad/core/errors.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <limits>
#include <map>
#include <regex>
#include <type_traits>

namespace cgad::simulate {
namespace {

using core::InputError;
using ordered = nlohmann::ordered_json;

constexpr const char* kPartFormat = "cgad-simulate-part";
// 2: inner_steps_skipped and mean_tau_effective in each run; 3: the grid's outer q8_semantics and min_q8_size
// (the teacher-student's outer state is also per tensor from 3 on), and skipped_overflowing in each run; 4: the
// grid's worker_params, lr_scale and fragment_progress, "constant" delays from the start (the old schedule is
// "constant-clamped"), the status "stalled" with its reason, and each run's trap metrics (v_zero_fraction,
// step_over_5lr_fraction, max_step_over_lr; null outside the Adam family); 5: the grid's depth, outlier_features
// and outlier_scale, the outer v_map, and each run's m_zero_fraction and per-tensor trap metrics (tensor_traps).
constexpr int kPartVersion = 5;

std::string_view policy_name(core::ZeroGatePolicy policy) {
  return policy == core::ZeroGatePolicy::skip ? "skip" : "apply";
}
core::ZeroGatePolicy parse_policy(const std::string& text) {
  if (text == "apply") return core::ZeroGatePolicy::apply;
  if (text == "skip") return core::ZeroGatePolicy::skip;
  throw InputError("on_zero_gate must be apply or skip, got '" + text + "'");
}

// The first field (a JSON path such as "outer.q8_semantics") in which two grids differ, with both values, for
// merge's refusal: "different sweep" alone leaves the user to diff the parts by hand.
std::string first_difference(const ordered& a, const ordered& b, const std::string& path) {
  if (a.is_object() && b.is_object()) {
    for (const auto& [key, value] : a.items()) {
      const std::string at = path.empty() ? key : path + "." + key;
      if (!b.contains(key)) return at + " (absent from one)";
      const std::string inner = first_difference(value, b.at(key), at);
      if (!inner.empty()) return inner;
    }
    for (const auto& [key, value] : b.items()) {
      if (!a.contains(key)) return (path.empty() ? key : path + "." + key) + " (absent from one)";
    }
    return "";
  }
  if (a == b) return "";
  const auto shown = [](const ordered& x) {
    const std::string text = x.is_string() ? x.get<std::string>() : x.dump();
    return text.size() <= 40 ? text : text.substr(0, 37) + "...";
  };
  return path + " (" + shown(a) + " vs " + shown(b) + ")";
}

// An integer as cgad writes one: a JSON integer (not 1e30, not 2.0) in T's range. nlohmann's get<T>() would
// convert a float or wrap a negative number without a word (undefined behaviour for 1e30 into size_t).
template <class T>
T integer(const nlohmann::json& j, const std::string& what) {
  static_assert(std::is_integral_v<T>);
  const auto refuse = [&](const char* expected) {
    return InputError(what + ": expected " + expected + ", got " + j.dump());
  };
  if (j.is_number_unsigned()) {
    const std::uint64_t v = j.get<std::uint64_t>();
    if (v > static_cast<std::uint64_t>(std::numeric_limits<T>::max())) throw refuse("an integer in range");
    return static_cast<T>(v);
  }
  if constexpr (std::is_unsigned_v<T>) {
    throw refuse("a non-negative integer");
  } else {
    if (!j.is_number_integer()) throw refuse("an integer");
    const std::int64_t v = j.get<std::int64_t>();
    if (v < static_cast<std::int64_t>(std::numeric_limits<T>::min())) throw refuse("an integer in range");
    return static_cast<T>(v);
  }
}

template <class T>
std::vector<T> integers(const nlohmann::json& j, const std::string& what) {
  if (!j.is_array()) throw InputError(what + ": expected a list of integers");
  std::vector<T> out;
  for (const auto& x : j) out.push_back(integer<T>(x, what));
  return out;
}

nlohmann::ordered_json optional_hexfloat(const std::optional<double>& x) {
  return x ? nlohmann::ordered_json(hexfloat(*x)) : nlohmann::ordered_json(nullptr);
}

std::optional<double> parse_optional_hexfloat(const nlohmann::json& j, const std::string& what) {
  if (j.is_null()) return std::nullopt;
  return parse_hexfloat(j, what);
}

float parse_float(const nlohmann::json& text, const std::string& what) {
  // Every float was written as the hexfloat of its exact double, so this conversion is exact.
  return static_cast<float>(parse_hexfloat(text, what));
}

}  // namespace

std::string hexfloat(double x) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%a", x);
  return buffer;
}

double parse_hexfloat(const nlohmann::json& text, const std::string& what) {
  if (!text.is_string()) throw InputError(what + ": expected hexfloat text such as \"0x1.8p+1\"");
  const std::string s = text.get<std::string>();
  // Only what hexfloat() writes ("%a": a sign, 0x, hex digits, a binary exponent; inf and nan either sign):
  // strtod alone would also take decimals, leading blanks and "infinity", which no cgad wrote.
  static const std::regex written("-?(0x[0-9a-f]+(\\.[0-9a-f]*)?p[+-][0-9]+|inf|nan)");
  if (!std::regex_match(s, written)) throw InputError(what + ": not hexfloat text as cgad writes it: '" + s + "'");
  char* end = nullptr;
  const double value = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) throw InputError(what + ": not a number: '" + s + "'");
  return value;
}

ordered grid_to_json(const SweepGrid& grid) {
  const SimulationSpec& b = grid.base;
  const fastpath::StepConfig& o = b.outer;
  ordered j;
  j["objective"] = to_string(b.objective);
  j["problem_seed"] = b.problem_seed;
  j["nqm_noise"] = hexfloat(b.nqm_noise);
  j["label_noise"] = hexfloat(b.label_noise);
  j["depth"] = b.depth;
  j["outlier_features"] = b.outlier_features;
  j["outlier_scale"] = hexfloat(b.outlier_scale);
  j["workers"] = b.workers;
  j["rounds"] = b.rounds;
  j["inner"] = {{"kind", to_string(b.inner.kind)},
                {"steps", b.inner.steps},
                {"lr", hexfloat(b.inner.lr)},
                {"beta1", hexfloat(b.inner.beta1)},
                {"beta2", hexfloat(b.inner.beta2)},
                {"eps", hexfloat(b.inner.eps)},
                {"weight_decay", hexfloat(b.inner.weight_decay)}};
  j["delays"] = delays_name(b.delays);
  j["worker_params"] = to_string(b.worker_params);
  j["lr_scale"] = to_string(b.lr_scale);
  j["fragment_progress"] = to_string(b.fragment_progress);
  j["outer"] = {{"params", fastpath::to_string(o.params)},
                {"rounding", fastpath::to_string(o.rounding)},
                {"adam",
                 {{"lr", hexfloat(o.adam.lr)},
                  {"beta1", hexfloat(o.adam.beta1)},
                  {"beta2", hexfloat(o.adam.beta2)},
                  {"eps", hexfloat(o.adam.eps)},
                  {"weight_decay", hexfloat(o.adam.weight_decay)}}},
                {"nesterov", {{"lr", hexfloat(o.nesterov.lr)}, {"momentum", hexfloat(o.nesterov.momentum)}}},
                {"alpha", hexfloat(o.alpha)},
                {"tau_cut", hexfloat(o.tau_cut)},
                {"on_zero_gate", policy_name(o.on_zero_gate)},
                {"fragments", o.fragments},
                {"q8_semantics", fastpath::to_string(o.q8_semantics)},
                {"v_map", fastpath::to_string(o.v_map)},
                // The size in force, default or not: two grids that run the same are the same sweep.
                {"min_q8_size", fastpath::effective_min_q8_size(o)}};
  j["delayed_nesterov_buffer"] = b.delayed_nesterov_buffer;
  j["divergence_factor"] = hexfloat(b.divergence_factor);
  j["log_every"] = b.log_every;
  j["methods"] = grid.methods;
  j["taus"] = grid.taus;
  j["sizes"] = grid.sizes;
  ordered states = ordered::array();
  for (const auto state : grid.states) states.push_back(fastpath::to_string(state));
  j["states"] = states;
  j["seeds"] = grid.seeds;
  return j;
}

SweepGrid grid_from_json(const nlohmann::json& j) {
  SweepGrid grid;
  SimulationSpec& b = grid.base;
  fastpath::StepConfig& o = b.outer;
  b.objective = parse_objective_kind(j.at("objective").get<std::string>());
  b.problem_seed = integer<std::uint64_t>(j.at("problem_seed"), "problem_seed");
  b.nqm_noise = parse_hexfloat(j.at("nqm_noise"), "nqm_noise");
  b.label_noise = parse_hexfloat(j.at("label_noise"), "label_noise");
  b.depth = integer<std::size_t>(j.at("depth"), "depth");
  b.outlier_features = integer<std::size_t>(j.at("outlier_features"), "outlier_features");
  b.outlier_scale = parse_hexfloat(j.at("outlier_scale"), "outlier_scale");
  b.workers = integer<std::size_t>(j.at("workers"), "workers");
  b.rounds = integer<std::int64_t>(j.at("rounds"), "rounds");
  const auto& inner = j.at("inner");
  b.inner.kind = parse_inner_optimizer(inner.at("kind").get<std::string>());
  b.inner.steps = integer<std::int64_t>(inner.at("steps"), "inner.steps");
  b.inner.lr = parse_float(inner.at("lr"), "inner.lr");
  b.inner.beta1 = parse_float(inner.at("beta1"), "inner.beta1");
  b.inner.beta2 = parse_float(inner.at("beta2"), "inner.beta2");
  b.inner.eps = parse_float(inner.at("eps"), "inner.eps");
  b.inner.weight_decay = parse_float(inner.at("weight_decay"), "inner.weight_decay");
  b.delays = parse_delays(j.at("delays").get<std::string>());
  b.worker_params = parse_worker_params(j.at("worker_params").get<std::string>());
  b.lr_scale = parse_lr_scale(j.at("lr_scale").get<std::string>());
  b.fragment_progress = parse_fragment_progress(j.at("fragment_progress").get<std::string>());
  const auto& outer = j.at("outer");
  o.params = fastpath::parse_param_format(outer.at("params").get<std::string>());
  o.rounding = fastpath::parse_rounding(outer.at("rounding").get<std::string>());
  const auto& adam = outer.at("adam");
  o.adam.lr = parse_float(adam.at("lr"), "adam.lr");
  o.adam.beta1 = parse_float(adam.at("beta1"), "adam.beta1");
  o.adam.beta2 = parse_float(adam.at("beta2"), "adam.beta2");
  o.adam.eps = parse_float(adam.at("eps"), "adam.eps");
  o.adam.weight_decay = parse_float(adam.at("weight_decay"), "adam.weight_decay");
  const auto& nesterov = outer.at("nesterov");
  o.nesterov.lr = parse_float(nesterov.at("lr"), "nesterov.lr");
  o.nesterov.momentum = parse_float(nesterov.at("momentum"), "nesterov.momentum");
  o.alpha = parse_hexfloat(outer.at("alpha"), "alpha");  // doubles in StepConfig (fastpath/config.hpp)
  o.tau_cut = parse_hexfloat(outer.at("tau_cut"), "tau_cut");
  o.on_zero_gate = parse_policy(outer.at("on_zero_gate").get<std::string>());
  o.fragments = integer<std::size_t>(outer.at("fragments"), "outer.fragments");
  o.q8_semantics = fastpath::parse_q8_semantics(outer.at("q8_semantics").get<std::string>());
  o.v_map = fastpath::parse_v_map(outer.at("v_map").get<std::string>());
  o.min_q8_size = integer<std::size_t>(outer.at("min_q8_size"), "outer.min_q8_size");
  b.delayed_nesterov_buffer = integer<std::int64_t>(j.at("delayed_nesterov_buffer"), "delayed_nesterov_buffer");
  b.divergence_factor = parse_hexfloat(j.at("divergence_factor"), "divergence_factor");
  b.log_every = integer<std::int64_t>(j.at("log_every"), "log_every");
  grid.methods = j.at("methods").get<std::vector<std::string>>();
  grid.taus = integers<long>(j.at("taus"), "taus");
  grid.sizes = integers<std::size_t>(j.at("sizes"), "sizes");
  for (const auto& state : j.at("states"))
    grid.states.push_back(fastpath::parse_state_format(state.get<std::string>()));
  grid.seeds = integers<std::uint64_t>(j.at("seeds"), "seeds");
  return grid;
}

std::string grid_fingerprint(const SweepGrid& grid) {
  std::uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a offset basis and prime (64-bit)
  for (const unsigned char c : grid_to_json(grid).dump()) {
    hash ^= c;
    hash *= 0x100000001b3ull;
  }
  char buffer[17];
  std::snprintf(buffer, sizeof buffer, "%016llx", static_cast<unsigned long long>(hash));
  return buffer;
}

ordered record_to_json(const RunRecord& r) {
  ordered j{{"index", r.index},
            {"method", r.key.method},
            {"tau", r.key.tau},
            {"size", r.key.size},
            {"state", fastpath::to_string(r.key.state)},
            {"seed", r.key.seed},
            {"status", to_string(r.status)}};
  if (r.status == RunStatus::unsupported) {
    j["reason"] = r.unsupported_reason;
    return j;
  }
  const SimulationResult& s = r.result;
  if (r.status == RunStatus::stalled) j["stalled"] = s.stalled;
  j["initial_loss"] = hexfloat(s.initial_loss);
  j["final_loss"] = hexfloat(s.final_loss);
  j["diverged_at"] = s.diverged_at;
  j["divergence"] = s.divergence;
  j["applied"] = s.applied;
  j["skipped_nonfinite"] = s.skipped_nonfinite;
  j["skipped_zero_gate"] = s.skipped_zero_gate;
  j["skipped_overflowing"] = s.skipped_overflowing;
  j["inner_steps_skipped"] = s.inner_steps_skipped;
  j["mean_tau"] = hexfloat(s.mean_tau);
  j["mean_tau_effective"] = hexfloat(s.mean_tau_effective);
  j["v_zero_fraction"] = optional_hexfloat(s.v_zero_fraction);
  j["step_over_5lr_fraction"] = optional_hexfloat(s.step_over_5lr_fraction);
  j["max_step_over_lr"] = optional_hexfloat(s.max_step_over_lr);
  j["m_zero_fraction"] = optional_hexfloat(s.m_zero_fraction);
  ordered tensors = ordered::array();
  for (const TensorTrap& t : s.tensor_traps) {
    tensors.push_back({{"name", t.name},
                       {"size", t.size},
                       {"v_zero_fraction", hexfloat(t.counts.v_zero_fraction)},
                       {"m_zero_fraction", hexfloat(t.counts.m_zero_fraction)},
                       {"step_over_5lr_fraction", hexfloat(t.counts.step_over_5lr_fraction)},
                       {"max_step_over_lr", hexfloat(t.counts.max_step_over_lr)}});
  }
  j["tensor_traps"] = tensors;
  ordered curve = ordered::array();
  for (const LossPoint& p : s.curve) curve.push_back(ordered::array({p.round, hexfloat(p.loss)}));
  j["curve"] = curve;
  return j;
}

RunRecord record_from_json(const nlohmann::json& j) {
  RunRecord r;
  r.index = integer<std::size_t>(j.at("index"), "index");
  r.key.method = j.at("method").get<std::string>();
  r.key.tau = integer<long>(j.at("tau"), "tau");
  r.key.size = integer<std::size_t>(j.at("size"), "size");
  r.key.state = fastpath::parse_state_format(j.at("state").get<std::string>());
  r.key.seed = integer<std::uint64_t>(j.at("seed"), "seed");
  const std::string status = j.at("status").get<std::string>();
  if (status == "unsupported") {
    r.status = RunStatus::unsupported;
    r.unsupported_reason = j.at("reason").get<std::string>();
    return r;
  }
  if (status != "finished" && status != "diverged" && status != "stalled") {
    throw InputError("unknown run status '" + status + "'");
  }
  r.status = status == "diverged"  ? RunStatus::diverged
             : status == "stalled" ? RunStatus::stalled
                                   : RunStatus::finished;
  SimulationResult& s = r.result;
  if (r.status == RunStatus::stalled) s.stalled = j.at("stalled").get<std::string>();
  s.initial_loss = parse_hexfloat(j.at("initial_loss"), "initial_loss");
  s.final_loss = parse_hexfloat(j.at("final_loss"), "final_loss");
  s.diverged = r.status == RunStatus::diverged;
  s.diverged_at = integer<std::int64_t>(j.at("diverged_at"), "diverged_at");
  s.divergence = j.at("divergence").get<std::string>();
  s.applied = integer<std::int64_t>(j.at("applied"), "applied");
  s.skipped_nonfinite = integer<std::int64_t>(j.at("skipped_nonfinite"), "skipped_nonfinite");
  s.skipped_zero_gate = integer<std::int64_t>(j.at("skipped_zero_gate"), "skipped_zero_gate");
  s.skipped_overflowing = integer<std::int64_t>(j.at("skipped_overflowing"), "skipped_overflowing");
  s.inner_steps_skipped = integer<std::int64_t>(j.at("inner_steps_skipped"), "inner_steps_skipped");
  s.mean_tau = parse_hexfloat(j.at("mean_tau"), "mean_tau");
  s.mean_tau_effective = parse_hexfloat(j.at("mean_tau_effective"), "mean_tau_effective");
  s.v_zero_fraction = parse_optional_hexfloat(j.at("v_zero_fraction"), "v_zero_fraction");
  s.step_over_5lr_fraction = parse_optional_hexfloat(j.at("step_over_5lr_fraction"), "step_over_5lr_fraction");
  s.max_step_over_lr = parse_optional_hexfloat(j.at("max_step_over_lr"), "max_step_over_lr");
  s.m_zero_fraction = parse_optional_hexfloat(j.at("m_zero_fraction"), "m_zero_fraction");
  const auto& tensors = j.at("tensor_traps");
  if (!tensors.is_array()) throw InputError("tensor_traps: expected an array");
  for (const auto& t : tensors) {
    TensorTrap trap;
    trap.name = t.at("name").get<std::string>();
    trap.size = integer<std::size_t>(t.at("size"), "tensor_traps size");
    trap.counts.v_zero_fraction = parse_hexfloat(t.at("v_zero_fraction"), "tensor_traps v_zero_fraction");
    trap.counts.m_zero_fraction = parse_hexfloat(t.at("m_zero_fraction"), "tensor_traps m_zero_fraction");
    trap.counts.step_over_5lr_fraction =
        parse_hexfloat(t.at("step_over_5lr_fraction"), "tensor_traps step_over_5lr_fraction");
    trap.counts.max_step_over_lr = parse_hexfloat(t.at("max_step_over_lr"), "tensor_traps max_step_over_lr");
    s.tensor_traps.push_back(std::move(trap));
  }
  for (const auto& point : j.at("curve")) {
    if (!point.is_array() || point.size() != 2) throw InputError("curve point: expected [round, loss]");
    s.curve.push_back({integer<std::int64_t>(point.at(0), "curve round"), parse_hexfloat(point.at(1), "curve loss")});
  }
  return r;
}

ordered part_to_json(const SweepPart& part) {
  ordered runs = ordered::array();
  for (const RunRecord& r : part.records) runs.push_back(record_to_json(r));
  return {{"format", kPartFormat},
          {"version", kPartVersion},
          {"cgad_version", part.cgad_version},
          {"fingerprint", grid_fingerprint(part.grid)},
          {"grid", grid_to_json(part.grid)},
          {"shard", {{"index", part.shard.index}, {"count", part.shard.count}}},
          {"runs", runs}};
}

SweepPart part_from_json(const nlohmann::json& j, const std::string& source) {
  try {
    if (!j.is_object() || j.value("format", "") != kPartFormat) {
      throw InputError("not a cgad simulate part (no \"format\": \"" + std::string(kPartFormat) + "\")");
    }
    if (integer<int>(j.at("version"), "version") != kPartVersion) {
      throw InputError("part format version " + j.at("version").dump() + ", this cgad reads " +
                       std::to_string(kPartVersion));
    }
    SweepPart part;
    part.cgad_version = j.at("cgad_version").get<std::string>();
    part.grid = grid_from_json(j.at("grid"));
    if (grid_fingerprint(part.grid) != j.at("fingerprint").get<std::string>()) {
      throw InputError("its fingerprint does not match its grid (edited or corrupt)");
    }
    validate(part.grid);  // a fingerprint is no proof: anyone can compute one for a grid no cgad would write
    part.shard = {integer<std::size_t>(j.at("shard").at("index"), "shard.index"),
                  integer<std::size_t>(j.at("shard").at("count"), "shard.count")};
    if (part.shard.count == 0 || part.shard.index >= part.shard.count) throw InputError("bad shard");
    for (const auto& run : j.at("runs")) {
      RunRecord r = record_from_json(run);
      const std::string where = "run " + std::to_string(r.index);
      if (r.index >= run_count(part.grid) || r.index % part.shard.count != part.shard.index) {
        throw InputError(where + " is not in shard " + std::to_string(part.shard.index) + "/" +
                         std::to_string(part.shard.count) + " of this sweep");
      }
      const RunKey expected = run_key(part.grid, r.index);
      if (r.key.method != expected.method || r.key.tau != expected.tau || r.key.size != expected.size ||
          r.key.state != expected.state || r.key.seed != expected.seed) {
        throw InputError(where + ": its coordinates differ from the grid's run of that index");
      }
      try {
        check_record(r, part.grid);
      } catch (const InputError& e) {
        throw InputError(where + ": " + e.what() + ": no cgad writes that");
      }
      if (!part.records.empty() && r.index <= part.records.back().index) {
        throw InputError(where + ": runs out of order or repeated");
      }
      part.records.push_back(std::move(r));
    }
    return part;
  } catch (const nlohmann::json::exception& e) {
    throw InputError(source + ": malformed part: " + e.what());
  } catch (const InputError& e) {
    throw InputError(source + ": " + e.what());
  }
}

MergedSweep merge_parts(const std::vector<SweepPart>& parts, const std::vector<std::string>& sources,
                        bool allow_other_versions) {
  if (parts.empty()) throw InputError("merge: no parts given");
  MergedSweep merged;
  merged.grid = parts.front().grid;
  const std::string fingerprint = grid_fingerprint(merged.grid);
  std::map<std::size_t, std::size_t> holder;  // run index → the part holding it
  for (std::size_t p = 0; p < parts.size(); ++p) {
    const std::string source = p < sources.size() ? sources[p] : "part " + std::to_string(p + 1);
    if (!allow_other_versions && parts[p].cgad_version != kCgadVersion) {
      throw InputError("merge: " + source + " was written by cgad " + parts[p].cgad_version + ", this is cgad " +
                       kCgadVersion +
                       " (outcomes may differ between versions); pass --allow-other-versions to merge "
                       "it anyway");
    }
    if (grid_fingerprint(parts[p].grid) != fingerprint) {
      const std::string differs = first_difference(grid_to_json(parts[p].grid), grid_to_json(merged.grid), "");
      throw InputError("merge: " + source + " is from a different sweep than the first part (grid fingerprint " +
                       grid_fingerprint(parts[p].grid) + " vs " + fingerprint +
                       (differs.empty() ? "" : "; first difference: " + differs) + ")");
    }
    for (const RunRecord& r : parts[p].records) {
      const auto [at, inserted] = holder.emplace(r.index, p);
      if (!inserted) {
        const std::string other = at->second < sources.size() ? sources[at->second] : "an earlier part";
        throw InputError("merge: run " + std::to_string(r.index) + " is in both " + other + " and " + source);
      }
      merged.records.push_back(r);
    }
  }
  std::sort(merged.records.begin(), merged.records.end(),
            [](const RunRecord& a, const RunRecord& b) { return a.index < b.index; });
  for (std::size_t index = 0; index < run_count(merged.grid); ++index) {
    if (!holder.contains(index)) merged.missing.push_back(index);
  }
  return merged;
}

ordered sweep_to_json(const MergedSweep& sweep) {
  ordered runs = ordered::array();
  for (const RunRecord& r : sweep.records) runs.push_back(record_to_json(r));
  ordered cells = ordered::array();
  const auto optional_number = [](const std::optional<double>& x) { return x ? ordered(*x) : ordered(nullptr); };
  const auto optional_interval = [](const std::optional<Interval>& x) {
    return x ? ordered::array({x->low, x->high}) : ordered(nullptr);
  };
  for (const CellSummary& c : summarize(sweep.grid, sweep.records)) {
    cells.push_back({{"method", c.key.method},
                     {"tau", c.key.tau},
                     {"size", c.key.size},
                     {"state", fastpath::to_string(c.key.state)},
                     {"runs", c.runs},
                     {"present", c.present},
                     {"unsupported", c.unsupported},
                     {"diverged", c.diverged},
                     {"stalled", c.stalled},
                     {"finished", c.finished},
                     {"final_loss_mean", optional_number(c.mean)},
                     {"final_loss_mean_ci95", optional_interval(c.mean_ci)},
                     {"final_loss_stddev", optional_number(c.stddev)},
                     {"final_loss_stddev_ci95", optional_interval(c.stddev_ci)},
                     {"single_shot_risk", optional_number(c.risk)},
                     {"single_shot_risk_ci95", optional_interval(c.risk_ci)},
                     {"v_zero_fraction", optional_number(c.v_zero_fraction)},
                     {"step_over_5lr_fraction", optional_number(c.step_over_5lr_fraction)},
                     {"max_step_over_lr", optional_number(c.max_step_over_lr)},
                     {"note", cell_note(c)}});
  }
  ordered comparisons = ordered::array();
  for (const SigmaComparisonRow& row : compare_cells(sweep.grid, sweep.records)) {
    comparisons.push_back({{"cell", row.cell},
                           {"against", row.against},
                           {"axis", row.axis},
                           {"sigma_ratio", row.test.ratio},
                           {"sigma_ratio_ci95", {row.test.ratio_ci.low, row.test.ratio_ci.high}},
                           {"p_value", row.test.p_value},
                           {"exact", row.test.exact},
                           {"splits", row.test.splits}});
  }
  return {{"fingerprint", grid_fingerprint(sweep.grid)},
          {"grid", grid_to_json(sweep.grid)},
          {"runs", runs},
          {"cells", cells},
          {"sigma_comparisons", comparisons},
          {"missing", sweep.missing}};
}

}  // namespace cgad::simulate
