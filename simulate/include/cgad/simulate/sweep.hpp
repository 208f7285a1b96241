#pragma once
// A sweep of asynchronous DiLoCo runs: the paper's comparison — outer optimizers × delay τ × model
// size × outer-state format × seeds — judged per cell (method, τ, size, state) by the final loss's mean and
// seed-to-seed σ over the seeds that did not diverge, and the single-shot risk mean + σ.
//
// Runs are numbered once, deterministically, so that a sweep can be cut into shards (`index % N == I`), run on
// different machines, and merged back (sweep_json.hpp): the index of a run depends only on the grid.
#include "cgad/simulate/seed_statistics.hpp"
#include "cgad/simulate/simulation.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cgad::simulate {

// Every run of a sweep is `base` with one value taken from each axis. `base.size`, `base.tau`, `base.seed`,
// `base.outer.seed`, `base.outer.optimizer`, `base.outer.state` and `base.delayed_nesterov` are set by the axes
// and ignored here: the run's seed also keys the fast path's stochastic rounding, so that seeds differ in their
// rounding noise as well. `base.outer.fragments` is PA-CGAD's P (every other method runs with one fragment).
// `base.outer.q8_semantics` and `base.outer.min_q8_size` are not axes: every run of a sweep has the same (so
// parts of another semantics are another sweep, and merge refuses them); bnb semantics with a method outside
// the Adam family, bf16 state or stochastic rounding is refused as fastpath::validate refuses it.
struct SweepGrid {
  SimulationSpec base;
  std::vector<std::string> methods;  // the names of core::kOptimizerNames
  std::vector<long> taus;            // the fixed τ (constant delays) or τ_max (any other schedule)
  std::vector<std::size_t> sizes;
  std::vector<fastpath::StateFormat> states;
  std::vector<std::uint64_t> seeds;  // each run's SimulationSpec::seed; the problem seed stays base's
};

// The most runs one sweep may hold: a million runs is days of CPU time at the smallest sizes, and past it a
// mistyped --seeds would only fail later, allocating the records.
inline constexpr std::size_t kMaxRuns = 1'000'000;

// The most memory a sweep's records may take, estimated before any run: each run's loss curve at
// kBytesPerCurvePoint per point (the point itself, its node in the JSON tree `--json`, `--out` and merge build,
// and its text) and its final parameters (4 bytes each). Without it `--rounds 1e8 --log-every 1` over a few runs
// would be accepted and fail hours later, or exhaust the machine.
inline constexpr double kMaxSweepRecordBytes = 2.0 * 1024 * 1024 * 1024;
inline constexpr double kBytesPerCurvePoint = 256;

// Refuses (InputError, one line) more than kMaxRuns runs, records over kMaxSweepRecordBytes, an empty axis, a repeated
// value on an axis (it would make two runs one), an unknown method, τ < 0 or size 0, a grid none of whose runs the
// engine accepts (a base spec bad for every method), and a value on an axis none of whose runs the engine accepts (τ
// past its limit, Delayed Nesterov with bf16 parameters), each with the engine's own reason. Combinations the engine
// refuses while their values run elsewhere (Delayed Nesterov with q8 state beside fp32) are not an error: they are
// recorded as unsupported.
void validate(const SweepGrid& grid);

// One run's coordinates on the axes.
struct RunKey {
  std::string method;
  long tau = 0;
  std::size_t size = 0;
  fastpath::StateFormat state = fastpath::StateFormat::fp32;
  std::uint64_t seed = 0;
};

std::size_t run_count(const SweepGrid& grid);
// Runs are numbered with the seed varying fastest, then state, size, τ, method (the axes' list orders), so the
// seeds of one cell are neighbours. Throws std::out_of_range past run_count.
RunKey run_key(const SweepGrid& grid, std::size_t index);
SimulationSpec run_spec(const SweepGrid& grid, const RunKey& key);

// A slice of a sweep: the runs whose index % count == index.
struct Shard {
  std::size_t index = 0, count = 1;
};
Shard parse_shard(std::string_view text);                                 // "I/N", 0 ≤ I < N; InputError otherwise
std::vector<std::size_t> shard_runs(const SweepGrid& grid, Shard shard);  // ascending

