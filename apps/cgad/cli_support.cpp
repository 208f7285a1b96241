#include "cli_support.hpp"

#include "cgad/io/atomic_file.hpp"
#include "cgad/io/input_file.hpp"
#include "cgad/core/errors.hpp"
#include "cgad/core/optimizer_options.hpp"
#include "cgad/reference/real.hpp"

#include <fcntl.h>
#include <gmp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <iostream>
#include <map>
#include <set>
#include <thread>
#include <vector>

namespace cgad::cli {

using core::InputError;

void add_precision_option(CLI::App& command, unsigned& bits, unsigned max_bits) {
  bits = reference::kDefaultPrecisionBits;
  command.add_option("--precision", bits, "MPFR working precision in bits")
      ->capture_default_str()
      ->check(at_most(max_bits == 0 ? reference::kMaxPrecisionBits : max_bits, "bits"));
}

unsigned apply_precision(unsigned requested_bits) {
  return reference::set_working_precision_bits(requested_bits);
}

namespace {

std::string why(int error) {
  return std::strerror(error);
}

// The stream std::cout writes through once route_standard_output() ran (null before). Never destroyed: std::cout
// is flushed after every static destructor has run, and must still have its buffer then.
io::FdOutputStream* routed_output = nullptr;

// The errno of the first failed write to standard output, 0 if none (or if it was never routed).
int standard_output_error() {
  return routed_output != nullptr ? routed_output->error() : 0;
}

constexpr char kOutOfMemory[] =
    "cgad: out of memory: this input needs more memory than the process may use (ulimit -v, a cgroup or the "
    "machine; docs/testing.md says what each input takes)\n";

// Memory set aside at start and given back on the first failed allocation, so that unwinding and reporting have
// some to work with (a second std::bad_alloc while unwinding ended in std::terminate, exit status 134).
void* memory_reserve = nullptr;
constexpr std::size_t kMemoryReserveBytes = std::size_t{8} << 20;

void release_memory_reserve() {
  std::free(memory_reserve);
  memory_reserve = nullptr;
  std::set_new_handler(nullptr);  // the failed allocation is retried once; failing again, it throws
}

// The allocator GMP and MPFR use for every number (the reference's MPFR values): theirs aborts the process on
// failure ("GNU MP: Cannot allocate memory", exit status 134), and an exception cannot pass through their C
// frames. This one gives back the reserve and tries again once, then reports and exits with status 2 (an output
// not yet committed is an unnamed temporary, atomic_file.hpp: nothing is left behind).
void give_back_reserve_or_exit() {
  if (memory_reserve == nullptr) {
    report_out_of_memory();
    std::_Exit(2);
  }
  std::free(memory_reserve);
  memory_reserve = nullptr;
}
void* gmp_allocate(std::size_t bytes) {
  for (;;) {
    if (void* memory = std::malloc(bytes); memory != nullptr || bytes == 0) return memory;
    give_back_reserve_or_exit();
  }
}
// A new block and a copy (GMP says the old size), so that the old block is never touched after a realloc.
void* gmp_reallocate(void* old, std::size_t old_bytes, std::size_t bytes) {
  void* memory = gmp_allocate(bytes);
  if (old != nullptr && memory != nullptr) std::memcpy(memory, old, std::min(old_bytes, bytes));
  std::free(old);
  return memory;
}
void gmp_free(void* memory, std::size_t /*bytes*/) {
  std::free(memory);
}

[[noreturn]] void terminate_handler() {
  // An exception that escaped where none may (a destructor, a thread): out of memory is still bad input's exit.
  if (const std::exception_ptr error = std::current_exception()) {
    try {
      std::rethrow_exception(error);
    } catch (const std::bad_alloc&) {
      report_out_of_memory();
      std::_Exit(2);
    } catch (...) {}
  }
  std::abort();
}

}  // namespace

void install_out_of_memory_handling() {
  memory_reserve = std::malloc(kMemoryReserveBytes);
  if (memory_reserve != nullptr) std::memset(memory_reserve, 0, kMemoryReserveBytes);  // really mapped
  std::set_new_handler(release_memory_reserve);
  std::set_terminate(terminate_handler);
  ::mp_set_memory_functions(gmp_allocate, gmp_reallocate, gmp_free);
}

void report_out_of_memory() noexcept {
  (void)!::write(STDERR_FILENO, kOutOfMemory, sizeof kOutOfMemory - 1);
}

void route_standard_output() {
  if (routed_output != nullptr) return;
  routed_output = new io::FdOutputStream(STDOUT_FILENO);
  std::cout.flush();
  std::cout.rdbuf(routed_output->rdbuf());
}

bool standard_output_is(dev_t device, ino_t inode) {
  struct stat st;
  return ::fstat(STDOUT_FILENO, &st) == 0 && S_ISREG(st.st_mode) && st.st_dev == device && st.st_ino == inode;
}

bool names_standard_output(const std::string& path) {
  if (path == "-") return true;
  struct stat named, out;
  return ::stat(path.c_str(), &named) == 0 && ::fstat(STDOUT_FILENO, &out) == 0 && named.st_dev == out.st_dev &&
         named.st_ino == out.st_ino;
}

void refuse_output_onto_inputs(const OutputFile& output, const std::string& output_name,
                               const std::vector<InputIdentity>& inputs) {
  for (const InputIdentity& input : inputs) {
    if (!output.replaces(input.device, input.inode)) continue;
    if (output.standard_output()) {
      throw InputError("standard output is " + input.name + " ('-' or a redirection such as >> FILE): the output " +
                       "would be written into the file being read");
    }
    throw InputError(output_name + " is " + input.name + ": writing it would destroy what the command reads");
  }
}

void refuse_standard_output_onto(const io::InputFile& input, const std::string& path) {
  refuse_output_onto_inputs(OutputFile("-"), "-", {{"the input file '" + path + "'", input.device(), input.inode()}});
}

// --- OutputFile -------------------------------------------------------------------------------------------------

OutputFile::OutputFile(const std::string& path) : path_(path) {
  if (path != "-") file_ = std::make_unique<io::AtomicFile>(path);
}

OutputFile::~OutputFile() = default;

std::ostream& OutputFile::stream() {
  return file_ ? file_->stream() : std::cout;
}

bool OutputFile::replaces(dev_t device, ino_t inode) const {
  return file_ ? file_->replaces(device, inode) : standard_output_is(device, inode);
}

void OutputFile::commit() {
  if (file_) {
    file_->commit();
    return;
  }
  finish_standard_output();
}

void write_atomically(const std::filesystem::path& path, const std::function<void(std::ostream&)>& write) {
  OutputFile output(path.string());
  write(output.stream());
  output.commit();
}

// --- option values ----------------------------------------------------------------------------------------------

namespace {

// The name of at_most's validators, by which the value check knows an option has a limit of its own.
constexpr char kAtMost[] = "at most";

bool all_digits(const std::string& text, std::size_t from) {
  if (from >= text.size()) return false;
  for (std::size_t i = from; i < text.size(); ++i) {
    if (text[i] < '0' || text[i] > '9') return false;
  }
  return true;
}

// The check for one value of `option`, by the type CLI11 converts it to (its type name: INT, UINT, FLOAT, ...;
// a list's is its element's). Integers lose their leading zeros here, so that CLI11's base-0 conversion reads
// "010" as ten, not as octal eight.
std::string check_value(std::string& value, const std::string& type, bool has_limit) {
  // CLI11 puts the option's name in front of each message.
  if (value.empty()) return "empty value, expected " + std::string(type.rfind("TEXT", 0) == 0 ? "text" : "a number");
  const bool unsigned_type = type.rfind("UINT", 0) == 0;
  const bool integer = unsigned_type || type.rfind("INT", 0) == 0;
  if (integer) {
    const bool sign = value.front() == '+' || value.front() == '-';
    if (!all_digits(value, sign ? 1 : 0)) return "'" + value + "' is not a decimal integer";
    if (unsigned_type && value.front() == '-') return "must be a non-negative integer, got '" + value + "'";
    const std::size_t first = value.find_first_not_of('0', sign ? 1 : 0);
    const std::string digits = first == std::string::npos ? "0" : value.substr(first);
    // Past 64 bits CLI11 would saturate the value (99999999999999999999 became 9223372036854775807, and the
    // range check after it quoted that number): refuse it here, in the user's words.
    const bool negative = value.front() == '-';
    const std::string limit = unsigned_type ? "18446744073709551615"
                              : negative    ? "9223372036854775808"
                                            : "9223372036854775807";
    // An option with its own limit (at_most, which runs after this check) states that one instead.
    if (!has_limit && (digits.size() > limit.size() || (digits.size() == limit.size() && digits > limit))) {
      return "'" + value + "' is out of range (a " + std::string(unsigned_type ? "64-bit unsigned" : "64-bit") +
             " integer is at most " + (negative ? "-" : "") + limit + (negative ? " in magnitude" : "") + ")";
    }
    value = (negative ? "-" : "") + digits;
  } else if (type.rfind("FLOAT", 0) == 0) {
    if (core::classify_number_text(value) == core::NumberText::invalid) {
      return "'" + value + "' is not a number";
    }
    // CLI11 converts to double: a nonzero value below its range would silently be 0 (--zero-fraction 1e-400).
    if (core::rounds_to_zero(value, std::strtod(value.c_str(), nullptr) == 0.0)) {
      return "is not 0 as written, got '" + value + "', which rounds to 0 in double";
    }
  }
  return {};
}

void install_on(CLI::App& app) {
  for (CLI::Option* option : app.get_options()) {
    if (option->get_type_size() == 0) continue;  // a flag: no value
    const std::string type = option->get_type_name();
    bool has_limit = false;
    try {
      has_limit = option->get_validator(kAtMost) != nullptr;
    } catch (const CLI::OptionNotFound&) {}
    option->transform(CLI::Validator(
        [type, has_limit](std::string& value) { return check_value(value, type, has_limit); }, "", "value check"));
  }
  for (CLI::App* sub : app.get_subcommands({})) install_on(*sub);
}

}  // namespace

void install_value_checks(CLI::App& app) {
  install_on(app);
}

CLI::Validator at_most(std::uint64_t max, const std::string& why) {
  return CLI::Validator(
      [max, why](std::string& value) -> std::string {
        const std::size_t sign = !value.empty() && value.front() == '+' ? 1 : 0;
        if (!all_digits(value, sign)) return {};  // not a plain count: the value check says what is wrong
        const std::size_t first = value.find_first_not_of('0', sign);
        const std::string digits = first == std::string::npos ? "0" : value.substr(first);
        const std::string limit = std::to_string(max);
        if (digits.size() < limit.size() || (digits.size() == limit.size() && digits <= limit)) return {};
        return "'" + value + "' is out of range: at most " + limit + " " + why;
      },
      "<= " + std::to_string(max), kAtMost);
}

namespace {

// A list item as the value it stands for: an integer without its sign '+' and leading zeros ("01" is seed 1), any
// other item as written, less surrounding blanks.
std::string list_item_value(const std::string& item) {
  const std::size_t first = item.find_first_not_of(" \t");
  const std::string text = item.substr(first, item.find_last_not_of(" \t") - first + 1);
  const bool sign = text.front() == '+' || text.front() == '-';
  if (!all_digits(text, sign ? 1 : 0)) return text;
  const std::size_t digits = text.find_first_not_of('0', sign ? 1 : 0);
  if (digits == std::string::npos) return "0";
  return (text.front() == '-' ? "-" : "") + text.substr(digits);
}

}  // namespace

void check_list_items(const CLI::App& app, int argc, const char* const* argv) {
  const CLI::App* command = &app;
  // The items seen so far of each list option, over all its occurrences (--seeds 1 --seeds 1 repeats too).
  std::map<const CLI::Option*, std::set<std::string>> seen;
  const auto check = [&seen](const CLI::Option* option, const std::string& value) {
    const char delimiter = option->get_delimiter();
    if (delimiter == '\0') return;
    std::size_t start = 0;
    for (;;) {
      const std::size_t end = value.find(delimiter, start);
      const std::string item = value.substr(start, end == std::string::npos ? std::string::npos : end - start);
      if (value.empty()) throw InputError(option->get_name() + ": empty value, expected a list");
      if (item.find_first_not_of(" \t") == std::string::npos) {
        throw InputError(option->get_name() + ": an empty item in the list '" + value + "'");
      }
      if (!seen[option].insert(list_item_value(item)).second) {
        throw InputError(option->get_name() + ": the list repeats a value ('" + item + "' in '" + value +
                         "'): each item is one run or one row, so a repeated one is a typo, not a second run");
      }
      if (end == std::string::npos) return;
      start = end + 1;
    }
  };
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") return;
    if (arg.size() < 2 || arg[0] != '-') {
      // A subcommand name switches the options that apply.
      for (const CLI::App* sub : command->get_subcommands({})) {
        if (sub->check_name(arg)) command = sub;
      }
      continue;
    }
    const std::size_t equals = arg.find('=');
    const std::string flag = arg.substr(0, equals);
    const CLI::Option* option = nullptr;
    try {
      option = command->get_option_no_throw(flag);
    } catch (...) {
      option = nullptr;
    }
    if (option == nullptr || option->get_delimiter() == '\0') continue;
    if (equals != std::string::npos) {
      check(option, arg.substr(equals + 1));
      continue;
    }
    // The values that follow, up to the next option (a token starting with '-' that is not a negative number).
    for (int j = i + 1; j < argc; ++j) {
      const std::string value = argv[j];
      if (value.size() > 1 && value[0] == '-' && !(value[1] >= '0' && value[1] <= '9')) break;
      check(option, value);
      if (option->get_expected_max() <= 1) break;
      // A vector option takes several words; a word that is a subcommand name ends them.
      bool subcommand = false;
      for (const CLI::App* sub : command->get_subcommands({})) subcommand = subcommand || sub->check_name(value);
      if (subcommand) break;
    }
  }
}

void finish_standard_output() {
  const int earlier = errno;  // where standard output was not routed: the failed write's error, if still there
  std::cout.flush();
  const bool stream_ok = static_cast<bool>(std::cout);
  errno = 0;
  const bool flushed = std::fflush(stdout) == 0;
  const int routed = standard_output_error();
  const int error = routed != 0 ? routed : errno != 0 ? errno : (stream_ok || routed_output != nullptr ? 0 : earlier);
  if (!stream_ok || !flushed || std::ferror(stdout) || routed != 0) {
    throw InputError("cannot write to standard output" + (error != 0 ? ": " + why(error) : std::string()));
  }
}

}  // namespace cgad::cli
