#pragma once
// Whether a run record read from a part file is one the engine could have written for its grid (simulation.cpp,
// sweep_run.cpp). A fingerprint proves only that the grid was not edited; without these checks a hand-edited part
// could put any number into merge's table.
#include "cgad/simulate/sweep.hpp"

namespace cgad::simulate {

// InputError (one line, without the run's name) when the record is impossible for `grid`.
void check_record(const RunRecord& record, const SweepGrid& grid);

}  // namespace cgad::simulate
