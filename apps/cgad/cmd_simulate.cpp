// `cgad simulate`: a sweep of asynchronous DiLoCo runs — outer optimizers × τ × sizes × state formats × seeds
// (simulate/sweep.hpp) — as a table of final loss mean ± σ, single-shot risk and diverged runs, or as JSON/CSV
// and figures. `--shard I/N --out FILE` runs one slice of the sweep and writes its records for `cgad merge`.
// `--record-deltas FILE` writes the pseudo-gradients the server received in a one-run sweep as a `cgad replay`
// stream, and says on stderr which replay reproduces the run.
#include "cli_support.hpp"
#include "commands.hpp"
#include "optimizer_flags.hpp"
#include "progress.hpp"
#include "simulate_output.hpp"

#include "cgad/core/errors.hpp"
#include "cgad/differential/strict_json.hpp"
#include "cgad/reference/real.hpp"
#include "cgad/simulate/part_lock.hpp"
#include "cgad/simulate/sweep_json.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <span>
#include <sstream>

namespace cgad::cli {
namespace {

using core::InputError;

struct SimulateOptions {
  // The default sweep: the paper's three contenders over small to large staleness, with fp32 and 8-bit outer
  // state, 5 seeds, on a 256-dimensional NQM (one q8 block): 90 runs, well under a second on 2 cores.
  std::string objective = "nqm";
  std::vector<std::string> methods{"cgad", "adam-decay", "nesterov"};
  std::vector<long> taus{0, 4, 16};
  std::vector<std::size_t> sizes{256};
  std::vector<std::string> states{"fp32", "q8"};
  std::size_t seed_count = 5;
  std::vector<std::uint64_t> seeds;
  std::uint64_t problem_seed = simulate::SimulationSpec{}.problem_seed;
  // Reals stay text until parsed exactly; absent, the SimulationSpec defaults hold.
  std::optional<std::string> nqm_noise, label_noise, inner_lr, inner_eps, diverge_factor, outlier_scale;
  std::size_t depth = simulate::SimulationSpec{}.depth;
  std::size_t outlier_features = simulate::SimulationSpec{}.outlier_features;
  std::string delays = "constant";
  std::size_t workers = simulate::SimulationSpec{}.workers;
  std::int64_t rounds = simulate::SimulationSpec{}.rounds;
  std::string inner = std::string(simulate::to_string(simulate::InnerConfig{}.kind));
  std::int64_t inner_steps = simulate::InnerConfig{}.steps;
  std::string params = "bf16";
  std::string worker_params = std::string(simulate::to_string(simulate::SimulationSpec{}.worker_params));
  std::string lr_scale = std::string(simulate::to_string(simulate::SimulationSpec{}.lr_scale));
  std::string fragment_progress = std::string(simulate::to_string(simulate::SimulationSpec{}.fragment_progress));
  std::string rounding = "nearest";
  std::string q8_semantics = "cgad";
  std::string v_map = std::string(fastpath::to_string(fastpath::StepConfig{}.v_map));
  std::optional<std::size_t> min_q8_size;
  std::string record_deltas;
  std::int64_t log_every = simulate::SimulationSpec{}.log_every;
  unsigned jobs = 0;
  std::string shard;
  std::string out;
  core::OptimizerOptions optimizer;  // the outer hyperparameters; its single --optimizer is replaced by the list above
  CLI::App* command = nullptr;       // to ask which method-specific flags were given (refuse_unread_flags)
  SweepOutputOptions output;
};

// Each outer hyperparameter flag that not every method reads, with the methods that read it (--lr is read by
// all). Given while none of them is swept it would change nothing, so it is refused rather than ignored.
struct MethodSpecificFlag {
  const char* flag;
  std::vector<std::string> methods;
};
const std::vector<MethodSpecificFlag>& method_specific_flags() {
  static const std::vector<std::string> adam{"cgad", "pa-cgad", "adam-decay", "adam"};
  static const std::vector<std::string> nesterov{"nesterov", "delayed-nesterov", "sdm"};
  static const std::vector<MethodSpecificFlag> flags{
      {"--fragments", {"pa-cgad"}},
      {"--buffer", {"delayed-nesterov"}},
      {"--fragment-progress", {"pa-cgad"}},
      {"--momentum", nesterov},
      {"--beta1", adam},
      {"--beta2", adam},
      {"--eps", adam},
      {"--weight-decay", adam},
      {"--alpha", {"cgad", "pa-cgad", "adam-decay"}},  // gated by α
      {"--tau-cut", {"cgad", "pa-cgad"}},
      {"--on-zero-gate", {"cgad", "pa-cgad"}},  // cosine gate: σ can be 0
  };
  return flags;
}

std::string comma_list(const std::vector<std::string>& names) {
  std::string text;
  for (const auto& name : names) text += (text.empty() ? "" : ",") + name;
  return text;
}

void refuse_unread_flags(const SimulateOptions& o) {
  for (const MethodSpecificFlag& f : method_specific_flags()) {
    if (o.command->get_option(f.flag)->count() == 0) continue;
    const bool read = std::any_of(f.methods.begin(), f.methods.end(), [&](const std::string& m) {
      return std::find(o.methods.begin(), o.methods.end(), m) != o.methods.end();
    });
    if (!read) {
      throw InputError(std::string(f.flag) + " applies to " + comma_list(f.methods) +
                       ", none of which is in --optimizer");
    }
  }
}

// Each objective's own flags: given with the other objective they would change nothing (the spec carries both
// values, the objective reads one), so they are refused.
void refuse_other_objectives_flags(const SimulateOptions& o) {
  const simulate::ObjectiveKind objective = simulate::parse_objective_kind(o.objective);
  if (objective != simulate::ObjectiveKind::nqm && o.nqm_noise) {
    throw InputError("--nqm-noise applies to the nqm objective, not " + o.objective);
  }
  if (objective != simulate::ObjectiveKind::teacher_student && o.label_noise) {
    throw InputError("--label-noise applies to the teacher-student objective, not " + o.objective);
  }
  // R scales the outlier features only: with none it would change no run, only the grid's fingerprint (so that
  // parts of one sweep, run with and without it, would not merge).
  if (o.outlier_scale && o.outlier_features == 0) {
    throw InputError(
        "--outlier-scale scales the outlier features, and --outlier-features is 0: give "
        "--outlier-features N or leave --outlier-scale out");
  }
}

// --min-q8-size decides which tensors of a q8 state keep fp32 moments, --v-map zero-free its second moment's map;
// with no q8 state swept either would change nothing but the grid's fingerprint, so it is refused like the
// method-specific flags above.
void refuse_unread_q8_size(const SimulateOptions& o) {
  const bool zero_free = fastpath::parse_v_map(o.v_map) == fastpath::VMap::zero_free;
  if (!o.min_q8_size && !zero_free) return;
  const bool q8 = std::any_of(o.states.begin(), o.states.end(), [](const std::string& state) {
    return fastpath::parse_state_format(state) == fastpath::StateFormat::q8;
  });
  if (!q8)
    throw InputError(std::string(o.min_q8_size ? "--min-q8-size" : "--v-map zero-free") +
                     " applies to q8 state, which is not in --state");
}

simulate::SweepGrid make_grid(const SimulateOptions& o) {
  simulate::SweepGrid grid;
  simulate::SimulationSpec& b = grid.base;
  b.objective = simulate::parse_objective_kind(o.objective);
  refuse_other_objectives_flags(o);
  b.problem_seed = o.problem_seed;
  if (o.nqm_noise) b.nqm_noise = core::parse_nonvanishing<double>(*o.nqm_noise, "nqm-noise");
  if (o.label_noise) b.label_noise = core::parse_nonvanishing<double>(*o.label_noise, "label-noise");
  b.workers = o.workers;
  b.rounds = o.rounds;
  b.inner.kind = simulate::parse_inner_optimizer(o.inner);
  b.inner.steps = o.inner_steps;
  if (o.inner_lr) b.inner.lr = core::parse_nonvanishing<float>(*o.inner_lr, "inner-lr");
  if (o.inner_eps) {
    if (b.inner.kind != simulate::InnerOptimizerKind::adamw) throw InputError("--inner-eps applies to --inner adamw");
    b.inner.eps = core::parse_nonvanishing<float>(*o.inner_eps, "inner-eps");
  }
  b.depth = o.depth;
  b.outlier_features = o.outlier_features;
  if (o.outlier_scale) b.outlier_scale = core::parse_nonvanishing<double>(*o.outlier_scale, "outlier-scale");
  b.delays = simulate::parse_delays(o.delays);
  b.worker_params = simulate::parse_worker_params(o.worker_params);
  b.lr_scale = simulate::parse_lr_scale(o.lr_scale);
  b.fragment_progress = simulate::parse_fragment_progress(o.fragment_progress);
  if (o.diverge_factor) b.divergence_factor = core::parse_nonvanishing<double>(*o.diverge_factor, "diverge-factor");
  b.log_every = o.log_every;
  refuse_unread_flags(o);
  core::OptimizerOptions hyper = o.optimizer;
  hyper.optimizer = "cgad";  // a placeholder: the method axis sets each run's optimizer (sweep.hpp)
  b.outer = fastpath::fastpath_step_config(hyper);
  if (!o.optimizer.lr) {
    // Without --lr the simulation's own outer defaults hold (simulation.hpp derives them per family), not the
    // replay defaults OptimizerOptions falls back to.
    b.outer.adam.lr = simulate::default_outer_config().adam.lr;
    b.outer.nesterov.lr = simulate::default_outer_config().nesterov.lr;
  }
  b.outer.params = fastpath::parse_param_format(o.params);
  b.outer.rounding = fastpath::parse_rounding(o.rounding);
  // Every run's: bnb where fastpath::validate refuses it (a method outside the Adam family, bf16 state, stochastic
  // rounding) makes that method, state or the whole sweep one that cannot run, which simulate::validate refuses.
  b.outer.q8_semantics = fastpath::parse_q8_semantics(o.q8_semantics);
  b.outer.v_map = fastpath::parse_v_map(o.v_map);
  refuse_unread_q8_size(o);
  b.outer.min_q8_size = o.min_q8_size;
  b.delayed_nesterov_buffer = o.optimizer.buffer;
  grid.methods = o.methods;
  grid.taus = o.taus;
  grid.sizes = o.sizes;
  for (const auto& state : o.states) grid.states.push_back(fastpath::parse_state_format(state));
  if (o.seeds.empty()) {
    if (o.seed_count == 0) throw InputError("--seeds must be >= 1");
    if (o.seed_count > simulate::kMaxRuns) {
      throw InputError("--seeds must be <= " + std::to_string(simulate::kMaxRuns) + " (the most runs a sweep holds)");
    }
    grid.seeds.resize(o.seed_count);
    std::iota(grid.seeds.begin(), grid.seeds.end(), std::uint64_t{1});
  } else {
    grid.seeds = o.seeds;
  }
  simulate::validate(grid);
  return grid;
}

// `cgad simulate --record-deltas`: the run's events as the replay stream (replay_stream.hpp) — the server's
// initial parameters and the objective's tensor sizes, then one line per arrival — every float as the shortest
// decimal that reads back to it. Lines are written as the run produces them.
class DeltaStreamWriter final : public simulate::ArrivalRecorder {
 public:
  explicit DeltaStreamWriter(std::ostream& out) : out_(out) {}
  void start(std::span<const float> params, std::span<const std::size_t> tensors) override {
    nlohmann::ordered_json line;
    line["params"] = decimals(params);
    line["tensors"] = std::vector<std::size_t>(tensors.begin(), tensors.end());
    out_ << line.dump() << "\n";
  }
  void arrival(std::span<const float> grad, std::int64_t tau, std::size_t fragment) override {
    nlohmann::ordered_json line;
    line["grad"] = decimals(grad);
    line["tau"] = tau;
    line["fragment"] = fragment;
    out_ << line.dump() << "\n";
    ++events_;
  }
  std::size_t events() const { return events_; }

