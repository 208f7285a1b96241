// The sweep layer of `cgad simulate` (simulate/sweep.hpp, sweep_json.hpp): per-cell statistics against values
// worked out by hand, the run numbering and its shards, refusals of bad grids, exact JSON round trips, and
// merging of parts.
#include <gtest/gtest.h>

#include "cgad/core/errors.hpp"
#include "cgad/simulate/objectives.hpp"
#include "cgad/simulate/sweep_json.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <optional>
#include <set>
#include <tuple>
#include <fstream>
#include <future>
#include <system_error>
#include <thread>

#include <sched.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

using namespace cgad::simulate;
using cgad::core::InputError;
using cgad::fastpath::StateFormat;

RunRecord finished(const SweepGrid& grid, std::size_t index, double loss) {
  RunRecord r;
  r.index = index;
  r.key = run_key(grid, index);
  r.status = RunStatus::finished;
  r.result.final_loss = loss;
  return r;
}

RunRecord diverged(const SweepGrid& grid, std::size_t index) {
  RunRecord r = finished(grid, index, std::numeric_limits<double>::infinity());
  r.status = RunStatus::diverged;
  r.result.diverged = true;
  return r;
}

// One method, six τ cells of three seeds each; the records are written by hand per test.
SweepGrid six_cells() {
  SweepGrid grid;
  grid.methods = {"cgad"};
  grid.taus = {0, 1, 2, 3, 4, 5};
  grid.sizes = {8};
  grid.states = {StateFormat::fp32};
  grid.seeds = {1, 2, 3};
  return grid;
}

TEST(SimulateSweepSummary, MeanSigmaAndRiskOverTheFinishedSeeds) {
  const SweepGrid grid = six_cells();
  std::vector<RunRecord> records{
      // τ 0: 1, 3, 5 — every operation exact: mean 3, deviations −2, 0, 2, Σ = 8, σ = sqrt(8/2) = 2, risk 5.
      finished(grid, 0, 1.0), finished(grid, 1, 3.0), finished(grid, 2, 5.0),
      // τ 1: 1, 2, 4 — mean 7/3, Σ(x − mean)² = (16 + 1 + 25)/9 = 14/3, σ = sqrt(7/3).
      finished(grid, 3, 1.0), finished(grid, 4, 2.0), finished(grid, 5, 4.0),
      // τ 2: one diverged (loss +∞) is excluded: mean of 2.5 and 0.5 = 1.5, σ = sqrt(2), not ∞.
      finished(grid, 6, 2.5), diverged(grid, 7), finished(grid, 8, 0.5),
      // τ 3: one seed left: a mean, no σ and no risk.
      diverged(grid, 9), finished(grid, 10, 0.25), diverged(grid, 11),
      // τ 4: all diverged.
      diverged(grid, 12), diverged(grid, 13), diverged(grid, 14),
      // τ 5: two records only (a partial merge).
      finished(grid, 15, 1.0), finished(grid, 17, 2.0)};
  const std::vector<CellSummary> cells = summarize(grid, records);
  ASSERT_EQ(cells.size(), 6u);

  EXPECT_EQ(*cells[0].mean, 3.0);
  EXPECT_EQ(*cells[0].stddev, 2.0);
  EXPECT_EQ(*cells[0].risk, 5.0);
  EXPECT_EQ(cells[0].finished, 3u);
  EXPECT_EQ(cell_note(cells[0]), "");

  // 7/3 and sqrt(7/3) go through ~10 double roundings (sum, division, three squared deviations, sum, division,
  // square root), each ≤ 2^-53 relative: 16 ulps is a safe bound for the composition.
  const double mean = 7.0 / 3.0, sigma = std::sqrt(7.0 / 3.0);
  EXPECT_NEAR(*cells[1].mean, mean, 16 * std::numeric_limits<double>::epsilon() * mean);
  EXPECT_NEAR(*cells[1].stddev, sigma, 16 * std::numeric_limits<double>::epsilon() * sigma);
  EXPECT_NEAR(*cells[1].risk, mean + sigma, 32 * std::numeric_limits<double>::epsilon() * (mean + sigma));

  EXPECT_EQ(cells[2].diverged, 1u);
  EXPECT_EQ(cells[2].finished, 2u);
  EXPECT_EQ(*cells[2].mean, 1.5);
  EXPECT_EQ(*cells[2].stddev, std::sqrt(2.0));  // deviations ±1 exactly, Σ = 2, /1, one rounded sqrt
  EXPECT_EQ(*cells[2].risk, 1.5 + std::sqrt(2.0));
  // The survivors' statistics must not pass for the method's: the note says how many seeds they leave out.
  EXPECT_EQ(cell_note(cells[2]), "1 of 3 diverged; statistics over the 2 finished");

  EXPECT_EQ(*cells[3].mean, 0.25);
  EXPECT_FALSE(cells[3].stddev);
  EXPECT_FALSE(cells[3].risk);
  EXPECT_NE(cell_note(cells[3]).find("one seed finished: no sigma"), std::string::npos) << cell_note(cells[3]);
  EXPECT_NE(cell_note(cells[3]).find("2 of 3 diverged"), std::string::npos) << cell_note(cells[3]);

  EXPECT_FALSE(cells[4].mean);
  EXPECT_FALSE(cells[4].stddev);
  EXPECT_EQ(cells[4].diverged, 3u);
  EXPECT_NE(cell_note(cells[4]).find("all 3 diverged"), std::string::npos) << cell_note(cells[4]);

  EXPECT_EQ(cells[5].present, 2u);
  EXPECT_EQ(cells[5].runs, 3u);
  EXPECT_EQ(*cells[5].mean, 1.5);
  EXPECT_NE(cell_note(cells[5]).find("incomplete: 1 of 3 runs missing"), std::string::npos) << cell_note(cells[5]);
}

