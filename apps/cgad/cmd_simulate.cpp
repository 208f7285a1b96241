// `cgad simulate`: a sweep of asynchronous DiLoCo runs — outer optimizers × τ × sizes × state formats × seeds
// (simulate/sweep.hpp) — as a table of final loss mean ± σ, single-shot risk and diverged runs, or as JSON/CSV
// and figures. `--shard I/N --out FILE` runs one slice of the sweep and writes its records for `cgad merge`.
#include "cli_support.hpp"
#include "commands.hpp"
#include "optimizer_options.hpp"
#include "progress.hpp"
#include "simulate_output.hpp"

#include "cgad/reference/errors.hpp"
#include "cgad/simulate/sweep_json.hpp"

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>
#include <numeric>
#include <optional>
#include <sstream>

namespace cgad::cli {
namespace {

using reference::InputError;

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
  std::optional<std::string> nqm_noise, label_noise, inner_lr, diverge_factor;
  std::string delays = "constant";
  std::size_t workers = simulate::SimulationSpec{}.workers;
  std::int64_t rounds = simulate::SimulationSpec{}.rounds;
  std::string inner = std::string(simulate::to_string(simulate::InnerConfig{}.kind));
  std::int64_t inner_steps = simulate::InnerConfig{}.steps;
  std::string params = "bf16";
  std::string rounding = "nearest";
  std::int64_t log_every = simulate::SimulationSpec{}.log_every;
  unsigned jobs = 0;
  std::string shard;
  std::string out;
  OptimizerOptions optimizer;  // the outer hyperparameters; its single --optimizer is replaced by the list above
  CLI::App* command = nullptr;  // to ask which method-specific flags were given (refuse_unread_flags)
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
      {"--fragments", {"pa-cgad"}},           {"--buffer", {"delayed-nesterov"}},
      {"--momentum", nesterov},               {"--beta1", adam},
      {"--beta2", adam},                      {"--eps", adam},
      {"--weight-decay", adam},               {"--alpha", {"cgad", "pa-cgad", "adam-decay"}},  // gated by α
      {"--tau-cut", {"cgad", "pa-cgad"}},     {"--on-zero-gate", {"cgad", "pa-cgad"}},  // cosine gate: σ can be 0
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

simulate::SweepGrid make_grid(const SimulateOptions& o) {
  simulate::SweepGrid grid;
  simulate::SimulationSpec& b = grid.base;
  b.objective = simulate::parse_objective_kind(o.objective);
  b.problem_seed = o.problem_seed;
  if (o.nqm_noise) b.nqm_noise = reference::parse_real<double>(*o.nqm_noise, "nqm-noise");
  if (o.label_noise) b.label_noise = reference::parse_real<double>(*o.label_noise, "label-noise");
  b.workers = o.workers;
  b.rounds = o.rounds;
  b.inner.kind = simulate::parse_inner_optimizer(o.inner);
  b.inner.steps = o.inner_steps;
  if (o.inner_lr) b.inner.lr = reference::parse_real<float>(*o.inner_lr, "inner-lr");
  b.delays = theory::parse_delay_kind(o.delays);
  if (o.diverge_factor) b.divergence_factor = reference::parse_real<double>(*o.diverge_factor, "diverge-factor");
  b.log_every = o.log_every;
  refuse_unread_flags(o);
  OptimizerOptions hyper = o.optimizer;
  hyper.optimizer = "cgad";  // a placeholder: the method axis sets each run's optimizer (sweep.hpp)
  b.outer = fastpath_step_config(hyper);
  if (!o.optimizer.lr) {
    // Without --lr the simulation's own outer defaults hold (simulation.hpp derives them per family), not the
    // replay defaults OptimizerOptions falls back to.
    b.outer.adam.lr = simulate::default_outer_config().adam.lr;
    b.outer.nesterov.lr = simulate::default_outer_config().nesterov.lr;
  }
  b.outer.params = fastpath::parse_param_format(o.params);
  b.outer.rounding = fastpath::parse_rounding(o.rounding);
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

void run_simulate(const SimulateOptions& o) {
  const bool sharded = !o.shard.empty();
  if (sharded && o.out.empty()) throw InputError("--shard needs --out FILE: a shard's records are for cgad merge");
  if (sharded) {
    for (const CLI::Option* flag : o.output.flags) {
      if (flag->count() > 0) throw InputError(flag->get_name() + " does not apply to one shard: merge the parts");
    }
  }
  check_sweep_output(o.output);
  if (!o.out.empty()) {
    // Refused before the runs rather than after them.
    const std::filesystem::path dir = std::filesystem::path(o.out).parent_path();
    if (!dir.empty() && !std::filesystem::is_directory(dir)) throw InputError("--out: no such directory: " + dir.string());
    if (std::filesystem::is_directory(o.out)) throw InputError("--out: '" + o.out + "' is a directory, not a file");
  }
  const simulate::SweepGrid grid = make_grid(o);
  const simulate::Shard shard = sharded ? simulate::parse_shard(o.shard) : simulate::Shard{};
  const std::vector<std::size_t> indices = simulate::shard_runs(grid, shard);

  std::vector<simulate::RunRecord> records;
  {
    ProgressBar bar("simulate");
    records = simulate::run_sweep(grid, indices, o.jobs, [&](long done, long total) { bar.update(done, total); });
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
  command->add_option("--optimizer", o->methods,
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
  command->add_option("--delays", o->delays, theory::kDelayKindNames)->capture_default_str();
  command->add_option("--workers", o->workers, "workers K")->capture_default_str();
  command->add_option("--rounds", o->rounds, "outer rounds")->capture_default_str();
  command->add_option("--inner", o->inner, "inner optimizer, sgd or adamw")->capture_default_str();
  command->add_option("--inner-steps", o->inner_steps, "inner steps H per round")->capture_default_str();
  command->add_option("--inner-lr", o->inner_lr, "inner learning rate (default 0.01)");
  command->add_option("--params", o->params, "outer parameter format, bf16 or fp32")->capture_default_str();
  command->add_option("--rounding", o->rounding, "nearest or stochastic")->capture_default_str();
  command->add_option("--diverge-factor", o->diverge_factor, "diverged: loss above this x the initial loss (default 1000)");
  command->add_option("--log-every", o->log_every, "rounds between recorded losses")->capture_default_str();
  command->add_option("--jobs", o->jobs,
                      "runs at once, at most the usable cores (CPU affinity) and the run count (0: that many); "
                      "results do not depend on it")
      ->capture_default_str();
  command->add_option("--shard", o->shard, "run only slice I of N (runs whose index % N == I); needs --out");
  command->add_option("--out", o->out, "write this run's records as a part file for cgad merge");
  add_sweep_output_options(*command, o->output);
  // CLI11 reads "" as 0 for a number: an empty value is refused instead of running with 0.
  const CLI::Validator not_empty(
      [](std::string& value) { return value.empty() ? std::string("empty value, expected a number") : std::string(); },
      "NOT_EMPTY");
  for (const char* name : {"--tau", "--size", "--seeds", "--seed", "--problem-seed", "--workers", "--rounds",
                           "--inner-steps", "--log-every", "--jobs", "--tau-cut", "--buffer", "--fragments"}) {
    command->get_option(name)->check(not_empty);
  }
  command->callback([o] { run_simulate(*o); });
}

}  // namespace cgad::cli
