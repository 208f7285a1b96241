// `cgad merge`: combines the part files of a sharded `cgad simulate` run and prints what the unsharded run
// would have printed. Parts of different sweeps and runs held twice are refused; missing runs are refused too
// unless --allow-partial, and then the table says which cells are incomplete.
#include "commands.hpp"
#include "simulate_output.hpp"

#include "cgad/reference/errors.hpp"
#include "cgad/simulate/sweep_json.hpp"

#include <filesystem>
#include <fstream>
#include <memory>

namespace cgad::cli {
namespace {

using reference::InputError;

struct MergeOptions {
  std::vector<std::string> parts;
  bool allow_partial = false;
  bool allow_other_versions = false;
  SweepOutputOptions output;
};

simulate::SweepPart read_part(const std::string& path) {
  // A directory opens as a stream on Linux and fails only on reading; a FIFO could block. Parts are files.
  std::error_code ignored;  // a path that cannot be examined is left to the open below to report
  const std::filesystem::file_status status = std::filesystem::status(path, ignored);
  if (std::filesystem::exists(status) && !std::filesystem::is_regular_file(status)) {
    throw InputError("merge: '" + path + "' is not a regular file");
  }
  std::ifstream in(path);
  if (!in) throw InputError("merge: cannot read '" + path + "'");
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(path + ": not JSON: " + e.what());
  }
  return simulate::part_from_json(json, path);
}

std::string describe_run(const simulate::SweepGrid& grid, std::size_t index) {
  const simulate::RunKey key = simulate::run_key(grid, index);
  return "run " + std::to_string(index) + " = " + key.method + " tau " + std::to_string(key.tau) + " size " +
         std::to_string(key.size) + " " + std::string(fastpath::to_string(key.state)) + " seed " +
         std::to_string(key.seed);
}

void run_merge(const MergeOptions& o) {
  check_sweep_output(o.output);
  std::vector<simulate::SweepPart> parts;
  for (const auto& path : o.parts) parts.push_back(read_part(path));
  simulate::MergedSweep merged = simulate::merge_parts(parts, o.parts, o.allow_other_versions);
  if (!merged.missing.empty() && !o.allow_partial) {
    throw InputError("merge: " + std::to_string(merged.missing.size()) + " of " +
                     std::to_string(simulate::run_count(merged.grid)) + " runs are missing (first: " +
                     describe_run(merged.grid, merged.missing.front()) +
                     "); pass --allow-partial to tabulate what is there");
  }
  write_sweep_output(merged, o.output);
}

}  // namespace

void add_merge_command(CLI::App& app) {
  auto o = std::make_shared<MergeOptions>();
  CLI::App* command = app.add_subcommand("merge", "Combine the part files of a sharded cgad simulate run");
  command->add_option("parts", o->parts, "part files written by cgad simulate --shard I/N --out FILE")->required();
  command->add_flag("--allow-partial", o->allow_partial, "tabulate even when runs are missing");
  command->add_flag("--allow-other-versions", o->allow_other_versions,
                    "merge parts written by another cgad version (refused by default)");
  add_sweep_output_options(*command, o->output);
  command->callback([o] { run_merge(*o); });
}

}  // namespace cgad::cli