TEST(SimulateSweepSummary, UnsupportedCellsSayWhy) {
  SweepGrid grid = six_cells();
  RunRecord r;
  r.index = 0;
  r.key = run_key(grid, 0);
  r.status = RunStatus::unsupported;
  r.unsupported_reason = "delayed-nesterov needs fp32 state";
  const std::vector<RunRecord> records{r};
  const CellSummary cell = summarize(grid, records).front();
  EXPECT_EQ(cell.unsupported, 1u);
  EXPECT_FALSE(cell.mean);
  EXPECT_NE(cell_note(cell).find("unsupported: delayed-nesterov needs fp32 state"), std::string::npos);
}

SweepGrid wide_grid() {
  SweepGrid grid;
  grid.methods = {"cgad", "nesterov"};
  grid.taus = {0, 4, 16};
  grid.sizes = {8, 16};
  grid.states = {StateFormat::fp32, StateFormat::q8};
  grid.seeds = {7, 8, 9};
  grid.base.rounds = 20;  // past τ = 16, so that constant delays (nothing arrives for τ rounds) have arrivals
  return grid;
}

TEST(SimulateSweepGrid, EveryCombinationOnceSeedFastest) {
  const SweepGrid grid = wide_grid();
  ASSERT_EQ(run_count(grid), 2u * 3 * 2 * 2 * 3);
  std::set<std::tuple<std::string, long, std::size_t, StateFormat, std::uint64_t>> seen;
  for (std::size_t i = 0; i < run_count(grid); ++i) {
    const RunKey k = run_key(grid, i);
    seen.insert({k.method, k.tau, k.size, k.state, k.seed});
  }
  EXPECT_EQ(seen.size(), run_count(grid));
  EXPECT_EQ(run_key(grid, 0).seed, 7u);
  EXPECT_EQ(run_key(grid, 1).seed, 8u);
  EXPECT_EQ(run_key(grid, 3).state, StateFormat::q8);
  EXPECT_EQ(run_key(grid, 6).size, 16u);
  EXPECT_EQ(run_key(grid, 12).tau, 4);
  EXPECT_EQ(run_key(grid, 36).method, "nesterov");
  EXPECT_THROW(run_key(grid, run_count(grid)), std::out_of_range);
  // The axes reach the spec; a method that is not PA-CGAD runs with one fragment whatever base says.
  SweepGrid pa = grid;
  pa.methods = {"pa-cgad", "cgad", "delayed-nesterov"};
  pa.base.outer.fragments = 4;
  const SimulationSpec s = run_spec(pa, run_key(pa, 5));
  EXPECT_EQ(s.outer.optimizer, cgad::core::OptimizerKind::pa_cgad);
  EXPECT_EQ(s.outer.fragments, 4u);
  EXPECT_EQ(s.seed, 9u);
  EXPECT_EQ(s.outer.seed, 9u);  // stochastic rounding keyed by the run seed too
  EXPECT_EQ(s.outer.state, StateFormat::q8);
  EXPECT_EQ(run_spec(pa, run_key(pa, 36)).outer.fragments, 1u);
  EXPECT_TRUE(run_spec(pa, run_key(pa, 72)).delayed_nesterov);
}

TEST(SimulateSweepGrid, ShardsAreDisjointAndCoverTheSweep) {
  const SweepGrid grid = wide_grid();
  for (std::size_t count : {1u, 2u, 3u, 5u, 7u, 72u, 100u}) {
    std::vector<int> held(run_count(grid), 0);
    for (std::size_t index = 0; index < count; ++index) {
      const auto runs = shard_runs(grid, {index, count});
      EXPECT_TRUE(std::is_sorted(runs.begin(), runs.end()));
      for (std::size_t run : runs) {
        EXPECT_EQ(run % count, index);
        ++held.at(run);
      }
    }
    for (std::size_t run = 0; run < held.size(); ++run) EXPECT_EQ(held[run], 1) << "run " << run << " of " << count;
  }
}

