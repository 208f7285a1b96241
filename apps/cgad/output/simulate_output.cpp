#include "simulate_output.hpp"

#include "plot.hpp"

#include "cgad/core/errors.hpp"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <sstream>

namespace cgad::cli {
namespace {

using simulate::CellSummary;
using simulate::MergedSweep;

std::string number(const std::optional<double>& x, const char* format) {
  if (!x) return "-";
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, format, *x);
  return buffer;
}

std::string tau_label(const simulate::SweepGrid& grid) {
  const bool fixed =
      grid.base.delays == theory::DelayKind::constant_from_start || grid.base.delays == theory::DelayKind::constant;
  return fixed ? "tau" : "tau_max";
}

std::string interval(const std::optional<simulate::Interval>& x, const char* format) {
  if (!x) return "-";
  return "[" + number(x->low, format) + ", " + number(x->high, format) + "]";
}

std::string missing_line(const MergedSweep& sweep) {
  if (sweep.missing.empty()) return "";
  return std::to_string(sweep.missing.size()) + " of " + std::to_string(simulate::run_count(sweep.grid)) +
         " runs are missing (partial merge): their cells say so\n";
}

bool all_positive(const PlotSpec& spec) {
  for (const auto& s : spec.series) {
    for (double y : s.y) {
      if (!(y > 0)) return false;
    }
  }
  return true;
}

bool has_points(const PlotSpec& spec) {
  return std::any_of(spec.series.begin(), spec.series.end(), [](const PlotSeries& s) { return !s.x.empty(); });
}

}  // namespace

std::string describe_sweep(const simulate::SweepGrid& grid) {
  const simulate::SimulationSpec& b = grid.base;
  std::ostringstream out;
  out << to_string(b.objective) << " objective (problem seed " << b.problem_seed << "), " << b.workers << " workers, "
      << b.rounds << " outer rounds of H = " << b.inner.steps << ' ' << to_string(b.inner.kind) << " inner steps (lr "
      << b.inner.lr << "), " << simulate::delays_name(b.delays) << " delays, " << fastpath::to_string(b.outer.params)
      << " parameters, " << fastpath::to_string(b.outer.rounding) << " rounding";
  // fp32 workers, unscaled learning rates and kept fragment progress are the defaults: said only when not.
  if (b.worker_params == simulate::WorkerParams::bf16) out << ", bf16 workers";
  if (b.lr_scale == simulate::LrScale::mup) out << ", muP learning rates (base width 32)";
  const bool pa = std::find(grid.methods.begin(), grid.methods.end(), "pa-cgad") != grid.methods.end();
  if (pa && b.fragment_progress == simulate::FragmentProgress::discard)
    out << ", PA-CGAD discarding unsynced fragments' progress";
  // cgad's semantics with every q8 tensor in 8 bits is what a sweep has always run: said only when it is not.
  const bool q8 = std::find(grid.states.begin(), grid.states.end(), fastpath::StateFormat::q8) != grid.states.end();
  const std::size_t min_q8 = fastpath::effective_min_q8_size(b.outer);
  if (b.outer.q8_semantics == fastpath::Q8Semantics::bnb) out << ", bitsandbytes' (bnb) Adam semantics";
  if (q8 && min_q8 > 0) out << ", q8 tensors under " << min_q8 << " elements in fp32 state";
  out << "; diverged = loss not finite or above " << b.divergence_factor << " x the initial loss";
  return out.str();
}

std::string sweep_axes_command(const simulate::SweepGrid& grid) {
  std::ostringstream out;
  const auto list = [&out](const char* flag, const auto& values, const auto& show) {
    out << ' ' << flag << ' ';
    for (std::size_t i = 0; i < values.size(); ++i) out << (i ? "," : "") << show(values[i]);
  };
  const auto same = [](const auto& x) { return x; };
  out << "cgad simulate";
  list("--optimizer", grid.methods, same);
  list("--tau", grid.taus, same);
  list("--size", grid.sizes, same);
  list("--state", grid.states, [](fastpath::StateFormat f) { return fastpath::to_string(f); });
  list("--seed", grid.seeds, same);
  return out.str();
}

