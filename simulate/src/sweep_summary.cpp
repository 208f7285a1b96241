// Per-cell statistics of a sweep: the paper's measures over the seeds that did not diverge.
#include "cgad/simulate/sweep.hpp"

#include <cmath>
#include <stdexcept>

namespace cgad::simulate {

std::vector<CellSummary> summarize(const SweepGrid& grid, std::span<const RunRecord> records) {
  const std::size_t seeds = grid.seeds.size();
  std::vector<CellSummary> cells(run_count(grid) / seeds);
  for (std::size_t c = 0; c < cells.size(); ++c) {
    cells[c].key = run_key(grid, c * seeds);
    cells[c].runs = seeds;
  }
  std::vector<std::vector<double>> losses(cells.size());
  for (const RunRecord& r : records) {
    if (r.index >= run_count(grid)) throw std::out_of_range("record index past the sweep");
    CellSummary& cell = cells[r.index / seeds];
    ++cell.present;
    switch (r.status) {
      case RunStatus::unsupported:
        ++cell.unsupported;
        cell.unsupported_reason = r.unsupported_reason;
        break;
      case RunStatus::diverged:
        ++cell.diverged;
        break;
      case RunStatus::finished:
        ++cell.finished;
        losses[r.index / seeds].push_back(r.result.final_loss);
        break;
    }
  }
  for (std::size_t c = 0; c < cells.size(); ++c) {
    const std::vector<double>& x = losses[c];
    if (x.empty()) continue;
    // Two passes (mean, then squared deviations from it): no cancellation between Σx² and (Σx)²/n.
    double sum = 0;
    for (double v : x) sum += v;
    const double mean = sum / static_cast<double>(x.size());
    cells[c].mean = mean;
    if (x.size() < 2) continue;
    double squares = 0;
    for (double v : x) squares += (v - mean) * (v - mean);
    cells[c].stddev = std::sqrt(squares / static_cast<double>(x.size() - 1));
    cells[c].risk = mean + *cells[c].stddev;
  }
  return cells;
}

std::string cell_note(const CellSummary& cell) {
  std::string note;
  const auto add = [&note](const std::string& part) { note += (note.empty() ? "" : "; ") + part; };
  if (cell.present < cell.runs) {
    add("incomplete: " + std::to_string(cell.runs - cell.present) + " of " + std::to_string(cell.runs) +
        " runs missing");
  }
  if (cell.unsupported > 0) add("unsupported: " + cell.unsupported_reason);
  if (cell.diverged > 0 && cell.finished == 0) add("all " + std::to_string(cell.diverged) + " diverged");
  if (cell.diverged > 0 && cell.finished > 0) {
    // The statistics leave the diverged seeds out, so they describe the survivors: a lower risk than a single
    // shot of the method really carries. The reader must see that next to them.
    add(std::to_string(cell.diverged) + " of " + std::to_string(cell.diverged + cell.finished) +
        " diverged; statistics over the " + std::to_string(cell.finished) + " finished");
  }
  if (cell.finished == 1) add("one seed finished: no sigma");
  return note;
}

}  // namespace cgad::simulate
