#pragma once
// What the subcommands share: the --precision option, and writing a result file atomically.
#include <CLI/CLI.hpp>

#include <filesystem>
#include <functional>
#include <iosfwd>
#include <string>

namespace cgad::cli {

// Adds --precision BITS (default 256) bound to `bits`.
void add_precision_option(CLI::App& command, unsigned& bits);

// Sets the MPFR working precision and returns the effective bits, which every output reports: Boost counts
// precision in decimal digits, so the effective bits can exceed the request by a few (256 gives 257).
unsigned apply_precision(unsigned requested_bits);

// Creates an empty file `dir/.stem.XXXXXX` (unique name) and returns its path. mkstemp makes it 0600; it is
// given the mode any newly created file would have (0666 less the umask), since it is renamed into place as
// the user's output and must be as readable as a file written directly.
std::filesystem::path create_temporary_file(const std::filesystem::path& dir, const std::string& stem);

// Writes a file by calling `write` on a stream to a temporary file in the same directory, then renames it
// over `path`. If `write` throws, or the stream fails, the temporary is removed and `path` is untouched.
void write_atomically(const std::filesystem::path& path, const std::function<void(std::ostream&)>& write);

}  // namespace cgad::cli
