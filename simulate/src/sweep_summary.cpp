// Per-cell statistics of a sweep: the paper's measures over the seeds that did not diverge, their bootstrap
// intervals, the trap metrics, and the σ comparisons between cells.
#include "cgad/simulate/sweep.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>

namespace cgad::simulate {
namespace {

// The final losses of each cell's finished seeds, in record order.
std::vector<std::vector<double>> finished_losses(const SweepGrid& grid, std::span<const RunRecord> records) {
  std::vector<std::vector<double>> losses(run_count(grid) / grid.seeds.size());
  for (const RunRecord& r : records) {
    if (r.index >= run_count(grid)) throw std::out_of_range("record index past the sweep");
    if (r.status == RunStatus::finished) losses[r.index / grid.seeds.size()].push_back(r.result.final_loss);
  }
  return losses;
}

// The mean of the values present, or none.
struct MeanOf {
  double sum = 0;
  std::size_t count = 0;
  void add(const std::optional<double>& x) {
    if (!x) return;
    sum += *x;
    ++count;
  }
  std::optional<double> mean() const {
    if (count == 0) return std::nullopt;
    return sum / static_cast<double>(count);
  }
};

}  // namespace

std::vector<CellSummary> summarize(const SweepGrid& grid, std::span<const RunRecord> records) {
  const std::size_t seeds = grid.seeds.size();
  std::vector<CellSummary> cells(run_count(grid) / seeds);
  for (std::size_t c = 0; c < cells.size(); ++c) {
    cells[c].key = run_key(grid, c * seeds);
    cells[c].runs = seeds;
  }
  std::vector<MeanOf> v_zero(cells.size()), over_5lr(cells.size());
  for (const RunRecord& r : records) {
    if (r.index >= run_count(grid)) throw std::out_of_range("record index past the sweep");
    const std::size_t c = r.index / seeds;
    CellSummary& cell = cells[c];
    ++cell.present;
    switch (r.status) {
      case RunStatus::unsupported:
        ++cell.unsupported;
        cell.unsupported_reason = r.unsupported_reason;
        break;
      case RunStatus::diverged:
        ++cell.diverged;
        break;
      case RunStatus::stalled:
        ++cell.stalled;
        cell.stall_reason = r.result.stalled;
        break;
      case RunStatus::finished: {
        const SimulationResult& s = r.result;
        ++cell.finished;
        cell.with_skips += s.inner_steps_skipped > 0 || s.skipped_nonfinite > 0 || s.skipped_overflowing > 0;
        v_zero[c].add(s.v_zero_fraction);
        over_5lr[c].add(s.step_over_5lr_fraction);
        if (s.max_step_over_lr)
          cell.max_step_over_lr = std::max(cell.max_step_over_lr.value_or(0.0), *s.max_step_over_lr);
        break;
      }
    }
  }
  const std::vector<std::vector<double>> losses = finished_losses(grid, records);
  for (std::size_t c = 0; c < cells.size(); ++c) {
    cells[c].v_zero_fraction = v_zero[c].mean();
    cells[c].step_over_5lr_fraction = over_5lr[c].mean();
    const std::vector<double>& x = losses[c];
    if (x.empty()) continue;
    double sum = 0;
    for (double v : x) sum += v;
    const double mean = sum / static_cast<double>(x.size());
    cells[c].mean = mean;
    if (x.size() < 2) continue;
    cells[c].stddev = sample_sigma(x);
    cells[c].risk = mean + *cells[c].stddev;
    const SpreadIntervals intervals = bootstrap_spread(x);
    cells[c].mean_ci = intervals.mean;
    cells[c].stddev_ci = intervals.sigma;
    cells[c].risk_ci = intervals.risk;
  }
  return cells;
}

std::vector<SigmaComparisonRow> compare_cells(const SweepGrid& grid, std::span<const RunRecord> records) {
  const std::vector<std::vector<double>> losses = finished_losses(grid, records);
  const std::size_t seeds = grid.seeds.size();
  // Cell c's coordinates in the run order (method, τ, size, state; state fastest): its index on each axis.
  const std::array<std::size_t, 4> lengths{grid.methods.size(), grid.taus.size(), grid.sizes.size(),
                                           grid.states.size()};
  const std::array<const char*, 4> names{"method", "tau", "size", "state"};
  std::array<std::size_t, 4> stride{};
  stride[3] = 1;
  for (std::size_t a = 3; a-- > 0;) stride[a] = stride[a + 1] * lengths[a + 1];
  std::vector<SigmaComparisonRow> rows;
  for (std::size_t c = 0; c < run_count(grid) / seeds; ++c) {
    for (std::size_t a = 0; a < 4; ++a) {
      const std::size_t position = c / stride[a] % lengths[a];
      if (position == 0) continue;
      const std::size_t against = c - position * stride[a];
      if (losses[c].size() < 2 || losses[against].size() < 2) continue;
      rows.push_back({c, against, names[a], compare_sigma(losses[c], losses[against])});
    }
  }
  return rows;
}

std::string cell_note(const CellSummary& cell) {
  std::string note;
  const auto add = [&note](const std::string& part) { note += (note.empty() ? "" : "; ") + part; };
  if (cell.present < cell.runs) {
    add("incomplete: " + std::to_string(cell.runs - cell.present) + " of " + std::to_string(cell.runs) +
        " runs missing");
  }
  if (cell.unsupported > 0) add("unsupported: " + cell.unsupported_reason);
  const std::size_t lost = cell.diverged + cell.stalled;
  if (lost > 0 && cell.finished == 0) {
    if (cell.diverged > 0) add("all " + std::to_string(cell.diverged) + " diverged");
    if (cell.stalled > 0) add(std::to_string(cell.stalled) + " stalled: " + cell.stall_reason);
  }
  if (lost > 0 && cell.finished > 0) {
    // The statistics leave the diverged and stalled seeds out, so they describe the survivors: a lower risk than
    // a single shot of the method really carries. The reader must see that next to them.
    std::string what = cell.diverged > 0
                           ? std::to_string(cell.diverged) + " of " + std::to_string(lost + cell.finished) + " diverged"
                           : "";
    if (cell.stalled > 0) {
      what += (what.empty() ? "" : ", ") + std::to_string(cell.stalled) + " of " +
              std::to_string(lost + cell.finished) + " stalled (" + cell.stall_reason + ")";
    }
    add(what + "; statistics over the " + std::to_string(cell.finished) + " finished");
  }
  if (cell.with_skips > 0) {
    add(std::to_string(cell.with_skips) + " finished seed(s) had non-finite or overflowing steps refused");
  }
  if (cell.finished == 1) add("one seed finished: no sigma");
  return note;
}

}  // namespace cgad::simulate