// "cell" as the table names it: method, τ, size, state.
std::string cell_name(const simulate::SweepGrid& grid, const CellSummary& c) {
  return c.key.method + " " + tau_label(grid) + " " + std::to_string(c.key.tau) + " size " +
         std::to_string(c.key.size) + " " + std::string(fastpath::to_string(c.key.state));
}

void print_sigma_comparisons(std::ostream& out, const MergedSweep& sweep, const std::vector<CellSummary>& cells) {
  const std::vector<simulate::SigmaComparisonRow> rows = simulate::compare_cells(sweep.grid, sweep.records);
  if (rows.empty()) return;
  out << "\nsigma against the first value of one axis (ratio, 95% bootstrap interval, permutation p on centred "
         "losses; p < 0.05: beyond seed noise)\n";
  for (const auto& row : rows) {
    char line[128];
    std::snprintf(line, sizeof line, "%.3g [%.3g, %.3g] p=%.3g%s", row.test.ratio, row.test.ratio_ci.low,
                  row.test.ratio_ci.high, row.test.p_value, row.test.exact ? " (exact)" : "");
    out << "  " << cell_name(sweep.grid, cells[row.cell]) << " vs " << row.axis << " "
        << cell_name(sweep.grid, cells[row.against]) << ": " << line << "\n";
  }
}

void print_sweep_table(std::ostream& out, const MergedSweep& sweep) {
  out << "cgad simulate: " << describe_sweep(sweep.grid) << "\n"
      << "final loss over the seeds that did not diverge or stall: mean, sample sigma (n-1), single-shot risk = mean + "
         "sigma, "
         "each interval a 95% percentile bootstrap; v0 = share of v stored as 0 at the end, >5lr = share of "
         "element-steps past 5 lr (Adam family)\n"
      << missing_line(sweep);
  char line[512];
  std::snprintf(line, sizeof line, "%-16s %7s %6s %5s %9s %8s %7s %11s %23s %11s %23s %11s %23s %9s %9s  %s\n",
                "method", tau_label(sweep.grid).c_str(), "size", "state", "finished", "diverged", "stalled", "mean",
                "mean 95%", "sigma", "sigma 95%", "risk", "risk 95%", "v0", ">5lr", "note");
  out << line;
  const std::vector<CellSummary> cells = simulate::summarize(sweep.grid, sweep.records);
  for (const CellSummary& c : cells) {
    const std::string finished = std::to_string(c.finished) + "/" + std::to_string(c.runs);
    std::snprintf(line, sizeof line, "%-16s %7ld %6zu %5s %9s %8zu %7zu %11s %23s %11s %23s %11s %23s %9s %9s",
                  c.key.method.c_str(), c.key.tau, c.key.size, std::string(fastpath::to_string(c.key.state)).c_str(),
                  finished.c_str(), c.diverged, c.stalled, number(c.mean, "%.4e").c_str(),
                  interval(c.mean_ci, "%.3e").c_str(), number(c.stddev, "%.4e").c_str(),
                  interval(c.stddev_ci, "%.3e").c_str(), number(c.risk, "%.4e").c_str(),
                  interval(c.risk_ci, "%.3e").c_str(), number(c.v_zero_fraction, "%.3g").c_str(),
                  number(c.step_over_5lr_fraction, "%.3g").c_str());
    const std::string note = simulate::cell_note(c);
    out << line << (note.empty() ? "" : "  " + note) << "\n";
  }
  print_sigma_comparisons(out, sweep, cells);
}

