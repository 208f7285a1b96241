#pragma once
// A fast-path configuration from options as a user wrote them -- the `cgad` command's flags (`cgad replay
// --backend fastpath`, `cgad simulate`), the Python package's keyword arguments (cgad.torch) -- by one route, so
// every entry point takes and refuses the same: the optimizer's options (core/optimizer_options.hpp) parsed to
// float, the gate's α and τ_cut to double, then the formats and the semantics, and validate().
#include "cgad/fastpath/config.hpp"
#include "cgad/core/optimizer_options.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace cgad::fastpath {

// How the fast path stores and rounds, as text (the command's --params, --state, ... and their defaults).
struct FastpathOptions {
  std::string params = "bf16";
  std::string state = "fp32";
  std::string rounding = "nearest";
  std::uint64_t seed = 0;
  std::string device = "cpu";
  std::string q8_semantics = "cgad";
  std::string v_map = "dynamic";
  std::optional<std::size_t> min_q8_size;
  std::optional<Q8Codes> q8_codes;  // the q8 maps' codes, as data (StepConfig::q8_codes); unset: the built-in ones
};

// The optimizer and its hyperparameters as the fast path takes them: each parsed straight to float (one correct
// rounding), as the step uses them, but the gate's α and τ_cut to double (the fast path computes σ from them,
// fastpath/detail/staleness.hpp), and β1 and β2 also kept as the decimals written (1 − β is rounded from them,
// fastpath/detail/derived_constants.hpp). Formats, rounding and seed are left at their defaults for the caller.
StepConfig fastpath_step_config(const core::OptimizerOptions& options);

// The options as a StepConfig's formats (and the semantics), over `config`'s optimizer; InputError if invalid.
void apply_fastpath_options(const FastpathOptions& options, StepConfig& config);

// Both: the whole configuration, validated.
StepConfig step_config(const core::OptimizerOptions& optimizer, const FastpathOptions& options);

}  // namespace cgad::fastpath