// stalled: the run reached its last round without diverging, but made no progress it could be judged by
// (SimulationResult::stalled says why); like a diverged run it is counted, and left out of the statistics.
enum class RunStatus { finished, diverged, stalled, unsupported };
std::string_view to_string(RunStatus status);

struct RunRecord {
  std::size_t index = 0;
  RunKey key;
  RunStatus status = RunStatus::finished;
  std::string unsupported_reason;  // the engine's refusal, when unsupported
  SimulationResult result;         // when finished or diverged
};

// Runs one run of the grid (single-threaded). An engine refusal (InputError from validate) becomes an
// unsupported record; a diverged run is a record like any other. `progress` and `recorder` are passed to
// run_simulation.
RunRecord execute_run(const SweepGrid& grid, std::size_t index,
                      const std::function<void(std::int64_t, std::int64_t)>& progress = {},
                      ArrivalRecorder* recorder = nullptr);

// Runs `indices` on `jobs` threads, each run on one thread, and returns their records in the order of
// `indices`: the records do not depend on `jobs`. `jobs` is clamped to the run count and to the CPUs this
// process may use (sched_getaffinity: under Slurm or taskset fewer than the machine has), 0 meaning all of those;
// more threads than CPUs would only compete. A thread that cannot be started leaves its share to the others.
// `progress(done, total)` counts outer rounds over all runs and is called from one thread at a time.
std::vector<RunRecord> run_sweep(const SweepGrid& grid, std::span<const std::size_t> indices, unsigned jobs,
                                 const std::function<void(long, long)>& progress = {});

// One cell of the table: the seeds of one (method, τ, size, state).
struct CellSummary {
  RunKey key;               // key.seed is unused
  std::size_t runs = 0;     // seeds the grid has for the cell
  std::size_t present = 0;  // of which a record exists (fewer only in a partial merge)
  std::size_t unsupported = 0;
  std::string unsupported_reason;
  std::size_t diverged = 0;
  std::size_t stalled = 0;
  std::string stall_reason;    // one of them, when any
  std::size_t finished = 0;    // the seeds the statistics are over
  std::size_t with_skips = 0;  // finished seeds that had an inner step or an arrival refused as non-finite/overflowing
  std::optional<double> mean;  // final loss over the finished seeds (none finished: none)
  std::optional<double> stddev;  // sample standard deviation, n − 1 in the denominator (needs 2 finished seeds)
  std::optional<double> risk;    // single-shot risk mean + σ, the paper's measure (needs σ)
  // Percentile-bootstrap 95 % intervals of the mean, σ and the risk (seed_statistics.hpp; 2 finished seeds).
  std::optional<Interval> mean_ci, stddev_ci, risk_ci;
  // Over the finished seeds (Adam family only; SimulationResult's trap metrics): the mean share of v stored as 0
  // at the end, the mean share of element-steps past 5η, the largest step in units of η.
  std::optional<double> v_zero_fraction, step_over_5lr_fraction, max_step_over_lr;
};

// Cells in run order (method, τ, size, state). `records` may be any subset of the grid's runs, each at most
// once; a cell with missing records says so through `present`.
std::vector<CellSummary> summarize(const SweepGrid& grid, std::span<const RunRecord> records);

// What a reader must know about a cell beyond its numbers, or "" when nothing: unsupported (with the reason),
// all diverged, some diverged or stalled ("2 of 5 diverged; statistics over the 3 finished": the survivors' mean
// and risk flatter the method), finished seeds with refused steps, one seed left so no σ, records missing.
std::string cell_note(const CellSummary& cell);

// σ of a cell against the cell that differs from it on one axis only, at that axis's first value (method against
// the first method, size against the first size, …; axes with one value have none): seed_statistics.hpp's test.
// For every pair where both cells have at least 2 finished seeds, in cell order and then axis order (method, tau,
// size, state). This is what the docs mean by "σ differs beyond seed noise": p < 0.05.
struct SigmaComparisonRow {
  std::size_t cell = 0, against = 0;  // indices into summarize()'s cells
  std::string axis;                   // "method", "tau", "size" or "state"
  SigmaComparison test;
};
std::vector<SigmaComparisonRow> compare_cells(const SweepGrid& grid, std::span<const RunRecord> records);

}  // namespace cgad::simulate