 private:
  static nlohmann::ordered_json decimals(std::span<const float> values) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const float x : values) out.push_back(core::to_decimal(x));
    return out;
  }
  std::ostream& out_;
  std::size_t events_ = 0;
};

// The `cgad replay` flags under which the fast path replays a recorded run to its final parameters bit for bit:
// the run's optimizer, formats, rounding seed (the run seed) and every hyperparameter, as text that parses back
// to the same float. Empty for Delayed Nesterov, which the fast path does not implement, and under --lr-scale mup,
// whose per-tensor learning rates one replay optimizer cannot carry (the reason is `why`).
std::string replay_flags(const simulate::SimulationSpec& spec, std::string& why) {
  const fastpath::StepConfig& c = spec.outer;
  if (spec.delayed_nesterov) {
    why = "the fast path cannot replay delayed-nesterov";
    return "";
  }
  if (spec.lr_scale != simulate::LrScale::none) {
    why = "cgad replay has one learning rate for all tensors and cannot replay --lr-scale mup's per-tensor ones";
    return "";
  }
  const bool adam = core::is_adam_family(c.optimizer);
  const auto real = [](float x) { return core::to_decimal(x); };
  std::ostringstream out;
  out << "--optimizer " << core::to_string(c.optimizer) << " --lr " << real(adam ? c.adam.lr : c.nesterov.lr);
  if (adam) {
    out << " --beta1 " << real(c.adam.beta1) << " --beta2 " << real(c.adam.beta2) << " --eps " << real(c.adam.eps)
        << " --weight-decay " << real(c.adam.weight_decay) << " --alpha " << real(c.alpha) << " --tau-cut "
        << static_cast<long long>(c.tau_cut) << " --on-zero-gate "
        << (c.on_zero_gate == core::ZeroGatePolicy::skip ? "skip" : "apply");
    if (c.optimizer == core::OptimizerKind::pa_cgad) out << " --fragments " << c.fragments;
  } else {
    out << " --momentum " << real(c.nesterov.momentum);
  }
  out << " --params " << fastpath::to_string(c.params) << " --state " << fastpath::to_string(c.state) << " --rounding "
      << fastpath::to_string(c.rounding) << " --seed " << c.seed << " --q8-semantics "
      << fastpath::to_string(c.q8_semantics) << " --min-q8-size " << fastpath::effective_min_q8_size(c) << " --v-map "
      << fastpath::to_string(c.v_map);
  return out.str();
}

