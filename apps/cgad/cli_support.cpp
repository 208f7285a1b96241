#include "cli_support.hpp"

#include "cgad/fastpath/atomic_file.hpp"
#include "cgad/reference/errors.hpp"
#include "cgad/reference/real.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <thread>
#include <vector>

namespace cgad::cli {

using reference::InputError;

void add_precision_option(CLI::App& command, unsigned& bits) {
  bits = reference::kDefaultPrecisionBits;
  command.add_option("--precision", bits, "MPFR working precision in bits")->capture_default_str();
}

unsigned apply_precision(unsigned requested_bits) {
  return reference::set_working_precision_bits(requested_bits);
}

namespace {

std::string why(int error) { return std::strerror(error); }

// An unnamed temporary file for the standard-output spool: O_TMPFILE where the filesystem has it, else a
// mkstemp file unlinked at once (so a crash leaves nothing either way).
int unnamed_temporary() {
  const char* env = std::getenv("TMPDIR");
  const std::string dir = env != nullptr && env[0] != '\0' ? env : "/tmp";
  int fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0) return fd;
  std::string pattern = dir + "/.cgad-stdout.XXXXXX";
  fd = ::mkostemp(pattern.data(), O_CLOEXEC);
  if (fd < 0) throw InputError("cannot create a temporary file in " + dir + " for standard output: " + why(errno));
  ::unlink(pattern.c_str());
  return fd;
}

}  // namespace

// --- OutputFile -------------------------------------------------------------------------------------------------

OutputFile::OutputFile(const std::string& path) : path_(path) {
  if (path == "-") {
    spool_fd_ = unnamed_temporary();
    spool_ = std::make_unique<fastpath::FdOutputStream>(spool_fd_);
  } else {
    file_ = std::make_unique<fastpath::AtomicFile>(path);
  }
}

OutputFile::~OutputFile() {
  spool_.reset();
  if (spool_fd_ >= 0) ::close(spool_fd_);
}

std::ostream& OutputFile::stream() { return file_ ? file_->stream() : *spool_; }

bool OutputFile::replaces(dev_t device, ino_t inode) const { return file_ && file_->replaces(device, inode); }

void OutputFile::commit() {
  if (file_) {
    file_->commit();
    return;
  }
  auto& spool = static_cast<fastpath::FdOutputStream&>(*spool_);
  spool.flush();
  if (!spool) throw InputError("cannot spool standard output to a temporary file: " + why(spool.error()));
  // Whatever else went to std::cout before comes first.
  std::cout.flush();
  std::fflush(stdout);
  if (::lseek(spool_fd_, 0, SEEK_SET) != 0) throw InputError("cannot read back the standard-output spool: " + why(errno));
  std::vector<char> chunk(1 << 16);
  for (;;) {
    const ssize_t n = ::read(spool_fd_, chunk.data(), chunk.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw InputError("cannot read back the standard-output spool: " + why(errno));
    if (n == 0) break;
    if (!fastpath::write_all(STDOUT_FILENO, chunk.data(), static_cast<std::size_t>(n))) {
      throw InputError("cannot write to standard output: " + why(errno));
    }
  }
}

void write_atomically(const std::filesystem::path& path, const std::function<void(std::ostream&)>& write) {
  OutputFile output(path.string());
  write(output.stream());
  output.commit();
}

// --- option values ----------------------------------------------------------------------------------------------

namespace {

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
std::string check_value(std::string& value, const std::string& type) {
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
    value = (sign && value.front() == '-' ? "-" : "") + digits;
  } else if (type.rfind("FLOAT", 0) == 0) {
    if (reference::classify_number_text(value) == reference::NumberText::invalid) {
      return "'" + value + "' is not a number";
    }
  }
  return {};
}

void install_on(CLI::App& app) {
  for (CLI::Option* option : app.get_options()) {
    if (option->get_type_size() == 0) continue;  // a flag: no value
    const std::string type = option->get_type_name();
    option->transform(CLI::Validator([type](std::string& value) { return check_value(value, type); }, "", "value check"));
  }
  for (CLI::App* sub : app.get_subcommands({})) install_on(*sub);
}

}  // namespace

void install_value_checks(CLI::App& app) { install_on(app); }

void check_list_items(const CLI::App& app, int argc, const char* const* argv) {
  const CLI::App* command = &app;
  const auto check = [](const CLI::Option* option, const std::string& value) {
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
  const int earlier = errno;  // the error of the write that failed, if one did (best effort: errno may be stale)
  std::cout.flush();
  const bool stream_ok = static_cast<bool>(std::cout);
  errno = 0;
  const bool flushed = std::fflush(stdout) == 0;
  const int error = errno != 0 ? errno : (stream_ok ? 0 : earlier);
  if (!stream_ok || !flushed || std::ferror(stdout)) {
    throw InputError("cannot write to standard output" + (error != 0 ? ": " + why(error) : std::string()));
  }
}

}  // namespace cgad::cli
