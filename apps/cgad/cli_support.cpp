#include "cli_support.hpp"

#include "cgad/reference/errors.hpp"
#include "cgad/reference/real.hpp"

#include <fstream>
#include <unistd.h>

namespace cgad::cli {

void add_precision_option(CLI::App& command, unsigned& bits) {
  bits = reference::kDefaultPrecisionBits;
  command.add_option("--precision", bits, "MPFR working precision in bits")->capture_default_str();
}

unsigned apply_precision(unsigned requested_bits) {
  return reference::set_working_precision_bits(requested_bits);
}

void write_atomically(const std::filesystem::path& path, const std::function<void(std::ostream&)>& write) {
  namespace fs = std::filesystem;
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  std::string pattern = (dir / ("." + path.filename().string() + ".XXXXXX")).string();
  const int fd = ::mkstemp(pattern.data());
  if (fd < 0) throw reference::InputError("cannot create a temporary file beside " + path.string());
  ::close(fd);
  const fs::path temporary(pattern);
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