TEST(SimulateSweepGrid, ParsesAndRefusesShards) {
  EXPECT_EQ(parse_shard("1/2").index, 1u);
  EXPECT_EQ(parse_shard("1/2").count, 2u);
  EXPECT_EQ(parse_shard("0/1").count, 1u);
  for (const char* bad : {"2/2", "0/0", "a/2", "1", "-1/2", "1/2x", "", "/2", "1/", " 1/2"}) {
    EXPECT_THROW(parse_shard(bad), InputError) << bad;
  }
}

TEST(SimulateSweepGrid, RefusesBadGridsAndRecordsUnsupportedCombinations) {
  const auto refused = [](SweepGrid grid, const std::string& fragment) {
    try {
      validate(grid);
      ADD_FAILURE() << "accepted; wanted a refusal with '" << fragment << "'";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  SweepGrid g = wide_grid();
  g.methods.clear();
  refused(g, "method list is empty");
  g = wide_grid();
  g.taus = {4, 4};
  refused(g, "repeats");
  g = wide_grid();
  g.methods = {"cgad", "lion"};
  refused(g, "unknown optimizer 'lion'");
  g = wide_grid();
  g.taus = {-1};
  refused(g, "tau must be >= 0");
  g = wide_grid();
  g.base.workers = 0;
  refused(g, "no run of this sweep can run");  // bad for every method: an error up front
  g = wide_grid();
  g.methods = {"delayed-nesterov"};
  g.states = {StateFormat::q8};
  refused(g, "no run of this sweep can run: delayed-nesterov");
  // A value on one axis that no run can use is bad input too, with the engine's reason.
  g = wide_grid();
  g.methods = {"cgad", "delayed-nesterov"};  // Delayed Nesterov needs fp32 parameters; the base has bf16
  refused(g, "no run with method delayed-nesterov can run: delayed-nesterov runs the reference optimizer in float");
  g = wide_grid();
  g.seeds.resize(kMaxRuns / 24 + 1);  // 24 cells × 41667 seeds = 1000008 runs
  std::iota(g.seeds.begin(), g.seeds.end(), std::uint64_t{1});
  refused(g, "more than 1000000 runs");
  g = wide_grid();
  g.taus = {0, 1000001};  // the engine allows up to 10^6
  refused(g, "no run with tau 1000001 can run: tau must lie in");

  // With something runnable beside it, the refused combination is a record, not an error.
  g = wide_grid();
  g.methods = {"cgad", "delayed-nesterov"};
  g.base.outer.params = cgad::fastpath::ParamFormat::fp32;
  EXPECT_NO_THROW(validate(g));
  const std::size_t dn_q8 = 36 + 3;  // delayed-nesterov, τ 0, size 8, q8, first seed
  ASSERT_EQ(run_key(g, dn_q8).method, "delayed-nesterov");
  ASSERT_EQ(run_key(g, dn_q8).state, StateFormat::q8);
  const RunRecord r = execute_run(g, dn_q8);
  EXPECT_EQ(r.status, RunStatus::unsupported);
  EXPECT_NE(r.unsupported_reason.find("fp32"), std::string::npos) << r.unsupported_reason;
}

// Values whose decimal printing would lose bits, and the specials a diverged run produces.
const double kTricky[] = {0.1,
                          1.0 / 3.0,
                          -0.0,
                          4.9406564584124654e-324,
                          std::numeric_limits<double>::max(),
                          std::numeric_limits<double>::infinity(),
                          -std::numeric_limits<double>::infinity(),
                          std::nextafter(1.0, 2.0)};

TEST(SimulateSweepJson, RecordsRoundTripBitForBit) {
  const SweepGrid grid = wide_grid();
  for (double x : kTricky) {
    RunRecord r = finished(grid, 5, x);
    r.result.initial_loss = 1.0 / 7.0;
    r.result.mean_tau = x;
    r.result.curve = {{0, 1.0 / 7.0}, {10, x}};
    r.result.applied = 9;
    r.result.skipped_zero_gate = 1;
    r.result.skipped_overflowing = 2;
    r.result.inner_steps_skipped = 3;
    r.result.mean_tau_effective = x;
    const RunRecord back = record_from_json(nlohmann::json::parse(record_to_json(r).dump()));
    EXPECT_EQ(std::bit_cast<std::uint64_t>(back.result.final_loss), std::bit_cast<std::uint64_t>(x)) << hexfloat(x);
    EXPECT_EQ(std::bit_cast<std::uint64_t>(back.result.mean_tau), std::bit_cast<std::uint64_t>(x));
    EXPECT_EQ(std::bit_cast<std::uint64_t>(back.result.curve[1].loss), std::bit_cast<std::uint64_t>(x));
    EXPECT_EQ(back.result.curve[1].round, 10);
    EXPECT_EQ(back.result.applied, 9);
    EXPECT_EQ(back.result.skipped_zero_gate, 1);
    EXPECT_EQ(back.result.skipped_overflowing, 2);
    EXPECT_EQ(back.result.inner_steps_skipped, 3);
    EXPECT_EQ(std::bit_cast<std::uint64_t>(back.result.mean_tau_effective), std::bit_cast<std::uint64_t>(x));
    EXPECT_EQ(back.index, 5u);
    EXPECT_EQ(back.key.seed, r.key.seed);
    EXPECT_EQ(record_to_json(back).dump(), record_to_json(r).dump());
  }
  // NaN reads back as NaN ("%a" keeps no payload, and a diverged run's NaN carries no meaning in one).
  RunRecord nan = diverged(grid, 2);
  nan.result.final_loss = std::numeric_limits<double>::quiet_NaN();
  nan.result.divergence = "non-finite loss";
  const RunRecord back = record_from_json(nlohmann::json::parse(record_to_json(nan).dump()));
  EXPECT_TRUE(std::isnan(back.result.final_loss));
  EXPECT_EQ(back.status, RunStatus::diverged);
  EXPECT_EQ(back.result.divergence, "non-finite loss");
}

TEST(SimulateSweepJson, GridRoundTripsAndTheFingerprintSeesEveryField) {
  SweepGrid grid = wide_grid();
  grid.base.inner.lr = 0.1f;
  grid.base.outer.adam.lr = 3e-4f;
  grid.base.outer.alpha = 0.15;  // a double: the gate's α is not rounded to float
  grid.base.divergence_factor = 123.456;
  grid.base.nqm_noise = 0.3;
  const SweepGrid back = grid_from_json(nlohmann::json::parse(grid_to_json(grid).dump()));
  EXPECT_EQ(std::bit_cast<std::uint32_t>(back.base.inner.lr), std::bit_cast<std::uint32_t>(0.1f));
  EXPECT_EQ(std::bit_cast<std::uint32_t>(back.base.outer.adam.lr), std::bit_cast<std::uint32_t>(3e-4f));
  EXPECT_EQ(std::bit_cast<std::uint64_t>(back.base.outer.alpha), std::bit_cast<std::uint64_t>(0.15));
  EXPECT_EQ(back.base.divergence_factor, 123.456);
  EXPECT_EQ(back.base.nqm_noise, 0.3);
  EXPECT_EQ(back.seeds, grid.seeds);
  EXPECT_EQ(back.states, grid.states);
  EXPECT_EQ(grid_fingerprint(back), grid_fingerprint(grid));
  // One float one ulp away, one more seed, one more round: each a different sweep.
  SweepGrid other = grid;
  other.base.outer.adam.lr = std::nextafter(3e-4f, 1.0f);
  EXPECT_NE(grid_fingerprint(other), grid_fingerprint(grid));
  other = grid;
  other.seeds.push_back(10);
  EXPECT_NE(grid_fingerprint(other), grid_fingerprint(grid));
  other = grid;
  other.base.rounds += 1;
  EXPECT_NE(grid_fingerprint(other), grid_fingerprint(grid));
}

// A record as the engine writes one for a run that finished: every round applied, the curve ending at the
// final loss, which is below the initial one.
RunRecord plausible(const SweepGrid& grid, std::size_t index, double loss) {
  RunRecord r = finished(grid, index, loss);
  r.result.initial_loss = 2 * loss;
  r.result.curve = {{0, 2 * loss}, {grid.base.rounds, loss}};
  // Every arrival applied, each exactly τ old (constant delays from the start: none in the first τ rounds).
  r.result.applied = cgad::simulate::arrival_rounds(grid.base.delays, r.key.tau, grid.base.rounds);
  r.result.mean_tau = r.result.mean_tau_effective = static_cast<double>(r.key.tau);
  if (cgad::core::is_adam_family(cgad::core::parse_optimizer(r.key.method))) {
    r.result.v_zero_fraction = r.result.step_over_5lr_fraction = r.result.m_zero_fraction = 0.0;
    r.result.max_step_over_lr = 1.0;
    const auto sizes = cgad::simulate::tensor_sizes(grid.base.objective, r.key.size, grid.base.depth);
    const auto names = cgad::simulate::tensor_names(grid.base.objective, r.key.size, grid.base.depth);
    for (std::size_t k = 0; k < sizes.size(); ++k) {
      cgad::fastpath::TrapCounts counts;
      counts.max_step_over_lr = 1.0;
      r.result.tensor_traps.push_back({names[k], sizes[k], counts});
    }
  }
  return r;
}

SweepPart part_of(const SweepGrid& grid, Shard shard) {
  SweepPart part{grid, shard, {}};
  for (std::size_t index : shard_runs(grid, shard)) part.records.push_back(plausible(grid, index, 1.0 + index));
  return part;
}

// The q8 semantics and min_q8_size are every run's (not axes): they reach each run's spec, round-trip through a
// part's grid, and each makes another sweep (another fingerprint). The size is recorded as the one in force, so
// bnb's default and an explicit 4096 are the same sweep, as they run the same.
TEST(SimulateSweepJson, Q8SemanticsAndMinQ8SizeReachEveryRunAndTheFingerprint) {
  using cgad::fastpath::Q8Semantics;
  SweepGrid grid = wide_grid();
  grid.methods = {"cgad", "adam"};
  grid.base.outer.q8_semantics = Q8Semantics::bnb;
  grid.base.outer.min_q8_size = 100;
  EXPECT_NO_THROW(validate(grid));
  for (std::size_t i = 0; i < run_count(grid); ++i) {
    const SimulationSpec spec = run_spec(grid, run_key(grid, i));
    EXPECT_EQ(spec.outer.q8_semantics, Q8Semantics::bnb) << i;
    EXPECT_TRUE(spec.outer.min_q8_size == std::optional<std::size_t>(100)) << i;
  }
  const auto j = grid_to_json(grid);
  EXPECT_EQ(j["outer"]["q8_semantics"], "bnb");
  EXPECT_EQ(j["outer"]["min_q8_size"], 100);
  const SweepGrid back = grid_from_json(nlohmann::json::parse(j.dump()));
  EXPECT_EQ(back.base.outer.q8_semantics, Q8Semantics::bnb);
  EXPECT_EQ(cgad::fastpath::effective_min_q8_size(back.base.outer), 100u);
  EXPECT_EQ(grid_fingerprint(back), grid_fingerprint(grid));
  const SweepPart part = part_of(grid, {0, 2});
  const SweepPart part_back = part_from_json(nlohmann::json::parse(part_to_json(part).dump()), "p.json");
  EXPECT_EQ(part_back.grid.base.outer.q8_semantics, Q8Semantics::bnb);
  EXPECT_EQ(part_to_json(part_back).dump(), part_to_json(part).dump());

  SweepGrid other = grid;
  other.base.outer.q8_semantics = Q8Semantics::cgad;
  EXPECT_NE(grid_fingerprint(other), grid_fingerprint(grid));
  other = grid;
  other.base.outer.min_q8_size = 101;
  EXPECT_NE(grid_fingerprint(other), grid_fingerprint(grid));
  // Unset: 4096 with bnb, 0 with cgad — as if given.
  SweepGrid unset = grid, explicit_default = grid;
  unset.base.outer.min_q8_size.reset();
  explicit_default.base.outer.min_q8_size = 4096;
  EXPECT_EQ(grid_to_json(unset)["outer"]["min_q8_size"], 4096);
  EXPECT_EQ(grid_fingerprint(unset), grid_fingerprint(explicit_default));
  unset.base.outer.q8_semantics = Q8Semantics::cgad;
  explicit_default.base.outer.q8_semantics = Q8Semantics::cgad;
  EXPECT_EQ(grid_to_json(unset)["outer"]["min_q8_size"], 0);
  EXPECT_NE(grid_fingerprint(unset), grid_fingerprint(explicit_default));
  // A semantics no cgad writes is refused.
  auto bad = j;
  bad["outer"]["q8_semantics"] = "bitsandbytes";
  EXPECT_THROW(grid_from_json(nlohmann::json::parse(bad.dump())), InputError);
}

// bnb semantics in a sweep is refused exactly where fastpath::validate refuses it — a method outside the Adam
// family, bf16 state, stochastic rounding — naming the axis value that cannot run.
TEST(SimulateSweepGrid, BnbSemanticsIsRefusedWhereBitsandbytesHasNoKernel) {
  const auto refused = [](SweepGrid grid, const std::string& fragment) {
    try {
      validate(grid);
      ADD_FAILURE() << "accepted; wanted a refusal with '" << fragment << "'";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    }
  };
  SweepGrid g = wide_grid();  // cgad and nesterov, fp32 and q8 state
  g.base.outer.q8_semantics = cgad::fastpath::Q8Semantics::bnb;
  refused(g, "no run with method nesterov can run: q8 semantics bnb is bitsandbytes' Adam; nesterov keeps cgad's");
  g.methods = {"cgad", "pa-cgad", "adam-decay", "adam"};
  EXPECT_NO_THROW(validate(g));
  g.states = {StateFormat::fp32, StateFormat::bf16};
  refused(g, "no run with state bf16 can run: q8 semantics bnb has no bf16 state");
  g.states = {StateFormat::q8};
  g.base.outer.rounding = cgad::fastpath::Rounding::stochastic;
  refused(g, "no run of this sweep can run: q8 semantics bnb rounds to nearest only");
  g.base.outer.rounding = cgad::fastpath::Rounding::nearest;
  g.states = {StateFormat::fp32};
  g.methods = {"cgad", "delayed-nesterov"};
  g.base.outer.params = cgad::fastpath::ParamFormat::fp32;
  refused(g, "no run with method delayed-nesterov can run: q8 semantics bnb is bitsandbytes' Adam; delayed-nesterov");
}

TEST(SimulateSweepJson, HexfloatTextIsOnlyWhatCgadWrites) {
  for (const char* text : {"0x1.8p+1", "-0x1p-1074", "0x0p+0", "-0x0p+0", "inf", "-inf", "nan", "-nan"}) {
    EXPECT_NO_THROW(parse_hexfloat(text, "x")) << text;
  }
  EXPECT_EQ(parse_hexfloat("-0x1.8p+1", "x"), -3.0);
  // Decimals, blanks, spellings strtod takes but "%a" never writes, and hex without its exponent.
  for (const char* text :
       {"1.5", " 0x1p+0", "0x1p+0 ", "infinity", "NAN", "0X1P+0", "0x1", "+0x1p+0", "", "0x.8p+1", "0x1p1"}) {
    EXPECT_THROW(parse_hexfloat(text, "x"), InputError) << text;
  }
}

// Every way a hand-edited record could claim what the engine never produces is refused, naming the part; the
// part as cgad wrote it (real runs, one of them diverged) is accepted.
TEST(SimulateSweepJson, PartsRefuseResultsNoRunCouldHave) {
  SweepGrid grid;
  grid.methods = {"nesterov"};
  grid.taus = {0};
  grid.sizes = {8};
  grid.states = {StateFormat::fp32};
  grid.seeds = {1, 2};
  grid.base.rounds = 30;
  grid.base.outer.nesterov.lr = 1000;  // diverges within 30 rounds (simulate_cli_test's DivergingRuns)
  SweepGrid calm = grid;
  calm.base.outer.nesterov.lr = SweepGrid{}.base.outer.nesterov.lr;
  const auto real_part = [](const SweepGrid& g) {
    const auto runs = shard_runs(g, {});
    return nlohmann::json::parse(part_to_json({g, {}, run_sweep(g, runs, 1)}).dump());
  };
  const nlohmann::json wild = real_part(grid), tame = real_part(calm);
  ASSERT_EQ(wild["runs"][0]["status"], "diverged");
  ASSERT_EQ(tame["runs"][0]["status"], "finished");
  EXPECT_NO_THROW(part_from_json(wild, "p.json"));
  EXPECT_NO_THROW(part_from_json(tame, "p.json"));

  const auto refused = [](const nlohmann::json& base, const std::function<void(nlohmann::json&)>& edit,
                          const std::string& fragment) {
    nlohmann::json part = base;
    edit(part["runs"][0]);
    try {
      part_from_json(part, "p.json");
      ADD_FAILURE() << "accepted " << part["runs"][0].dump() << "; wanted '" << fragment << "'";
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()).rfind("p.json: ", 0), 0u) << e.what();
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  for (const char* loss : {"nan", "inf", "0x1p+1000"}) {
    refused(
        tame, [&](nlohmann::json& r) { r["final_loss"] = loss; }, "run 0: finished with final_loss");
  }
  refused(
      tame, [](nlohmann::json& r) { r["applied"] = -1; }, "run 0: negative counts");
  refused(
      tame, [](nlohmann::json& r) { r["skipped_zero_gate"] = -3; }, "run 0: negative counts");
  refused(
      tame, [](nlohmann::json& r) { r["inner_steps_skipped"] = -1; }, "run 0: negative counts");
  refused(
      tame, [](nlohmann::json& r) { r["curve"] = nlohmann::json::array(); }, "run 0: empty loss curve");
  refused(
      tame, [](nlohmann::json& r) { r["final_loss"] = hexfloat(parse_hexfloat(r["final_loss"], "") / 2); },
      "run 0: final_loss is not the curve's last loss");
  refused(
      tame, [](nlohmann::json& r) { r["skipped_overflowing"] = -1; }, "run 0: negative counts");
  constexpr const char* kSum =
      "run 0: applied + skipped_nonfinite + skipped_zero_gate + skipped_overflowing is not the 30 arrivals";
  refused(
      tame, [](nlohmann::json& r) { r["applied"] = r["applied"].get<long>() - 1; }, kSum);
  refused(
      tame, [](nlohmann::json& r) { r["skipped_nonfinite"] = 1; }, kSum);
  refused(
      tame, [](nlohmann::json& r) { r["skipped_overflowing"] = 1; }, kSum);
  // One applied round recounted as overflowing still adds up, and is accepted.
  nlohmann::json recounted = tame;
  recounted["runs"][0]["applied"] = recounted["runs"][0]["applied"].get<long>() - 1;
  recounted["runs"][0]["skipped_overflowing"] = 1;
  EXPECT_NO_THROW(part_from_json(recounted, "p.json"));
  refused(
      tame, [](nlohmann::json& r) { r["divergence"] = "loss too high"; }, "run 0: finished but with a divergence");
  refused(
      wild, [](nlohmann::json& r) { r["divergence"] = ""; }, "run 0: diverged without a reason");
  refused(
      wild, [](nlohmann::json& r) { r["diverged_at"] = 0; },
      "run 0: diverged_at 0 is not a divergence check in [1, 30]");
  refused(
      wild, [](nlohmann::json& r) { r["diverged_at"] = 31; },
      "run 0: diverged_at 31 is not a divergence check in [1, 30]");
  refused(
      wild, [](nlohmann::json& r) { r["applied"] = r["applied"].get<long>() + 1; }, "arrivals of the rounds it ran");
  refused(
      wild, [](nlohmann::json& r) { r["initial_loss"] = "1.0"; }, "not hexfloat text");
}

TEST(SimulateSweepJson, PartsRefuseEditsAndRecordsOutsideTheirShard) {
  const SweepGrid grid = wide_grid();
  const SweepPart part = part_of(grid, {1, 3});
  const SweepPart back = part_from_json(nlohmann::json::parse(part_to_json(part).dump()), "p.json");
  EXPECT_EQ(part_to_json(back).dump(), part_to_json(part).dump());

  auto edited = part_to_json(part);
  edited["grid"]["rounds"] = 11;
  EXPECT_THROW(part_from_json(nlohmann::json::parse(edited.dump()), "p.json"), InputError);
  auto moved = part_to_json(part);
  moved["shard"]["index"] = 0;
  try {
    part_from_json(nlohmann::json::parse(moved.dump()), "p.json");
    ADD_FAILURE() << "accepted a record outside its shard";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("p.json: run 1 is not in shard 0/3"), std::string::npos) << e.what();
  }
  auto relabelled = part_to_json(part);
  relabelled["runs"][0]["seed"] = 99;
  EXPECT_THROW(part_from_json(nlohmann::json::parse(relabelled.dump()), "p.json"), InputError);
  EXPECT_THROW(part_from_json(nlohmann::json::parse("{\"format\": \"other\"}"), "p.json"), InputError);
  EXPECT_THROW(part_from_json(nlohmann::json::parse("[1, 2]"), "p.json"), InputError);
  // A grid no sweep could have, with a fingerprint that matches it, is refused too (it would divide by zero).
  SweepGrid empty = grid;
  empty.seeds.clear();
  auto crafted = part_to_json(part);
  crafted["grid"] = grid_to_json(empty);
  crafted["fingerprint"] = grid_fingerprint(empty);
  crafted["runs"] = nlohmann::ordered_json::array();
  try {
    part_from_json(nlohmann::json::parse(crafted.dump()), "p.json");
    ADD_FAILURE() << "accepted a grid without seeds";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("seed list is empty"), std::string::npos) << e.what();
  }
}