// A part file of this sweep but another shard at `out`: replacing it would lose that shard's runs (two
// shards given the same --out). Anything else there (no file, another sweep, this very shard, not a part)
// may be replaced, as any output is.
void refuse_replacing_another_shard(const std::string& out, const simulate::SweepGrid& grid, simulate::Shard shard) {
  std::ifstream in(out);
  if (!in) return;
  nlohmann::json existing;
  try {
    // The rule for every JSON input (strict_json.hpp): a file nested too deep to quote is no part either.
    existing = differential::parse_json_document(in, out);
  } catch (const InputError&) {
    return;
  }
  if (!existing.is_object() || !existing.contains("fingerprint") || !existing.contains("shard")) return;
  const nlohmann::json& held = existing["shard"];
  if (existing["fingerprint"] != simulate::grid_fingerprint(grid) || !held.is_object()) return;
  if (held.value("index", shard.index) == shard.index && held.value("count", shard.count) == shard.count) return;
  throw InputError("--out " + out + " holds shard " + held.value("index", nlohmann::json()).dump() + "/" +
                   held.value("count", nlohmann::json()).dump() + " of this sweep; refusing to replace it with shard " +
                   std::to_string(shard.index) + "/" + std::to_string(shard.count) + ": give each shard its own --out");
}

