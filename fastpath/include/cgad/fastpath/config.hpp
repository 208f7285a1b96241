#pragma once
// How a fast-path optimizer stores and rounds, and which update it runs. The hyperparameter structs and
// their validation are core's (cgad::core, shared with the reference), instantiated in float: the fast path runs on
// exactly these float values, and a differential test feeds the same values to the MPFR reference. The gate's
// α and τ_cut are doubles, the user's own: σ(τ) is computed from them on the host (detail/staleness.hpp), so it is the
// float nearest the reference's σ(τ), which a float α (0.2f = 0.200000003) would move by an ulp at some τ.
#include "cgad/fastpath/formats.hpp"
#include "cgad/core/hyperparams.hpp"
#include "cgad/core/optimizer_config.hpp"
#include "cgad/core/step_report.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace cgad::fastpath {

// Applies to every narrowing store of a step: bf16 parameters, bf16 state, q8 state.
enum class Rounding { nearest, stochastic };
// Whose 8-bit Adam the q8 state (and, for bnb, the fp32 state) follows (docs/design.md §5):
//   cgad — cgad's own: exact nearest code (ties to the lower), the Adam term taken as 0 where v decodes to 0,
//          the reference's operation order; what the differential bounds are proved for.
//   bnb  — bitsandbytes' Adam kernels formula by formula (element_update.hpp lists the release, the kernels
//          and every deviation): kOptimizerStatic8bit2StateBlockwise for q8 tensors, kOptimizer32bit2State for
//          fp32 state (tensors under min_q8_size, or state = fp32 throughout). Adam family only, nearest
//          rounding only (bnb's kernels have no stochastic rounding), no bf16 state (bnb has none).
enum class Q8Semantics { cgad, bnb };
// The second moment's 8-bit map (q8_maps.hpp says which codes each holds):
//   dynamic   — bitsandbytes' unsigned dynamic map, whose code 0 is 0.0: a v below about 1.6·10^-7 of its block's
//               absmax is stored as 0 (the v-zero trap, docs/results/noise.md);
//   zero_free — the same map with its 0 replaced by its smallest positive code (Li, Chen & Zhu's DE-0), so a v
//               decodes to 0 only in a block whose absmax is 0.
// Either works with either q8 semantics; m keeps the signed dynamic map.
enum class VMap { dynamic, zero_free };

// The codes of the two q8 maps, given at run time instead of the built-in ones (q8_maps.hpp, docs/design.md §5): the
// signed map (first moments, Nesterov's momentum) and the unsigned one (second moments), 256 floats each, e.g. the
// maps the user's bitsandbytes install builds (its torch.linspace's last bits depend on the machine). validate()
// takes what bitsandbytes' create_dynamic_map gives: finite, strictly increasing, the signed map's code 127 +0, the
// unsigned map's code 0 +0, both ending at 1. The zero-free v map is made of the unsigned codes given as of the
// built-in ones (code 0 takes code 1's value); both nearest-code rules derive their thresholds from the codes.
inline constexpr std::size_t kQ8MapCodes = 256;
struct Q8Codes {
  std::array<float, kQ8MapCodes> signed_codes{}, unsigned_codes{};
};

// What one step of either backend reports: applied or why not, the first refused element, the staleness and σ.
using StepReport = core::StepReport<float>;

// The optimizer and its hyperparameters are core's OptimizerConfig (shared with the reference and the option parser,
// core/optimizer_options.hpp), in float with the gate in double; the rest says how the fast path stores and rounds.
// buffer (Delayed Nesterov's N) is unused: validate() refuses delayed-nesterov.
struct StepConfig : core::OptimizerConfig<float, double> {
  ParamFormat params = ParamFormat::bf16;
  StateFormat state = StateFormat::fp32;
  Rounding rounding = Rounding::nearest;
  std::uint64_t seed = 0;  // keys stochastic rounding (with the step number and the element index)
  Q8Semantics q8_semantics = Q8Semantics::cgad;
  VMap v_map = VMap::dynamic;  // q8 state of the Adam family only (validate refuses it elsewhere)
  // With q8 state, a tensor of fewer elements keeps fp32 state (bitsandbytes' min_8bit_size). Unset: 4096 (bnb's
  // default) with bnb semantics, 0 with cgad's.
  std::optional<std::size_t> min_q8_size;
  // The q8 maps' codes (see Q8Codes); unset: the built-in maps (q8_maps.hpp), machine-independent.
  std::optional<Q8Codes> q8_codes;
  // The decimals the user wrote for β1 and β2, where the caller has them (fastpath_step_config, options.hpp: `cgad
  // replay`, cgad.torch). cgad semantics forms 1 − β and the bias corrections' β^t from the decimal β means, not from
  // the float nearest it (beta_decimals, derived_constants.hpp); unset, the decimal is the shortest one that reads
  // back to adam.beta1 (adam.beta2). Each must read back to its float (validate). The momentum's decimal likewise:
  // the β rule (core/optimizer_options.hpp, parse_beta) is checked on it, so 0.999999999 (float 1.0f) is taken.
  std::optional<std::string> beta1_decimal, beta2_decimal, momentum_decimal;
};

