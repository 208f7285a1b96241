#pragma once
// Every subcommand of `cgad` registers itself on the top-level app through one of these; each lives in
// its own cmd_<name>.cpp.
#include <CLI/CLI.hpp>

namespace cgad::cli {

void add_gate_command(CLI::App& app);

}  // namespace cgad::cli