void print_sweep_csv(std::ostream& out, const MergedSweep& sweep) {
  out << "method," << tau_label(sweep.grid)
      << ",size,state,runs,present,unsupported,diverged,stalled,finished,final_loss_mean,mean_ci95_low,"
         "mean_ci95_high,final_loss_stddev,stddev_ci95_low,stddev_ci95_high,single_shot_risk,risk_ci95_low,risk_ci95_"
         "high,v_zero_fraction,"
         "step_over_5lr_fraction,max_step_over_lr,note\n";
  const auto field = [](const std::optional<double>& x) { return x ? number(x, "%.17g") : std::string(); };
  const auto low = [](const std::optional<simulate::Interval>& x) {
    return x ? std::optional<double>(x->low) : std::nullopt;
  };
  const auto high = [](const std::optional<simulate::Interval>& x) {
    return x ? std::optional<double>(x->high) : std::nullopt;
  };
  for (const CellSummary& c : simulate::summarize(sweep.grid, sweep.records)) {
    std::string note = simulate::cell_note(c);
    std::replace(note.begin(), note.end(), '"', '\'');
    out << c.key.method << ',' << c.key.tau << ',' << c.key.size << ',' << fastpath::to_string(c.key.state) << ','
        << c.runs << ',' << c.present << ',' << c.unsupported << ',' << c.diverged << ',' << c.stalled << ','
        << c.finished << ',' << field(c.mean) << ',' << field(low(c.mean_ci)) << ',' << field(high(c.mean_ci)) << ','
        << field(c.stddev) << ',' << field(low(c.stddev_ci)) << ',' << field(high(c.stddev_ci)) << ',' << field(c.risk)
        << ',' << field(low(c.risk_ci)) << ',' << field(high(c.risk_ci)) << ',' << field(c.v_zero_fraction) << ','
        << field(c.step_over_5lr_fraction) << ',' << field(c.max_step_over_lr) << ",\"" << note << "\"\n";
  }
}

std::string sweep_markdown_table(const MergedSweep& sweep) {
  std::ostringstream md;
  md << "| method | " << (tau_label(sweep.grid) == "tau" ? "τ" : "τ_max")
     << " | size | state | finished | diverged | final loss mean [95 %] | σ [95 %] | risk (mean + σ) [95 %] | note |\n"
     << "|---|---:|---:|---|---:|---:|---:|---:|---:|---|\n";
  for (const CellSummary& c : simulate::summarize(sweep.grid, sweep.records)) {
    md << "| " << c.key.method << " | " << c.key.tau << " | " << c.key.size << " | " << fastpath::to_string(c.key.state)
       << " | " << c.finished << "/" << c.runs << " | " << c.diverged << " | " << number(c.mean, "%.4e") << " "
       << interval(c.mean_ci, "%.2e") << " | " << number(c.stddev, "%.3e") << " " << interval(c.stddev_ci, "%.2e")
       << " | " << number(c.risk, "%.4e") << " " << interval(c.risk_ci, "%.2e") << " | " << simulate::cell_note(c)
       << " |\n";
  }
  return md.str();
}

