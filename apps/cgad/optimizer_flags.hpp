#pragma once
// The command-line flags of the optimizer and fast-path options (core/optimizer_options.hpp,
// fastpath/options.hpp), registered once on a CLI11 command for every command that runs an outer optimizer.
#include "cli_support.hpp"

#include "cgad/core/optimizer_options.hpp"
#include "cgad/fastpath/options.hpp"

#include <CLI/CLI.hpp>

#include <vector>

namespace cgad::cli {

void add_optimizer_options(CLI::App& command, core::OptimizerOptions& options);

// Registers --params --state --rounding --seed --device --q8-semantics --v-map --min-q8-size --q8-maps; returns them,
// so a caller can refuse them where they would be silently ignored (the reference backend). The file --q8-maps
// names is read as the option is parsed, and its identity added to `inputs`, which the command's outputs may not
// name (cli_support.hpp, refuse_output_onto_inputs).
std::vector<CLI::Option*> add_fastpath_options(CLI::App& command, fastpath::FastpathOptions& options,
                                               std::vector<InputIdentity>& inputs);

}  // namespace cgad::cli
