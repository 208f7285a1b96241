#include "report_writer.hpp"

#include "cli_support.hpp"

#include "cgad/reference/errors.hpp"

#include <ostream>

namespace cgad::cli {

ReportWriter::ReportWriter(std::filesystem::path dir) : dir_(std::move(dir)) {
  std::error_code error;
  std::filesystem::create_directories(dir_, error);
  if (error || !std::filesystem::is_directory(dir_)) {
    throw reference::InputError("cannot create the report folder '" + dir_.string() + "'");
  }
}

void ReportWriter::write_file(const std::string& name, const std::string& contents) const {
  write_atomically(dir_ / name, [&](std::ostream& out) { out << contents; });
}

std::filesystem::path ReportWriter::finish() const {
  write_file("report.md", markdown_.str());
  return dir_ / "report.md";
}

}  // namespace cgad::cli
