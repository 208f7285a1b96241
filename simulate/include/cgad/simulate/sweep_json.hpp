#pragma once
// A sweep's results as JSON (nlohmann), exact enough to merge and re-aggregate on another machine: every real
// is hexfloat text ("0x1.99999ap-4", "inf", "nan"), which reads back to the same bits; ∞ too, and NaN (a
// diverged run's loss can be either) reads back as a NaN, its payload not kept. A part file holds the grid, its
// fingerprint, the shard and the records of that shard; `merge_parts` refuses parts of different sweeps and duplicate
// runs, and lists missing ones.
#include "cgad/simulate/sweep.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace cgad::simulate {

nlohmann::ordered_json grid_to_json(const SweepGrid& grid);
SweepGrid grid_from_json(const nlohmann::json& json);  // InputError on anything malformed

// 16 hex digits: FNV-1a (64-bit) of grid_to_json's compact text. Two parts belong to one sweep exactly when
// their grids serialize identically; a grid edited after the run no longer matches the fingerprint stored
// beside it.
std::string grid_fingerprint(const SweepGrid& grid);

nlohmann::ordered_json record_to_json(const RunRecord& record);
RunRecord record_from_json(const nlohmann::json& json);

// This build's version (CMake's project version), which every part it writes records: an engine whose outcomes
// change bumps it, and merge_parts refuses parts of different versions unless told otherwise.
inline constexpr const char* kCgadVersion = CGAD_VERSION;

struct SweepPart {
  SweepGrid grid;
  Shard shard;
  std::vector<RunRecord> records;           // ascending index
  std::string cgad_version = kCgadVersion;  // of the cgad that wrote it (part_to_json writes this build's)
};

// The largest part file `cgad merge` reads (256 MiB): a sweep's records are bounded before it runs
// (kMaxSweepRecordBytes, 2 GiB at kBytesPerCurvePoint = 256 per loss-curve point), and a point's text in a part
// is a hexfloat string of at most 27 bytes with its quotes and comma, so a sweep at that bound writes about
// 2 GiB * 27/256 = 216 MiB of curves in all its parts together. Reading a part builds its JSON tree, about 6
// bytes of memory per byte of text (docs/testing.md measures it), so the bound also caps merge's memory per part.
inline constexpr std::size_t kMaxPartFileBytes = std::size_t{256} << 20;

nlohmann::ordered_json part_to_json(const SweepPart& part);
// `source` names the part in error messages. Refuses a fingerprint that does not match the grid, a record that
// is not in the shard or whose coordinates differ from the grid's run of that index.
SweepPart part_from_json(const nlohmann::json& json, const std::string& source);

struct MergedSweep {
  SweepGrid grid;
  std::vector<RunRecord> records;    // ascending index
  std::vector<std::size_t> missing;  // run indices no part holds, ascending
};

// Refuses (InputError) no parts, parts of different sweeps (fingerprints differ), and a run held twice.
// With `allow_other_versions` false, every part must have been written by this cgad's version.
MergedSweep merge_parts(const std::vector<SweepPart>& parts, const std::vector<std::string>& sources,
                        bool allow_other_versions = false);

// The whole result of a sweep, as `cgad simulate --json` and `cgad merge --json` print it: grid, fingerprint,
// records, per-cell summaries and the missing runs.
nlohmann::ordered_json sweep_to_json(const MergedSweep& sweep);

std::string hexfloat(double x);                                              // "%a"
double parse_hexfloat(const nlohmann::json& text, const std::string& what);  // InputError if not all consumed

}  // namespace cgad::simulate