// Refused before the runs rather than after them.
void check_output_file(const std::string& flag, const std::string& path) {
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (!dir.empty() && !std::filesystem::is_directory(dir))
    throw InputError(flag + ": no such directory: " + dir.string());
  if (std::filesystem::is_directory(path)) throw InputError(flag + ": '" + path + "' is a directory, not a file");
}

void run_simulate(const SimulateOptions& o) {
  const bool sharded = !o.shard.empty();
  if (sharded && o.out.empty()) throw InputError("--shard needs --out FILE: a shard's records are for cgad merge");
  if (sharded) {
    for (const CLI::Option* flag : o.output.flags) {
      if (flag->count() > 0) throw InputError(flag->get_name() + " does not apply to one shard: merge the parts");
    }
  }
  check_sweep_output(o.output);
  const bool recording = !o.record_deltas.empty();
  if (recording && sharded) throw InputError("--record-deltas records a whole one-run sweep, not a shard");
  // Standard output carries the table (--json, --csv) or a shard's summary line: a file output that is standard
  // output too ("-", /dev/stdout, the file of a > redirection) would be interleaved with it, or replaced under it.
  for (const auto& [flag, path] : {std::pair{"--out", &o.out}, std::pair{"--record-deltas", &o.record_deltas}}) {
    if (!path->empty() && names_standard_output(*path)) {
      throw InputError(std::string(flag) + " " + *path + " is standard output, which carries simulate's " +
                       (sharded ? "summary line" : "table") + ": give it a file of its own");
    }
  }
  if (!o.out.empty()) check_output_file("--out", o.out);
  if (recording) {
    check_output_file("--record-deltas", o.record_deltas);
    if (std::filesystem::path(o.record_deltas).lexically_normal() == std::filesystem::path(o.out).lexically_normal()) {
      throw InputError("--record-deltas and --out name the same file");
    }
  }
  const simulate::SweepGrid grid = make_grid(o);
  if (recording && simulate::run_count(grid) != 1) {
    throw InputError("--record-deltas records one run; this sweep has " + std::to_string(simulate::run_count(grid)) +
                     " (give one --optimizer, --tau, --size, --state and --seeds 1 or one --seed)");
  }
  const simulate::Shard shard = sharded ? simulate::parse_shard(o.shard) : simulate::Shard{};
  const std::vector<std::size_t> indices = simulate::shard_runs(grid, shard);
  // Held from before the first run until the part is committed: a second writer of the same --out is refused
  // at its start instead of silently replacing this one's runs.
  std::optional<simulate::PartLock> lock;
  if (!o.out.empty()) {
    lock.emplace(o.out);
    refuse_replacing_another_shard(o.out, grid, shard);
  }

  std::vector<simulate::RunRecord> records;
  {
    ProgressBar bar("simulate");
    if (recording) {
      // The one run, its events streamed to a temporary file that replaces FILE only once the run is done.
      std::size_t events = 0;
      write_atomically(o.record_deltas, [&](std::ostream& out) {
        DeltaStreamWriter writer(out);
        simulate::RunRecord record = simulate::execute_run(
            grid, 0,
            [&](std::int64_t done, std::int64_t total) {
              bar.update(static_cast<long>(done), static_cast<long>(total));
            },
            &writer);
        if (record.status == simulate::RunStatus::unsupported) throw InputError(record.unsupported_reason);
        events = writer.events();
        records.push_back(std::move(record));
      });
      const simulate::SimulationSpec spec = simulate::run_spec(grid, records.front().key);
      std::string why;
      const std::string flags = replay_flags(spec, why);
      std::cerr << "cgad simulate: " << events << " events written to " << o.record_deltas << "; "
                << (flags.empty() ? why
                                  : "cgad replay --backend fastpath --input " + o.record_deltas + " " + flags +
                                        " --output FILE ends at this run's final parameters")
                << "\n";
    } else {
      records = simulate::run_sweep(grid, indices, o.jobs, [&](long done, long total) { bar.update(done, total); });
    }
  }
  if (!o.out.empty()) {
    const simulate::SweepPart part{grid, shard, records};
    write_atomically(o.out, [&](std::ostream& out) { out << simulate::part_to_json(part).dump() << "\n"; });
  }
  if (sharded) {
    std::size_t diverged = 0, unsupported = 0;
    for (const auto& r : records) {
      diverged += r.status == simulate::RunStatus::diverged;
      unsupported += r.status == simulate::RunStatus::unsupported;
    }
    std::cout << "cgad simulate: shard " << shard.index << "/" << shard.count << ": " << records.size() << " of "
              << simulate::run_count(grid) << " runs (" << diverged << " diverged, " << unsupported
              << " unsupported) written to " << o.out << "; combine the parts with cgad merge\n";
    return;
  }
  write_sweep_output({grid, std::move(records), {}}, o.output);
}

}  // namespace

