#pragma once
// The command-line flags of the optimizer and fast-path options (core/optimizer_options.hpp,
// fastpath/options.hpp), registered once on a CLI11 command for every command that runs an outer optimizer.
#include "cgad/core/optimizer_options.hpp"
#include "cgad/fastpath/options.hpp"

#include <CLI/CLI.hpp>

#include <vector>

namespace cgad::cli {

void add_optimizer_options(CLI::App& command, core::OptimizerOptions& options);

// Registers --params --state --rounding --seed --device --q8-semantics --v-map --min-q8-size; returns them, so a caller
// can refuse them where they would be silently ignored (the reference backend).
std::vector<CLI::Option*> add_fastpath_options(CLI::App& command, fastpath::FastpathOptions& options);

}  // namespace cgad::cli
