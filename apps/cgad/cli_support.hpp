#pragma once
// What the subcommands share: the --precision option, the rules for what an input and an output may be, and the
// checks every option value gets.
#include <CLI/CLI.hpp>

#include <sys/types.h>

#include <filesystem>
#include <functional>
#include <iosfwd>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace cgad::io {
class AtomicFile;
class InputFile;
}  // namespace cgad::io

namespace cgad::cli {

// Adds --precision BITS (default 256) bound to `bits`, at most `max_bits` (the command's own limit, which the
// value check states; by default the reference's, reference::kMaxPrecisionBits).
void add_precision_option(CLI::App& command, unsigned& bits, unsigned max_bits = 0);

// Sets the MPFR working precision and returns the effective bits, which every output reports: Boost counts
// precision in decimal digits, so the effective bits can exceed the request by a few (256 gives 257).
unsigned apply_precision(unsigned requested_bits);

// An output file as every command writes one. A path is replaced atomically by io::AtomicFile
// (atomic_file.hpp: a missing or regular file, or a symlink to one, which is written through; a directory, a
// device node, a FIFO, a socket or "" is refused, exit status 2), with the contents written as they are produced,
// so memory does not grow with them. "-" is standard output, written as the contents are produced (no temporary
// copy anywhere, so neither $TMPDIR nor the space on /tmp matters): a command refused half-way may have printed
// the records before the refusal, and its exit status 2 says they are not a result. A write error on standard
// output (a full disk, /dev/full, a closed descriptor) is an InputError naming the error, never exit status 0.
class OutputFile {
 public:
  explicit OutputFile(const std::string& path);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  std::ostream& stream();
  // Whether committing would overwrite, or "-" append to, the file with this identity (a command's own input).
  bool replaces(dev_t device, ino_t inode) const;
  bool standard_output() const { return !file_; }
  void commit();

 private:
  std::string path_;
  std::unique_ptr<io::AtomicFile> file_;
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
//     CLI11 drops empty items silently, so these are found in argv before CLI11 splits them (check_list_items);
//   - a list option refuses a repeated item, over all its occurrences (--seeds 1,1; --optimizers cgad,cgad;
//     --seeds 1 --seeds 01): every list names runs or rows, and a repeated one would be computed and printed
//     twice. Integers compare by value, other items as written.
void install_value_checks(CLI::App& app);
// An integer option's real upper limit, checked on the text before CLI11 converts it: a value past a 32-bit
// variable (--jobs 4294967296) was "Could not convert", and one past 64 bits quoted 2^64 - 1 as the limit,
// which the option then refused too. The message quotes the value and states `max` and `why` (e.g. "bits").
CLI::Validator at_most(std::uint64_t max, const std::string& why);

// InputError for the first empty or repeated item of a list option in argv (see install_value_checks).
void check_list_items(const CLI::App& app, int argc, const char* const* argv);

// Out of memory ends like bad input: one line on stderr, written without allocating, and exit status 2. Installed
// first thing in main.cpp: a reserve of a few MiB is given back at the first failed allocation (so that
// unwinding, which allocates too, does not fail a second time and terminate), and an out-of-memory exception
// that reaches std::terminate (from a destructor or a thread) exits with status 2 as well.
void install_out_of_memory_handling();
void report_out_of_memory() noexcept;

// Makes std::cout write through a io::FdOutputStream on descriptor 1 (main.cpp, once), so that a failed
// write keeps its own errno: glibc's stdio leaves errno to whatever call came after the write (on /dev/full the
// message said "Inappropriate ioctl for device" instead of "No space left on device").
void route_standard_output();

// Flushes standard output and refuses (InputError) a write error on it, which would otherwise end in exit
// status 0 with a truncated or missing result.
void finish_standard_output();

// An input file of a command, as its outputs are checked against it: its name in messages, as the user gave it
// ("the input file 's.jsonl'", "the --q8-maps file 'maps.json'"), and its identity (io::InputFile's).
struct InputIdentity {
  std::string name;
  dev_t device = 0;
  ino_t inode = 0;
};
// The one rule for a command's outputs and inputs (docs/design.md §7): no output may name any input -- the same
// path, a symbolic or a hard link to it, or standard output being that file ("-", /dev/stdout, or a redirection
// such as >> FILE) -- since writing it would destroy, or append to, what the command reads. InputError for the
// first input `output` (a path shown as `output_name`, e.g. "--output 'out.jsonl'") would replace or append to.
void refuse_output_onto_inputs(const OutputFile& output, const std::string& output_name,
                               const std::vector<InputIdentity>& inputs);

// Whether standard output is the regular file with this identity.
bool standard_output_is(dev_t device, ino_t inode);
// Whether an output path is standard output: "-", or a name of the very file (pipe, terminal) descriptor 1 is
// (/dev/stdout, /proc/self/fd/1, or the file a > redirection opened), so that a command that prints on standard
// output can refuse a second output into it (the two would be interleaved, or one replaced under the other).
bool names_standard_output(const std::string& path);
// refuse_output_onto_inputs for a command that prints on standard output and reads the file `input`, named `path`
// (cgad noise --stream s.jsonl >> s.jsonl would append to the stream it reads).
void refuse_standard_output_onto(const io::InputFile& input, const std::string& path);

}  // namespace cgad::cli
