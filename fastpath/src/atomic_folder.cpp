#include "cgad/fastpath/atomic_folder.hpp"

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

namespace cgad::fastpath {
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

// Removes the half-built folders of dead processes of this host beside `target` (still marked as
// building: after the swap the old folder sits under such a name for a moment, unmarked, and is never removed
// here).
void remove_stale_builds(const fs::path& parent, const std::string& name) {
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(parent, error)) {
    const std::string entry_name = entry.path().filename().string();
    if (!is_stale_temporary(entry_name, name)) continue;
    std::error_code ignored;
    if (entry.is_directory(ignored) && !entry.is_symlink(ignored) && fs::exists(entry.path() / kBuildingMarker, ignored)) {
      fs::remove_all(entry.path(), ignored);
    }
  }
}

}  // namespace

AtomicFolder::AtomicFolder(fs::path target, std::string what) : shown_(target), what_(std::move(what)) {
  const std::string folder = "the " + what_ + " folder";
  if (target.empty()) throw InputError(folder + " path is empty");
  std::error_code error;
  const fs::path absolute = fs::absolute(target, error).lexically_normal();
  if (error) throw InputError("cannot use '" + target.string() + "' as " + folder + ": " + error.message());
  target_ = absolute.filename().empty() ? absolute.parent_path() : absolute;  // "report/" is "report"
  const fs::path cwd = fs::weakly_canonical(fs::current_path(error), error);
  if (target_ == target_.root_path() || within(cwd, fs::weakly_canonical(target_, error))) {
    throw InputError(folder + " '" + target.string() + "' is the current directory or one above it: cgad replaces "
                     "the folder it writes as a whole; give it a folder of its own");
  }
  struct stat st;
  if (::stat(target_.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
    throw InputError(folder + " '" + target.string() + "' exists and is not a folder");
  }
  const fs::path parent = target_.parent_path();
  fs::create_directories(parent, error);
  if (error || !fs::is_directory(parent)) {
    throw InputError("cannot create the folder '" + parent.string() + "' for the " + what_ + ": " + error.message());
  }
  const std::string name = target_.filename().string();
  remove_stale_builds(parent, name);
  build_ = parent / fresh_temporary_name(name);
  if (::mkdir(build_.c_str(), 0700) != 0) {
    throw InputError("cannot create a temporary " + what_ + " folder in '" + parent.string() + "': " + std::strerror(errno));
  }
  std::ofstream(build_ / kBuildingMarker) << "cgad is writing this folder; a dead run's copy is removed\n";
}

AtomicFolder::~AtomicFolder() {
  if (committed_) return;
  std::error_code ignored;
  fs::remove_all(build_, ignored);
}

void AtomicFolder::write_file(const std::string& name, const std::string& contents) const {
  AtomicFile file(build_ / name);
  file.stream() << contents;
  file.commit();
}

void AtomicFolder::commit() {
  const auto fail = [&](const std::string& what) {
    throw InputError("cannot put the " + what_ + " in place at '" + target_.string() + "': " + what + ": " +
                     std::strerror(errno));
  };
  struct stat st;
  const bool exists = ::stat(target_.c_str(), &st) == 0;
  if (exists && !S_ISDIR(st.st_mode)) {
    errno = ENOTDIR;
    fail("it is no longer a folder");
  }
  // The folder gets the old one's mode, or what mkdir would give a new one.
  const ::mode_t mode = exists ? (st.st_mode & 07777) : (0777 & ~process_umask());
  if (::chmod(build_.c_str(), mode) != 0) fail("setting its mode");
  std::error_code error;
  fs::remove(build_ / kBuildingMarker, error);
  if (!exists) {
    if (::rename(build_.c_str(), target_.c_str()) != 0) fail("rename");
    committed_ = true;
    return;
  }
  // The old folder ends up under the build folder's name: atomically where the filesystem can exchange the two.
  fs::path old = build_;
  if (::renameat2(AT_FDCWD, build_.c_str(), AT_FDCWD, target_.c_str(), RENAME_EXCHANGE) != 0) {
    if (errno != EINVAL && errno != ENOSYS) fail("exchanging it with the old folder");
    old = target_.parent_path() / (fresh_temporary_name(target_.filename().string()) + ".old");
    if (::rename(target_.c_str(), old.c_str()) != 0) fail("moving the old folder aside");
    if (::rename(build_.c_str(), target_.c_str()) != 0) {
      const int saved = errno;
      ::rename(old.c_str(), target_.c_str());
      errno = saved;
      fail("rename");
    }
  }
  committed_ = true;
  // What the old folder held besides the new one's files is the user's: move it into the new folder.
  for (const auto& entry : fs::directory_iterator(old, error)) {
    const fs::path moved = target_ / entry.path().filename();
    std::error_code ignored;
    if (!fs::exists(fs::symlink_status(moved, ignored))) fs::rename(entry.path(), moved, ignored);
  }
  fs::remove_all(old, error);
}

}  // namespace cgad::fastpath
