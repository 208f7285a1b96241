// Multi-step drift: the fast path and the MPFR reference in lockstep for 300 events without re-syncing
// (bitsandbytes' tests re-sync after every step and so only ever see one-step error; docs/design.md §9), on the
// noise study's narrow stream (differential/noise_lockstep.hpp with --scale-range 64: per-element scales over
// 2^-6 … 1, heavy-tailed delays with 7.5 % of events past τ_cut), for every Adam-family optimizer and every
// format, q8 and fp32 state also in bitsandbytes' semantics. (On the study's default wide stream q8 state falls
// into the v-zero trap and drifts by 10^4 η legitimately: differential_noise_test covers that.) Reported per
// configuration: θ's max and RMS error in ulps of its format at the reference value, v's in ulps (fp32,
// bf16) or in code gaps × block absmax (q8), and the worst element as hexfloat. Asserted: every value the
// fast path holds stays finite, and θ's drift stays under 1 000 lr-sized steps (the measured worst is printed;
// a broken update — a wrong sign, a dropped bias correction — moves θ by about η per step, 300η in all, or
// makes it blow up, which this catches without tuning a threshold to the present error).
#include "cgad/differential/noise_lockstep.hpp"

#include "support/differential_bounds.hpp"

#include "cgad/fastpath/detail/q8_maps.hpp"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdio>

namespace cgad::proptests {
namespace {

using fastpath::ParamFormat;
using fastpath::Rounding;
using fastpath::StateFormat;

double fp32_ulp(double x) {
  const float f = static_cast<float>(std::fabs(x));
  return static_cast<double>(std::nextafter(f, INFINITY)) - f;
}

struct Worst {
  double max = 0, sum_sq = 0;
  std::size_t at = 0, count = 0;
  void add(std::size_t i, double units) {
    if (units > max || count == 0) {
      max = std::max(max, units);
      at = i;
    }
    sum_sq += units * units;
    ++count;
  }
  double rms() const { return count ? std::sqrt(sum_sq / static_cast<double>(count)) : 0; }
};

TEST(DifferentialDrift, ThreeHundredEventsWithoutResyncEveryFormat) {
  reference::set_working_precision_bits(128);
  const auto& unsigned_map = fastpath::dynamic_map(fastpath::Q8MapKind::unsigned_map);
  std::printf("%-44s %22s %22s %10s  worst theta / worst v (fast, ref)\n", "scenario", "theta max/RMS (ulps)",
              "v max/RMS (ulps|gaps)", "th rms/lr");
  for (const std::string optimizer : {"cgad", "cgad-skip", "adam-decay", "adam"}) {
    for (const ParamFormat params : {ParamFormat::fp32, ParamFormat::bf16}) {
      for (const StateFormat state : {StateFormat::fp32, StateFormat::bf16, StateFormat::q8}) {
        for (const auto& [rounding, semantics] : {std::pair{Rounding::nearest, fastpath::Q8Semantics::cgad},
                                                  std::pair{Rounding::stochastic, fastpath::Q8Semantics::cgad},
                                                  std::pair{Rounding::nearest, fastpath::Q8Semantics::bnb}}) {
          if (semantics == fastpath::Q8Semantics::bnb && state == StateFormat::bf16) continue;  // bnb has no bf16 state
          differential::NoiseScenario s;
          differential::parse_study_optimizer(optimizer, s);
          s.params = params;
          s.state = state;
          s.rounding = rounding;
          s.q8_semantics = semantics;
          s.min_q8_size = 0;  // one 257-element tensor: keep it in 8-bit state under bnb semantics too
          s.scale_range = 64;
          s.size = 257;
          s.steps = 300;
          s.log_every = 300;
          const differential::NoiseRun run = differential::run_lockstep(s, [](long, long) {});
          const auto& f = run.last;
          Worst theta, v;
          for (std::size_t i = 0; i < f.theta_fast.size(); ++i) {
            ASSERT_TRUE(std::isfinite(f.theta_fast[i]) && std::isfinite(f.m_fast[i]) && std::isfinite(f.v_fast[i]))
                << differential::scenario_name(s) << std::hexfloat << " element " << i << " theta " << f.theta_fast[i]
                << " m " << f.m_fast[i] << " v " << f.v_fast[i];
            const double theta_unit =
                params == ParamFormat::bf16 ? bf16_spacing(std::fabs(f.theta_ref[i])) : fp32_ulp(f.theta_ref[i]);
            theta.add(i, std::fabs(f.theta_fast[i] - f.theta_ref[i]) / theta_unit);
            double v_unit = fp32_ulp(f.v_ref[i]);
            if (state == StateFormat::bf16) v_unit = bf16_spacing(f.v_ref[i]);
            if (state == StateFormat::q8) {
              // The block's absmax is its largest dequantized v (that element holds the code 1.0 exactly).
              const std::size_t b0 = i / fastpath::kQ8BlockSize * fastpath::kQ8BlockSize;
              double absmax = 0;
              for (std::size_t j = b0; j < std::min(b0 + fastpath::kQ8BlockSize, f.v_fast.size()); ++j)
                absmax = std::max(absmax, f.v_fast[j]);
              v_unit = absmax * max_code_gap(unsigned_map, f.v_ref[i] / absmax, f.v_ref[i] / absmax);
            }
            if (v_unit > 0) v.add(i, std::fabs(f.v_fast[i] - f.v_ref[i]) / v_unit);
          }
          const double drift = run.samples.back().theta.max_abs;
          EXPECT_LT(drift, 1000.0) << differential::scenario_name(s);
          std::printf("%-44s %10.4g/%-11.4g %10.4g/%-11.4g %10.4g  [%zu] %a vs %a / [%zu] %a vs %a\n",
                      differential::scenario_name(s).c_str(), theta.max, theta.rms(), v.max, v.rms(),
                      run.samples.back().theta.rms, theta.at, f.theta_fast[theta.at], f.theta_ref[theta.at], v.at,
                      f.v_fast[v.at], f.v_ref[v.at]);
        }
      }
    }
  }
}

}  // namespace
}  // namespace cgad::proptests