// The decimals β1, β2 and the momentum stand for: beta1_decimal, beta2_decimal and momentum_decimal where set, else
// the shortest decimal that reads back to the float (core::to_decimal): 0.999f is taken as 0.999, as the user who
// wrote it meant.
struct BetaDecimals {
  std::string beta1, beta2, momentum;
};
BetaDecimals beta_decimals(const StepConfig& config);

// PA-CGAD's largest τ_cut in the fast path: σ is tabulated over the ages below it (step_schedule.hpp), 4 MiB at most.
inline constexpr double kMaxPaCgadTauCut = 1u << 20;

// The min_q8_size in force (see StepConfig).
std::size_t effective_min_q8_size(const StepConfig& config);

// The reference's gate for this optimizer (cosine, exponential or none), in Real.
template <core::RealScalar Real>
core::GateParams<Real> gate_params(const StepConfig& config) {
  const core::GateParams<double> gate = core::gate_of(config);
  return core::GateParams<Real>{gate.kind, Real(gate.alpha), Real(gate.tau_cut)};
}

// The reference optimizer configuration with exactly this configuration's hyperparameters (the float ones and the
// double α and τ_cut, converted exactly into mpfr_real or double; β1, β2 and the momentum parsed from their decimals,
// so that the reference's 1 − β is that of the decimal, as the fast path's is): what a differential run or the noise
// study feeds the reference, so that the only differences left are the fast path's roundings.
template <core::RealScalar Real>
core::OptimizerConfig<Real> reference_config(const StepConfig& config) {
  core::OptimizerConfig<Real> r;
  r.optimizer = config.optimizer;
  const BetaDecimals betas = beta_decimals(config);
  r.adam = {Real(config.adam.lr), core::parse_real<Real>(betas.beta1, "beta1"),
            core::parse_real<Real>(betas.beta2, "beta2"), Real(config.adam.eps), Real(config.adam.weight_decay)};
  r.nesterov = {Real(config.nesterov.lr), core::parse_real<Real>(betas.momentum, "momentum")};
  r.alpha = Real(config.alpha);
  r.tau_cut = Real(config.tau_cut);
  r.on_zero_gate = config.on_zero_gate;
  r.buffer = config.buffer;
  r.fragments = config.fragments;
  return r;
}

// Throws core::InputError for an unsupported optimizer (delayed-nesterov), invalid hyperparameters or
// gate, fragments on an optimizer other than PA-CGAD, P ≥ τ_cut for PA-CGAD, bnb semantics where bnb has no
// such kernel (see Q8Semantics), the zero-free v map without a q8 second moment (fp32 or bf16 state, Nesterov), or a
// beta1_decimal (beta2_decimal, momentum_decimal) that is not a decimal reading back to its float, a β the semantics
// cannot represent (the β rule, core/optimizer_options.hpp: cgad semantics takes 1 − β of the decimal, bnb semantics
// 1.0f − β, refused where it is 0, quoting the decimal), or q8_codes that are
// not maps of the shape Q8Codes describes.
void validate(const StepConfig& config);

std::string_view to_string(ParamFormat format);
std::string_view to_string(StateFormat format);
std::string_view to_string(Rounding rounding);
std::string_view to_string(Q8Semantics semantics);
std::string_view to_string(VMap map);  // "dynamic", "zero-free"
// Parse the command-line spellings ("fp32", "bf16", "q8", "nearest", "stochastic"); InputError otherwise.
ParamFormat parse_param_format(std::string_view text);
StateFormat parse_state_format(std::string_view text);
Rounding parse_rounding(std::string_view text);
Q8Semantics parse_q8_semantics(std::string_view text);
VMap parse_v_map(std::string_view text);

}  // namespace cgad::fastpath
