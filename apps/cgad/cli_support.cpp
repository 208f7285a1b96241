#include "cli_support.hpp"

#include "cgad/reference/errors.hpp"
#include "cgad/reference/real.hpp"

#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

namespace cgad::cli {

void add_precision_option(CLI::App& command, unsigned& bits) {
  bits = reference::kDefaultPrecisionBits;
  command.add_option("--precision", bits, "MPFR working precision in bits")->capture_default_str();
}

unsigned apply_precision(unsigned requested_bits) {
  return reference::set_working_precision_bits(requested_bits);
}

std::filesystem::path create_temporary_file(const std::filesystem::path& dir, const std::string& stem) {
  std::string pattern = (dir / ("." + stem + ".XXXXXX")).string();
  const int fd = ::mkstemp(pattern.data());
  if (fd < 0) throw reference::InputError("cannot create a temporary file in " + dir.string());
  const ::mode_t umask = ::umask(0);  // reading the umask means setting it: put it back at once
  ::umask(umask);
  const bool moded = ::fchmod(fd, 0666 & ~umask) == 0;
  ::close(fd);
  if (!moded) {
    ::unlink(pattern.c_str());
    throw reference::InputError("cannot set the permissions of a temporary file in " + dir.string());
  }
  return pattern;
}

void write_atomically(const std::filesystem::path& path, const std::function<void(std::ostream&)>& write) {
  namespace fs = std::filesystem;
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  const fs::path temporary = create_temporary_file(dir, path.filename().string());
  try {
    {
      std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
      write(out);
      out.flush();
      if (!out) throw reference::InputError("cannot write " + temporary.string());
    }
    fs::rename(temporary, path);
  } catch (...) {
    std::error_code ignored;
    fs::remove(temporary, ignored);
    throw;
  }
}

}  // namespace cgad::cli