TEST(SimulateSweepJson, MergeRefusesOtherSweepsAndDuplicatesAndListsMissingRuns) {
  const SweepGrid grid = wide_grid();
  const std::vector<SweepPart> all{part_of(grid, {0, 3}), part_of(grid, {2, 3}), part_of(grid, {1, 3})};
  const MergedSweep merged = merge_parts(all, {"a", "b", "c"});
  EXPECT_TRUE(merged.missing.empty());
  ASSERT_EQ(merged.records.size(), run_count(grid));
  for (std::size_t i = 0; i < merged.records.size(); ++i) EXPECT_EQ(merged.records[i].index, i);

  const MergedSweep partial = merge_parts({all[0], all[1]}, {"a", "b"});
  ASSERT_EQ(partial.missing.size(), 24u);
  EXPECT_EQ(partial.missing.front(), 1u);

  EXPECT_THROW(merge_parts({all[0], all[0]}, {"a", "a2"}), InputError);
  SweepGrid other = grid;
  other.base.rounds = 11;
  EXPECT_THROW(merge_parts({all[0], part_of(other, {1, 3})}, {"a", "b"}), InputError);
  EXPECT_THROW(merge_parts({}, {}), InputError);
}

// A part of the same axes run under the other q8 semantics, or another min_q8_size, is another sweep: merge
// refuses it and says which field differs.
TEST(SimulateSweepJson, MergeRefusesPartsOfAnotherQ8SemanticsOrMinQ8Size) {
  SweepGrid grid = wide_grid();
  grid.methods = {"cgad"};
  SweepGrid bnb = grid;
  bnb.base.outer.q8_semantics = cgad::fastpath::Q8Semantics::bnb;
  const auto refusal = [](const std::vector<SweepPart>& parts) {
    try {
      merge_parts(parts, {"a.json", "b.json"});
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  const std::string mixed = refusal({part_of(grid, {0, 2}), part_of(bnb, {1, 2})});
  EXPECT_NE(mixed.find("merge: b.json is from a different sweep"), std::string::npos) << mixed;
  EXPECT_NE(mixed.find("first difference: outer.q8_semantics (bnb vs cgad)"), std::string::npos) << mixed;
  SweepGrid sized = bnb;
  sized.base.outer.min_q8_size = 0;
  const std::string resized = refusal({part_of(bnb, {0, 2}), part_of(sized, {1, 2})});
  EXPECT_NE(resized.find("first difference: outer.min_q8_size (0 vs 4096)"), std::string::npos) << resized;
  // The parts of one semantics merge.
  EXPECT_EQ(merge_parts({part_of(bnb, {0, 2}), part_of(bnb, {1, 2})}, {"a", "b"}).records.size(), run_count(bnb));
}

// A part written before the q8 fields existed (version 2) is refused by its version, not as malformed.
TEST(SimulateSweepJson, PartsOfTheOlderFormatAreRefusedByVersion) {
  auto old = part_to_json(part_of(wide_grid(), {0, 1}));
  old["version"] = 2;
  try {
    part_from_json(nlohmann::json::parse(old.dump()), "old.json");
    ADD_FAILURE() << "accepted a version-2 part";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("old.json: part format version 2, this cgad reads 5"), std::string::npos)
        << e.what();
  }
}

TEST(SimulateSweepRun, RecordsDoNotDependOnTheNumberOfJobs) {
  SweepGrid grid;
  grid.methods = {"cgad", "nesterov"};
  grid.taus = {0, 3};
  grid.sizes = {8};
  grid.states = {StateFormat::fp32, StateFormat::q8};
  grid.seeds = {1, 2};
  grid.base.rounds = 20;
  const auto runs = shard_runs(grid, {});
  const MergedSweep one{grid, run_sweep(grid, runs, 1), {}}, three{grid, run_sweep(grid, runs, 3), {}};
  EXPECT_EQ(sweep_to_json(one).dump(), sweep_to_json(three).dump());
  // Far more jobs than runs or CPUs is clamped to what there is (sweep.hpp), and changes nothing either.
  EXPECT_EQ(sweep_to_json({grid, run_sweep(grid, runs, 100000), {}}).dump(), sweep_to_json(one).dump());
  // The records are those of the runs one by one, and the runs did run.
  for (std::size_t i = 0; i < runs.size(); ++i) {
    EXPECT_EQ(record_to_json(one.records[i]).dump(), record_to_json(execute_run(grid, runs[i])).dump());
    EXPECT_EQ(one.records[i].status, RunStatus::finished);
    EXPECT_FALSE(one.records[i].result.curve.empty());
  }
}

// A thread that cannot be started (address space exhausted: each needs its stack mapped) must neither abort the
// process (std::terminate from a joinable thread destroyed) nor lose runs: the running threads do its share.
// Run in a child process whose address space is capped just above what it already maps.
TEST(SimulateSweepRun, AThreadThatCannotStartLeavesItsShareToTheOthers) {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  if (sched_getaffinity(0, sizeof cpus, &cpus) != 0 || CPU_COUNT(&cpus) < 2) {
    GTEST_SKIP() << "one usable CPU: run_sweep starts no thread to fail";
  }
  SweepGrid grid;
  grid.methods = {"cgad"};
  grid.taus = {0, 2};
  grid.sizes = {8};
  grid.states = {StateFormat::fp32};
  grid.seeds = {1, 2, 3};
  grid.base.rounds = 20;
  const auto runs = shard_runs(grid, {});
  const std::string expected = sweep_to_json({grid, run_sweep(grid, runs, 1), {}}).dump();
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // glibc keeps the stacks of finished threads for reuse, so the cap alone stops nothing while some are
    // cached: parked threads take them (and whatever room is left) first, and hold them during the sweep.
    std::promise<void> release;
    const std::shared_future<void> go = release.get_future().share();
    std::vector<std::thread> parked;
    parked.reserve(256);
    long pages = 0;
    std::ifstream("/proc/self/statm") >> pages;
    const rlim_t mapped = static_cast<rlim_t>(pages) * static_cast<rlim_t>(sysconf(_SC_PAGESIZE));
    const rlimit cap{mapped + (4u << 20), mapped + (4u << 20)};  // 4 MiB: the runs' heap, not a thread stack
    if (setrlimit(RLIMIT_AS, &cap) != 0) _exit(4);
    try {
      while (parked.size() < parked.capacity()) parked.emplace_back([go] { go.wait(); });
    } catch (const std::system_error&) {}
    if (parked.size() == parked.capacity()) _exit(3);  // the cap did not stop threads: nothing to test
    int code = 2;
    try {
      code = sweep_to_json({grid, run_sweep(grid, runs, 2), {}}).dump() == expected ? 0 : 1;
    } catch (...) {}
    release.set_value();
    for (auto& thread : parked) thread.join();
    _exit(code);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  if (WEXITSTATUS(status) == 3 || WEXITSTATUS(status) == 4) GTEST_SKIP() << "could not cap threads by address space";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: records differ, 2: run_sweep threw";
}

}  // namespace
