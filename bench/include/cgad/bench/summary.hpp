#pragma once
// The summary benchmark `cgad bench` prints and the report's performance section shows: every figure a ratio to
// a baseline timed in the same run — the CPU step's bytes per second over a plain copy's, the reference over a
// raw-MPFR loop, the CUDA step over a device-to-device copy.
#include <nlohmann/json.hpp>

#include <string>

namespace cgad::bench {

struct SummaryOptions {
  bool quick = false;    // short samples and a small reference/CUDA size (about 3 s here)
  unsigned threads = 0;  // CPU threads; 0: every core
};

// Runs the three comparisons (logging each stage on stderr) and returns them as
// {"cpu": {...}, "reference": {...}, "cuda": {...} or {"unavailable": why}}. Leaves the MPFR working
// precision as it found it.
nlohmann::ordered_json run_summary(const SummaryOptions& options);

// The three lines `cgad bench` prints for a summary.
std::string summary_text(const nlohmann::ordered_json& summary);

}  // namespace cgad::bench
