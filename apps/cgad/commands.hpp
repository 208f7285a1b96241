#pragma once
// Every subcommand of `cgad` registers itself on the top-level app through one of these; each lives in
// its own cmd_<name>.cpp.
#include <CLI/CLI.hpp>

namespace cgad::cli {

void add_gate_command(CLI::App& app);
void add_bound_command(CLI::App& app);
void add_verify_bound_command(CLI::App& app);
void add_replay_command(CLI::App& app);
void add_report_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_codebook_command(CLI::App& app);
void add_noise_command(CLI::App& app);
void add_simulate_command(CLI::App& app);
void add_merge_command(CLI::App& app);

}  // namespace cgad::cli
