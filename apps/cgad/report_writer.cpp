#include "report_writer.hpp"

#include "cli_support.hpp"

#include "cgad/fastpath/atomic_file.hpp"
#include "cgad/reference/errors.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <ostream>

namespace cgad::cli {
namespace {

namespace fs = std::filesystem;
using reference::InputError;

constexpr const char* kBuildingMarker = ".cgad-building";

// Whether `inner` is `outer` or lies inside it (both absolute and normal).
bool within(const fs::path& inner, const fs::path& outer) {
  auto i = inner.begin();
  for (auto o = outer.begin(); o != outer.end(); ++o, ++i) {
    if (o->empty()) continue;  // a trailing separator
    if (i == inner.end() || *i != *o) return false;
  }
  return true;
}

// Removes the half-built report folders of dead processes of this host beside `target` (still marked as
// building: after the swap the old report sits under such a name for a moment, unmarked, and is never removed
// here).
void remove_stale_builds(const fs::path& parent, const std::string& name) {
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(parent, error)) {
    const std::string entry_name = entry.path().filename().string();
    if (!fastpath::is_stale_temporary(entry_name, name)) continue;
    std::error_code ignored;
    if (entry.is_directory(ignored) && !entry.is_symlink(ignored) && fs::exists(entry.path() / kBuildingMarker, ignored)) {
      fs::remove_all(entry.path(), ignored);
    }
  }
}

}  // namespace

ReportWriter::ReportWriter(fs::path target) : shown_(target) {
  if (target.empty()) throw InputError("the report folder path is empty");
  std::error_code error;
  const fs::path absolute = fs::absolute(target, error).lexically_normal();
  if (error) throw InputError("cannot use '" + target.string() + "' as the report folder: " + error.message());
  target_ = absolute.filename().empty() ? absolute.parent_path() : absolute;  // "report/" is "report"
  const fs::path cwd = fs::weakly_canonical(fs::current_path(error), error);
  if (target_ == target_.root_path() || within(cwd, fs::weakly_canonical(target_, error))) {
    throw InputError("the report folder '" + target.string() + "' is the current directory or one above it: "
                     "cgad report replaces the folder it writes as a whole; give it a folder of its own");
  }
  struct stat st;
  if (::stat(target_.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
    throw InputError("the report folder '" + target.string() + "' exists and is not a folder");
  }
  const fs::path parent = target_.parent_path();
  fs::create_directories(parent, error);
  if (error || !fs::is_directory(parent)) {
    throw InputError("cannot create the folder '" + parent.string() + "' for the report: " + error.message());
  }
  const std::string name = target_.filename().string();
  remove_stale_builds(parent, name);
  build_ = parent / fastpath::fresh_temporary_name(name);
  if (::mkdir(build_.c_str(), 0700) != 0) {
    throw InputError("cannot create a temporary report folder in '" + parent.string() + "': " + std::strerror(errno));
  }
  std::ofstream(build_ / kBuildingMarker) << "cgad report is writing this folder; a dead run's copy is removed\n";
}

ReportWriter::~ReportWriter() {
  if (finished_) return;
  std::error_code ignored;
  fs::remove_all(build_, ignored);
}

void ReportWriter::write_file(const std::string& name, const std::string& contents) const {
  write_atomically(build_ / name, [&](std::ostream& out) { out << contents; });
}

fs::path ReportWriter::finish() {
  write_file("report.md", markdown_.str());
  const auto fail = [&](const std::string& what) {
    throw InputError("cannot put the report in place at '" + target_.string() + "': " + what + ": " +
                     std::strerror(errno));
  };
  struct stat st;
  const bool exists = ::stat(target_.c_str(), &st) == 0;
  if (exists && !S_ISDIR(st.st_mode)) {
    errno = ENOTDIR;
    fail("it is no longer a folder");
  }
  // The folder gets the old one's mode, or what mkdir would give a new one.
  const ::mode_t mode = exists ? (st.st_mode & 07777) : (0777 & ~fastpath::process_umask());
  if (::chmod(build_.c_str(), mode) != 0) fail("setting its mode");
  std::error_code error;
  fs::remove(build_ / kBuildingMarker, error);
  if (!exists) {
    if (::rename(build_.c_str(), target_.c_str()) != 0) fail("rename");
    finished_ = true;
    return shown_ / "report.md";
  }
  // The old folder ends up under the build folder's name: atomically where the filesystem can exchange the two.
  fs::path old = build_;
  if (::renameat2(AT_FDCWD, build_.c_str(), AT_FDCWD, target_.c_str(), RENAME_EXCHANGE) != 0) {
    if (errno != EINVAL && errno != ENOSYS) fail("exchanging it with the old report");
    old = target_.parent_path() / (fastpath::fresh_temporary_name(target_.filename().string()) + ".old");
    if (::rename(target_.c_str(), old.c_str()) != 0) fail("moving the old report aside");
    if (::rename(build_.c_str(), target_.c_str()) != 0) {
      const int saved = errno;
      ::rename(old.c_str(), target_.c_str());
      errno = saved;
      fail("rename");
    }
  }
  finished_ = true;
  // What the old folder held besides the report's own files is the user's: move it into the new folder.
  for (const auto& entry : fs::directory_iterator(old, error)) {
    const fs::path moved = target_ / entry.path().filename();
    std::error_code ignored;
    if (!fs::exists(fs::symlink_status(moved, ignored))) fs::rename(entry.path(), moved, ignored);
  }
  fs::remove_all(old, error);
  return shown_ / "report.md";
}

}  // namespace cgad::cli