void add_simulate_command(CLI::App& app) {
  auto o = std::make_shared<SimulateOptions>();
  CLI::App* command = app.add_subcommand(
      "simulate", "Asynchronous DiLoCo at small scale: a sweep of outer optimizers x tau x sizes x states x seeds");
  command->add_option("--objective", o->objective, "nqm or teacher-student")->capture_default_str();
  add_optimizer_options(*command, o->optimizer);
  command->remove_option(command->get_option("--optimizer"));
  command
      ->add_option("--optimizer", o->methods,
                   "outer optimizers (comma list of cgad, pa-cgad, adam-decay, adam, nesterov, delayed-nesterov, sdm)")
      ->delimiter(',')
      ->capture_default_str();
  std::ostringstream lr_help;
  lr_help << "outer learning rate of every swept method (default " << simulate::default_outer_config().adam.lr
          << " Adam family, " << simulate::default_outer_config().nesterov.lr << " Nesterov family)";
  command->get_option("--lr")->description(lr_help.str());
  o->command = command;
  command->add_option("--tau", o->taus, "staleness tau (with --delays other than constant: tau_max), comma list")
      ->delimiter(',')
      ->capture_default_str();
  command->add_option("--size", o->sizes, "model sizes (NQM dimension / student hidden width), comma list")
      ->delimiter(',')
      ->capture_default_str();
  command->add_option("--state", o->states, "outer-state formats fp32, bf16, q8 (comma list)")
      ->delimiter(',')
      ->capture_default_str();
  CLI::Option* seeds = command->add_option("--seeds", o->seed_count, "number of seeds (1..N)")->capture_default_str();
  command->add_option("--seed", o->seeds, "explicit run seeds (comma list)")->delimiter(',')->excludes(seeds);
  command->add_option("--problem-seed", o->problem_seed, "seed of the objective itself")->capture_default_str();
  command->add_option("--nqm-noise", o->nqm_noise, "NQM gradient noise scale s (default 1; 0: exact gradients)");
  command->add_option("--label-noise", o->label_noise, "teacher-student label noise std (default 0.1)");
  command
      ->add_option("--delays", o->delays,
                   std::string(simulate::kDelayNames) +
                       " (constant: nothing arrives in the first tau rounds, then every arrival is tau old; "
                       "constant-clamped: tau_r = min(tau, r))")
      ->capture_default_str();
  command->add_option("--workers", o->workers, "workers K")->capture_default_str();
  command->add_option("--rounds", o->rounds, "outer rounds")->capture_default_str();
  command->add_option("--inner", o->inner, "inner optimizer, sgd or adamw")->capture_default_str();
  command->add_option("--inner-steps", o->inner_steps, "inner steps H per round")->capture_default_str();
  command->add_option("--inner-lr", o->inner_lr, "inner learning rate (default 0.01)");
  command->add_option("--inner-eps", o->inner_eps,
                      "inner AdamW epsilon (default 1e-8; raise it to reach the eps regime)");
  command->add_option("--depth", o->depth, "teacher-student: the student's hidden layers, each --size wide")
      ->capture_default_str();
  command
      ->add_option(
          "--outlier-features", o->outlier_features,
          "teacher-student: how many of the 16 input dimensions are outlier features (scaled by --outlier-scale)")
      ->capture_default_str();
  command->add_option("--outlier-scale", o->outlier_scale,
                      "teacher-student: the outlier features' standard deviation R (default 1; needs "
                      "--outlier-features N > 0)");
  command->add_option("--params", o->params, "outer parameter format, bf16 or fp32")->capture_default_str();
  command
      ->add_option("--worker-params", o->worker_params,
                   "workers' parameters and arithmetic: fp32, or bf16 as a bf16 training run (bf16 parameters, "
                   "activations and gradients, fp32 accumulation and inner-optimizer state)")
      ->capture_default_str();
  command
      ->add_option("--lr-scale", o->lr_scale,
                   "none, or mup: muP's Adam rules (Yang et al. 2022) relative to width 32 -- the teacher-student "
                   "readout w2 gets lr x 32/width (outer and inner) and a 32/width smaller init variance")
      ->capture_default_str();
  command
      ->add_option("--fragment-progress", o->fragment_progress,
                   "pa-cgad: keep (torchft's streaming DiLoCo: a worker keeps and later sends its progress on "
                   "fragments it did not sync) or discard (each job starts from the whole snapshot)")
      ->capture_default_str();
  command->add_option("--rounding", o->rounding, "nearest or stochastic")->capture_default_str();
  command
      ->add_option("--q8-semantics", o->q8_semantics,
                   "whose Adam every run's outer state follows, one value for the whole sweep (not an axis): cgad "
                   "(exact nearest code, v = 0 guard) or bnb (bitsandbytes' 8-bit Adam, and its 32-bit Adam for "
                   "fp32 state; Adam family, fp32/q8 state, nearest rounding only)")
      ->capture_default_str();
  command
      ->add_option("--v-map", o->v_map,
                   "the second moment's 8-bit map in every q8 run of the Adam family (not an axis): dynamic "
                   "(bitsandbytes', with a code at 0) or zero-free (no code at 0; docs/results/noise.md)")
      ->capture_default_str();
  command->add_option("--min-q8-size", o->min_q8_size,
                      "with q8 state, a tensor under this many elements keeps fp32 state, in every run (default 4096 "
                      "with bnb, as bitsandbytes' min_8bit_size, 0 with cgad); the tensors are the teacher-student's "
                      "W1, b1, w2, b2 and the NQM's one vector");
  command->add_option("--diverge-factor", o->diverge_factor,
                      "diverged: loss above this x the initial loss (default 1000)");
  command->add_option("--log-every", o->log_every, "rounds between recorded losses")->capture_default_str();
  command
      ->add_option("--jobs", o->jobs,
                   "runs at once, at most the usable cores (CPU affinity) and the run count (0: that many); "
                   "results do not depend on it")
      ->capture_default_str()
      ->check(at_most(std::numeric_limits<unsigned>::max(), "(a count above the usable cores runs on all of them)"));
  command->add_option("--shard", o->shard, "run only slice I of N (runs whose index % N == I); needs --out");
  command->add_option("--out", o->out, "write this run's records as a part file for cgad merge");
  command->add_option("--record-deltas", o->record_deltas,
                      "write the pseudo-gradients the server received, in arrival order, as a cgad replay stream "
                      "(first line params and tensors, then grad, tau, fragment per arrival); a sweep of one run only");
  add_sweep_output_options(*command, o->output);
  // CLI11 reads "" as 0 for a number: an empty value is refused instead of running with 0.
  const CLI::Validator not_empty(
      [](std::string& value) { return value.empty() ? std::string("empty value, expected a number") : std::string(); },
      "NOT_EMPTY");
  // CLI11 2.1 reads "-1" into an unsigned option as 2^64 − 1; for --min-q8-size that would be a valid size (every
  // tensor in fp32 state), so a sign is refused outright (and for the other unsigned counts alike).
  const CLI::Validator non_negative(
      [](std::string& value) {
        return value.find('-') != std::string::npos ? std::string("must be a non-negative integer") : std::string();
      },
      "NON_NEGATIVE");
  for (const char* name : {"--min-q8-size", "--depth", "--outlier-features"})
    command->get_option(name)->check(non_negative);
  for (const char* name : {"--tau", "--size", "--seeds", "--seed", "--problem-seed", "--workers", "--rounds",
                           "--inner-steps", "--log-every", "--jobs", "--tau-cut", "--buffer", "--fragments",
                           "--min-q8-size", "--depth", "--outlier-features"}) {
    command->get_option(name)->check(not_empty);
  }
  command->callback([o] { run_simulate(*o); });
}

}  // namespace cgad::cli