std::vector<std::string> plot_sweep(const MergedSweep& sweep, const std::filesystem::path& dir,
                                    const std::string& prefix) {
  const simulate::SweepGrid& grid = sweep.grid;
  const std::vector<CellSummary> cells = simulate::summarize(grid, sweep.records);
  std::vector<std::string> written;
  const auto draw = [&](const std::string& name, PlotSpec spec) {
    if (!has_points(spec)) return;
    spec.log_y = all_positive(spec);
    plot_png(dir / name, spec);
    written.push_back(name);
  };
  for (const auto state : grid.states) {
    const std::string state_name(fastpath::to_string(state));
    for (const std::size_t size : grid.sizes) {
      PlotSpec spec{"Final loss over the finished seeds: mean (points) and mean + sigma (single-shot risk), state " +
                        state_name + ", size " + std::to_string(size),
                    tau_label(grid),
                    "final loss",
                    false,
                    false,
                    {}};
      for (std::size_t m = 0; m < grid.methods.size(); ++m) {
        const std::string& method = grid.methods[m];
        const int color = static_cast<int>(m);
        PlotSeries mean{method + " mean", {}, {}, true, color},
            risk{method + " mean+sigma", {}, {}, false, color, true};
        std::string survivors;  // the cells whose statistics leave diverged seeds out: the legend says so
        for (const CellSummary& c : cells) {
          if (c.key.method != method || c.key.state != state || c.key.size != size) continue;
          if (c.diverged > 0 && c.finished > 0) {
            survivors += (survivors.empty() ? "" : ", ") + tau_label(grid) + " " + std::to_string(c.key.tau) + ": " +
                         std::to_string(c.diverged) + " of " + std::to_string(c.diverged + c.finished) + " diverged";
          }
          if (c.mean) {
            mean.x.push_back(static_cast<double>(c.key.tau));
            mean.y.push_back(*c.mean);
          }
          if (c.risk) {
            risk.x.push_back(static_cast<double>(c.key.tau));
            risk.y.push_back(*c.risk);
          }
        }
        if (!survivors.empty()) mean.title += " of finished seeds (" + survivors + ")";
        if (!mean.x.empty()) spec.series.push_back(std::move(mean));
        if (!risk.x.empty()) spec.series.push_back(std::move(risk));
      }
      draw(prefix + "final_loss_" + state_name + "_size" + std::to_string(size) + ".png", std::move(spec));
    }
    if (grid.sizes.size() < 2) continue;
    for (const long tau : grid.taus) {
      const auto [smallest, largest] = std::minmax_element(grid.sizes.begin(), grid.sizes.end());
      PlotSpec spec{"Seed-to-seed sigma of the final loss against size, state " + state_name + ", " + tau_label(grid) +
                        " " + std::to_string(tau),
                    "size",
                    "sigma of the final loss over the finished seeds (n-1)",
                    *largest >= 8 * *smallest,
                    false,
                    {}};
      for (std::size_t m = 0; m < grid.methods.size(); ++m) {
        const std::string& method = grid.methods[m];
        PlotSeries sigma{method, {}, {}, true, static_cast<int>(m)};
        for (const CellSummary& c : cells) {
          if (c.key.method != method || c.key.state != state || c.key.tau != tau || !c.stddev) continue;
          sigma.x.push_back(static_cast<double>(c.key.size));
          sigma.y.push_back(*c.stddev);
        }
        if (!sigma.x.empty()) spec.series.push_back(std::move(sigma));
      }
      draw(prefix + "sigma_vs_size_" + state_name + "_tau" + std::to_string(tau) + ".png", std::move(spec));
    }
  }
  return written;
}

void add_sweep_output_options(CLI::App& command, SweepOutputOptions& options) {
  options.flags = {
      command.add_flag("--json", options.json,
                       "grid, every run and every cell as JSON on stdout, instead of the table"),
      command.add_flag("--csv", options.csv, "one CSV row per cell on stdout, instead of the table"),
      command.add_option("--plot", options.plot_dir, "write PNG figures into this directory"),
  };
}

void check_sweep_output(const SweepOutputOptions& options) {
  if (options.json && options.csv) throw core::InputError("choose one of --json and --csv");
  if (!options.plot_dir.empty()) check_plot_target(std::filesystem::path(options.plot_dir) / "final_loss.png");
}

void write_sweep_output(const MergedSweep& sweep, const SweepOutputOptions& options) {
  if (options.json) {
    std::cout << simulate::sweep_to_json(sweep).dump(2) << "\n";
  } else if (options.csv) {
    print_sweep_csv(std::cout, sweep);
  } else {
    print_sweep_table(std::cout, sweep);
  }
  if (!options.plot_dir.empty()) {
    const auto files = plot_sweep(sweep, options.plot_dir);
    std::cerr << "cgad: wrote " << files.size() << " figure(s) into " << options.plot_dir << "\n";
  }
}

}  // namespace cgad::cli
