#pragma once
// What the subcommands share: the --precision option, the rules for what an input and an output may be, and the
// checks every option value gets.
#include <CLI/CLI.hpp>

#include <sys/types.h>

#include <filesystem>
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>

namespace cgad::fastpath {
class AtomicFile;
}

namespace cgad::cli {

// Adds --precision BITS (default 256) bound to `bits`.
void add_precision_option(CLI::App& command, unsigned& bits);

// Sets the MPFR working precision and returns the effective bits, which every output reports: Boost counts
// precision in decimal digits, so the effective bits can exceed the request by a few (256 gives 257).
unsigned apply_precision(unsigned requested_bits);

// An output file as every command writes one. A path is replaced atomically by fastpath::AtomicFile
// (atomic_file.hpp: a missing or regular file, or a symlink to one, which is written through; a directory, a
// device node, a FIFO, a socket or "" is refused, exit status 2), with the contents written as they are produced,
// so memory does not grow with them. "-" is standard output: the contents are spooled to an unnamed temporary
// file (in $TMPDIR, else /tmp; it has no name, so nothing is left behind) and copied to standard output by
// commit(), so a command refused half-way prints nothing, and a write error on standard output (a full disk,
// /dev/full, a closed descriptor) is an InputError rather than a silent exit status 0.
class OutputFile {
 public:
  explicit OutputFile(const std::string& path);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  std::ostream& stream();
  // Whether committing would overwrite the file with this identity (a command's own input).
  bool replaces(dev_t device, ino_t inode) const;
  void commit();

 private:
  std::string path_;
  std::unique_ptr<fastpath::AtomicFile> file_;
  int spool_fd_ = -1;
  std::unique_ptr<std::ostream> spool_;
};

// Writes `path` by calling `write` on the stream of an OutputFile, then commits it. If `write` throws, or any
// write fails, the target (or standard output, for "-") is untouched.
void write_atomically(const std::filesystem::path& path, const std::function<void(std::ostream&)>& write);

// The checks every option value of every subcommand gets before CLI11 converts it, installed once on the
// top-level app after all subcommands are registered (main.cpp):
//   - an empty value (--seed "", --threads "") is refused: CLI11 would turn it into 0 (or an empty string);
//   - an integer option takes decimal digits only, with an optional sign: CLI11 alone reads "010" as octal 8,
//     "0x10" as 16 and " 8" as 8; an unsigned one refuses a minus sign ("-1" would wrap to 2^64 - 1);
//   - a floating-point option takes the one decimal grammar of reference::is_decimal_number;
//   - a list option (a delimiter, as --seeds 1,2,3) refuses an empty item (--tau 0,,1; a trailing comma):
//     CLI11 drops empty items silently, so these are found in argv before CLI11 splits them (check_list_items).
void install_value_checks(CLI::App& app);
// InputError for the first empty item of a list option in argv (see install_value_checks).
void check_list_items(const CLI::App& app, int argc, const char* const* argv);

// Flushes standard output and refuses (InputError) a write error on it, which would otherwise end in exit
// status 0 with a truncated or missing result.
void finish_standard_output();

}  // namespace cgad::cli
