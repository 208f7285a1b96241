// `cgad merge`: combines the part files of a sharded `cgad simulate` run and prints what the unsharded run
// would have printed. Parts of different sweeps and runs held twice are refused; missing runs are refused too
// unless --allow-partial, and then the table says which cells are incomplete.
#include "cli_support.hpp"
#include "commands.hpp"
#include "simulate_output.hpp"

#include "cgad/differential/strict_json.hpp"
#include "cgad/io/input_file.hpp"
#include "cgad/core/errors.hpp"
#include "cgad/simulate/sweep_json.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace cgad::cli {
namespace {

using core::InputError;

struct MergeOptions {
  std::vector<std::string> parts;
  bool allow_partial = false;
  bool allow_other_versions = false;
  SweepOutputOptions output;
};

simulate::SweepPart read_part(const std::string& path) {
  // A part is the regular file cgad simulate --out wrote, never a pipe, FIFO or directory.
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) throw InputError("merge: cannot read '" + path + "': " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) throw InputError("merge: '" + path + "' is not a regular file");
  if (static_cast<std::uintmax_t>(st.st_size) > simulate::kMaxPartFileBytes) {
    throw InputError("merge: '" + path + "' is larger than " + std::to_string(simulate::kMaxPartFileBytes >> 20) +
                     " MiB, the most a part file may hold (a sweep's records are bounded before it runs, so no part "
                     "cgad simulate writes is this large)");
  }
  // Parsed as it is read: the text is never held beside its tree.
  io::InputFile in(path);
  refuse_standard_output_onto(in, path);
  const nlohmann::json json = differential::parse_json_document(in.stream(), path);
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
                     std::to_string(simulate::run_count(merged.grid)) +
                     " runs are missing (first: " + describe_run(merged.grid, merged.missing.front()) +
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
