// `cgad noise`: the second-moment rounding-noise study (noise_lockstep.hpp) over a matrix of scenarios —
// optimizers × state formats × roundings × delay distributions × seeds — with a table, --json / --csv, and
// PNG figures of v's relative error over the run.
#include "cli_support.hpp"
#include "commands.hpp"
#include "noise_output.hpp"
#include "progress.hpp"

#include "cgad/differential/noise_lockstep.hpp"
#include "cgad/io/input_file.hpp"
#include "cgad/reference/real.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>

namespace cgad::cli {
namespace {

struct NoiseOptions {
  std::vector<std::string> optimizers{"adam-decay", "cgad", "cgad-skip"};
  std::vector<std::string> states{"q8"};
  std::vector<std::string> semantics{"cgad"};
  std::vector<std::string> v_maps{"dynamic"};
  std::optional<std::size_t> min_q8_size;
  double scale_range = 1e5;
  double zero_fraction = 0.0;
  std::string stream;
  std::vector<std::string> roundings{"nearest"};
  std::vector<std::string> delays{"heavy"};
  std::vector<std::uint64_t> seeds{1};
  // 3 default scenarios × 2000 steps × 4096 = 2.5·10^7 lockstep element-steps. 4096 elements: one tensor of
  // bitsandbytes' min_8bit_size, so that bnb semantics keeps it in 8-bit state.
  std::size_t size = 4096;
  std::int64_t steps = 2000;
  std::int64_t log_every = 100;
  bool json = false, csv = false;
  std::string plot_dir;
  unsigned precision = 0;
};

nlohmann::json summary_json(const differential::ErrorSummary& e) {
  return {{"mean_abs", e.mean_abs}, {"rms", e.rms}, {"max_abs", e.max_abs}, {"bias", e.bias}};
}

nlohmann::json trap_json(const differential::TrapSummary& t) {
  return {{"v_zero_fraction", t.v_zero_fraction},
          {"m_zero_fraction", t.m_zero_fraction},
          {"step_over_5lr_fraction", t.step_over_5lr_fraction},
          {"max_step_over_lr", t.max_step_over_lr},
          {"reference_max_step_over_lr", t.reference_max_step_over_lr}};
}

// Tensor t of the run's layout (a recorded stream's "tensors"), its trap metrics at `sample`.
nlohmann::json tensor_json(const differential::NoiseRun& run, const differential::NoiseSample& sample, std::size_t t) {
  const differential::TensorSample& s = sample.tensors[t];
  return {{"tensor", t},
          {"size", run.tensors[t]},
          {"v", summary_json(s.v)},
          {"m", summary_json(s.m)},
          {"theta", summary_json(s.theta)},
          {"trap", trap_json(s.trap)}};
}

void print_table(const std::vector<differential::NoiseRun>& runs, unsigned bits) {
  std::printf("cgad noise: fast path (bf16 params) vs %u-bit MPFR reference in lockstep, never re-synced\n", bits);
  std::printf("v: relative error (fast - ref)/ref; m: (fast - ref)/sqrt(v_ref); theta: (fast - ref)/lr\n");
  std::printf(
      "v0/m0: share of stored v/m that decode to 0 at the end; >5lr: share of element-steps with "
      "|dtheta| > 5 lr; max/lr: largest |dtheta|/lr (fast path | reference)\n");
  std::printf("%-58s %10s %10s %10s %10s %10s %8s %8s %9s %17s %7s\n", "scenario", "v bias@10%", "v bias@end",
              "v rms@end", "m rms@end", "th rms@end", "v0", "m0", ">5lr", "max/lr", "gated0");
  for (const auto& run : runs) {
    const differential::NoiseSample& early = sample_at_fraction(run, 0.1);
    const differential::NoiseSample& end = run.samples.back();
    const differential::TrapSummary& t = end.trap;
    std::printf("%-58s %10.3e %10.3e %10.3e %10.3e %10.3e %8.4f %8.4f %9.2e %8.3g|%-8.3g %7lld\n",
                differential::scenario_name(run.scenario).c_str(), early.v.bias, end.v.bias, end.v.rms, end.m.rms,
                end.theta.rms, t.v_zero_fraction, t.m_zero_fraction, t.step_over_5lr_fraction, t.max_step_over_lr,
                t.reference_max_step_over_lr, static_cast<long long>(end.gated_to_zero));
    if (run.tensors.size() < 2) continue;
    for (std::size_t k = 0; k < run.tensors.size(); ++k) {
      const differential::TrapSummary& p = end.tensors[k].trap;
      char label[64];
      std::snprintf(label, sizeof label, "  tensor %zu (%zu elements)", k, run.tensors[k]);
      std::printf("%-58s %53s %8.4f %8.4f %9.2e %8.3g|%-8.3g\n", label, "", p.v_zero_fraction, p.m_zero_fraction,
                  p.step_over_5lr_fraction, p.max_step_over_lr, p.reference_max_step_over_lr);
    }
  }
}

// `value` as nlohmann's dump(2) writes it at `depth` levels of indentation, so that pieces written one at a time
// read as one dump(2) of the whole.
void put_json(std::ostream& out, const nlohmann::json& value, std::size_t depth) {
  const std::string text = value.dump(2);
  const std::string indent(2 * depth, ' ');
  for (const char c : text) {
    out << c;
    if (c == '\n') out << indent;
  }
}

// Every logged sample, written as it is formed -- the text of one dump(2) of the study, keys in nlohmann::json's
// order -- so that memory holds one tensor's entry at a time: a DOM of the whole study took ~5 KB per tensor and
// sample (300 000 tensors logged 12 times: 20 GB).
void print_json(const std::vector<differential::NoiseRun>& runs, unsigned bits) {
  std::ostream& out = std::cout;
  out << "{\n  \"precision_bits\": " << bits << ",\n  \"runs\": [";
  for (std::size_t r = 0; r < runs.size(); ++r) {
    const differential::NoiseRun& run = runs[r];
    out << (r ? "," : "") << "\n    {\n      \"samples\": [";
    for (std::size_t k = 0; k < run.samples.size(); ++k) {
      const differential::NoiseSample& s = run.samples[k];
      out << (k ? "," : "") << "\n        {\n          \"gated_to_zero\": " << s.gated_to_zero
          << ",\n          \"m\": ";
      put_json(out, summary_json(s.m), 5);
      out << ",\n          \"step\": " << s.step << ",\n          \"tensors\": [";
      for (std::size_t t = 0; t < s.tensors.size(); ++t) {
        out << (t ? "," : "") << "\n            ";
        put_json(out, tensor_json(run, s, t), 6);
      }
      out << (s.tensors.empty() ? "]" : "\n          ]") << ",\n          \"theta\": ";
      put_json(out, summary_json(s.theta), 5);
      out << ",\n          \"trap\": ";
      put_json(out, trap_json(s.trap), 5);
      out << ",\n          \"v\": ";
      put_json(out, summary_json(s.v), 5);
      out << "\n        }";
    }
    out << "\n      ],\n      \"scenario\": ";
    put_json(out, differential::scenario_name(run.scenario), 3);
    out << "\n    }";
  }
  out << (runs.empty() ? "]" : "\n  ]") << "\n}\n";
}

void run_noise(const NoiseOptions& o) {
  // 128 bits by default: the reference's own error after 10^4 steps (≈ 10^4 · 15 roundings of 2^-128) is
  // ~2^-110 relative, 2^100 below bf16's and q8's; 256 bits would double the MPFR cost for nothing.
  const unsigned bits = apply_precision(o.precision == 0 ? 128 : o.precision);
  if (o.json && o.csv) throw core::InputError("noise: choose one of --json and --csv");
  if (!o.plot_dir.empty()) check_plot_target(std::filesystem::path(o.plot_dir) / "noise_v_rms.png");
  std::shared_ptr<const differential::PseudoGradientStream> stream;
  if (!o.stream.empty()) {
    io::InputFile in(o.stream);  // the one rule for inputs (cli_support.hpp): files, pipes, FIFOs with a writer
    refuse_standard_output_onto(in, o.stream);
    stream =
        std::make_shared<const differential::PseudoGradientStream>(differential::read_stream(in.stream(), o.stream));
  }
  std::vector<differential::NoiseScenario> scenarios;
  for (const auto& optimizer : o.optimizers) {
    for (const auto& state : o.states) {
      for (const auto& semantics : o.semantics) {
        for (const auto& v_map : o.v_maps) {
          for (const auto& rounding : o.roundings) {
            for (const auto& delays : o.delays) {
              for (const auto seed : o.seeds) {
                differential::NoiseScenario s;
                differential::parse_study_optimizer(optimizer, s);
                s.state = fastpath::parse_state_format(state);
                s.q8_semantics = fastpath::parse_q8_semantics(semantics);
                s.v_map = fastpath::parse_v_map(v_map);
                // The v map is a q8 second moment's (noise studies the Adam family only): a scenario of fp32 or bf16
                // state ignores it and runs once, as `simulate` runs such a grid point (simulate/src/sweep_grid.cpp).
                if (s.state != fastpath::StateFormat::q8) {
                  if (&v_map != &o.v_maps.front()) continue;
                  s.v_map = fastpath::VMap::dynamic;
                }
                s.min_q8_size = o.min_q8_size;
                s.rounding = fastpath::parse_rounding(rounding);
                s.delays = delays;
                s.seed = seed;
                s.size = o.size;
                s.steps = o.steps;
                s.log_every = o.log_every;
                s.scale_range = o.scale_range;
                s.zero_fraction = o.zero_fraction;
                s.stream = stream;
                s.stream_name = o.stream;
                validate(s);
                scenarios.push_back(s);
              }
            }
          }
        }
      }
    }
  }
  // A zero-free map that no scenario reads is a mistake, not a setting (as `simulate --v-map zero-free` without q8).
  const bool zero_free_asked = std::any_of(o.v_maps.begin(), o.v_maps.end(), [](const std::string& v) {
    return fastpath::parse_v_map(v) == fastpath::VMap::zero_free;
  });
  if (zero_free_asked && std::none_of(scenarios.begin(), scenarios.end(), [](const differential::NoiseScenario& s) {
        return s.v_map == fastpath::VMap::zero_free;
      })) {
    throw core::InputError("v map zero-free is a map of q8 second moments: it needs q8 in --state");
  }
  differential::check_memory(scenarios);
  std::vector<differential::NoiseRun> runs;
  {
    ProgressBar bar("noise");
    const long steps = stream ? static_cast<long>(stream->events.size()) : static_cast<long>(o.steps);
    const long total = static_cast<long>(scenarios.size()) * steps;
    for (std::size_t k = 0; k < scenarios.size(); ++k) {
      const long before = static_cast<long>(k) * steps;
      runs.push_back(
          differential::run_lockstep(scenarios[k], [&](long done, long) { bar.update(before + done, total); }));
    }
  }
  if (o.json) {
    print_json(runs, bits);
  } else if (o.csv) {
    write_noise_samples_csv(std::cout, runs);
  } else {
    print_table(runs, bits);
  }
  if (!o.plot_dir.empty()) {
    const NoisePlots plots = noise_plots(runs);
    plot_png(std::filesystem::path(o.plot_dir) / "noise_v_rms.png", plots.v_rms);
    plot_png(std::filesystem::path(o.plot_dir) / "noise_v_bias.png", plots.v_bias);
  }
}

}  // namespace

void add_noise_command(CLI::App& app) {
  auto o = std::make_shared<NoiseOptions>();
  CLI::App* command =
      app.add_subcommand("noise", "Second-moment rounding noise: fast path vs MPFR reference in lockstep");
  command->add_option("--optimizers", o->optimizers, "cgad, cgad-skip, adam-decay, adam (comma list)")
      ->delimiter(',')
      ->capture_default_str();
  command->add_option("--state", o->states, "q8, bf16, fp32 (comma list)")->delimiter(',')->capture_default_str();
  command->add_option("--q8-semantics", o->semantics, "cgad, bnb (comma list; bnb: bitsandbytes' 8-bit Adam)")
      ->delimiter(',')
      ->capture_default_str();
  command
      ->add_option("--v-map", o->v_maps,
                   "q8 second moments' map: dynamic (bitsandbytes', with a 0), zero-free (DE-0: no 0) (comma list)")
      ->delimiter(',')
      ->capture_default_str();
  command->add_option("--min-q8-size", o->min_q8_size,
                      "tensors under this many elements keep fp32 state (default 4096 with bnb, 0 with cgad)");
  command->add_option("--scale-range", o->scale_range, "R: per-element magnitudes log-uniform over [1/R, 1]")
      ->capture_default_str();
  command->add_option("--zero-fraction", o->zero_fraction, "share of exact zeros in each event")->capture_default_str();
  command->add_option("--stream", o->stream, "a recorded stream (replay JSONL) instead of the synthetic one");
  command->add_option("--rounding", o->roundings, "nearest, stochastic (comma list)")
      ->delimiter(',')
      ->capture_default_str();
  command->add_option("--delays", o->delays, "paper (tau in {0,1,2,4,8,16}), heavy (30% Pareto tail past tau_cut)")
      ->delimiter(',')
      ->capture_default_str();
  command->add_option("--seeds", o->seeds, "stream seeds (comma list)")->delimiter(',')->capture_default_str();
  command->add_option("--size", o->size, "parameters per model")->capture_default_str();
  command->add_option("--steps", o->steps, "outer steps per scenario")->capture_default_str();
  command->add_option("--log-every", o->log_every, "steps between logged samples")->capture_default_str();
  command->add_flag("--json", o->json, "every logged sample as JSON");
  command->add_flag("--csv", o->csv, "every logged sample as CSV");
  command->add_option("--plot-dir", o->plot_dir, "write noise_v_rms.png and noise_v_bias.png into this directory");
  command->add_option("--precision", o->precision, "MPFR bits of the reference (default 128)")
      ->check(at_most(reference::kMaxPrecisionBits, "bits"));
  command->callback([o] { run_noise(*o); });
}

}  // namespace cgad::cli
