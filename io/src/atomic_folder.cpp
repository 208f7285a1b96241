#include "cgad/io/atomic_folder.hpp"

#include "cgad/io/atomic_file.hpp"
#include "cgad/core/errors.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <ostream>
#include <vector>

namespace cgad::io {
namespace {

namespace fs = std::filesystem;
using core::InputError;

constexpr const char* kBuildingMarker = ".cgad-building";

std::string why(int error) {
  return std::strerror(error);
}

// Whether `inner` is `outer` or lies inside it (both absolute and normal).
bool within(const fs::path& inner, const fs::path& outer) {
  auto i = inner.begin();
  for (auto o = outer.begin(); o != outer.end(); ++o, ++i) {
    if (o->empty()) continue;  // a trailing separator
    if (i == inner.end() || *i != *o) return false;
  }
  return true;
}

// The mount an entry of `dir_fd` lies on (not following a final symlink): the mount id where statx reports one
// (a bind mount of a folder of the same filesystem has the same st_dev), else the device.
struct MountOf {
  dev_t device = 0;
  std::uint64_t mount = 0;
  bool operator==(const MountOf&) const = default;
};
bool mount_of(int dir_fd, const char* name, MountOf& out) {
  struct statx stx;
  if (::statx(dir_fd, name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, STATX_BASIC_STATS | STATX_MNT_ID, &stx) != 0) {
    return false;
  }
  out.device = ::makedev(stx.stx_dev_major, stx.stx_dev_minor);
  out.mount = (stx.stx_mask & STATX_MNT_ID) != 0 ? stx.stx_mnt_id : 0;
  return true;
}

// The names in the directory `fd` (not owned), without "." and "..".
std::vector<std::string> entries(int fd) {
  std::vector<std::string> names;
  const int scan = ::openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (scan < 0) return names;
  DIR* dir = ::fdopendir(scan);
  if (dir == nullptr) {
    ::close(scan);
    return names;
  }
  while (const dirent* entry = ::readdir(dir)) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(dir);
  return names;
}

// The first folder under `name` in `dir_fd` (itself included) that lies on another mount than `mount`, as a path
// relative to it; empty if none. Symbolic links are not followed.
std::string crossing_mount(int dir_fd, const std::string& name, const MountOf& mount) {
  MountOf here;
  if (!mount_of(dir_fd, name.c_str(), here)) return {};
  if (!(here == mount)) return name;
  const int fd = ::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return {};  // not a folder (or a link): nothing below it
  std::string found;
  for (const std::string& entry : entries(fd)) {
    found = crossing_mount(fd, entry, mount);
    if (!found.empty()) {
      found = name + "/" + found;
      break;
    }
  }
  ::close(fd);
  return found;
}

// Removes `name` in `dir_fd` and, for a folder, everything under it -- never following a symbolic link (a link
// is removed as a link) and never entering a folder on another mount than `mount` (it stays, and so does every
// folder above it). Whether everything went.
bool remove_tree(int dir_fd, const std::string& name, const MountOf& mount) {
  struct stat st;
  if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return errno == ENOENT;
  if (!S_ISDIR(st.st_mode)) return ::unlinkat(dir_fd, name.c_str(), 0) == 0;
  MountOf here;
  if (!mount_of(dir_fd, name.c_str(), here) || !(here == mount)) return false;
  const int fd = ::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return false;
  bool all = true;
  for (const std::string& entry : entries(fd)) all = remove_tree(fd, entry, mount) && all;
  ::close(fd);
  return all && ::unlinkat(dir_fd, name.c_str(), AT_REMOVEDIR) == 0;
}

// An open directory, closed on scope exit.
struct Directory {
  explicit Directory(const fs::path& path) : fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)) {}
  ~Directory() {
    if (fd >= 0) ::close(fd);
  }
  Directory(const Directory&) = delete;
  Directory& operator=(const Directory&) = delete;
  int fd;
};

// Removes the half-built folders of dead processes of this host beside the target (still marked as building:
// after the swap the old folder sits under such a name for a moment, unmarked, and is never removed here).
void remove_stale_builds(int parent_fd, const std::string& name, const MountOf& mount) {
  for (const std::string& entry : entries(parent_fd)) {
    if (!is_stale_temporary(entry, name)) continue;
    struct stat st;
    const std::string marker = entry + "/" + kBuildingMarker;
    if (::fstatat(parent_fd, entry.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode) &&
        ::fstatat(parent_fd, marker.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
      remove_tree(parent_fd, entry, mount);
    }
  }
}

}  // namespace

AtomicFolder::AtomicFolder(fs::path target, std::string what) : shown_(target), what_(std::move(what)) {
  const std::string folder = "the " + what_ + " folder";
  const std::string shown = "'" + target.string() + "'";
  if (target.empty()) throw InputError(folder + " path is empty");
  std::error_code error;
  fs::path absolute = fs::absolute(target, error).lexically_normal();
  if (error) throw InputError("cannot use " + shown + " as " + folder + ": " + error.message());
  if (absolute.filename().empty()) absolute = absolute.parent_path();  // "report/" is "report"
  // A symbolic link is written through, as AtomicFile writes through a link to a file: the folder it points to
  // is replaced and the link stays a link (swapping at the link's own path would turn it into a folder and move
  // the user's files out of the one it pointed to).
  struct stat st;
  if (::lstat(absolute.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
    const fs::path resolved = fs::canonical(absolute, error);
    if (error == std::errc::too_many_symbolic_link_levels) {
      throw InputError(folder + " " + shown + " is a symbolic link in a loop (links that lead back to themselves)");
    }
    if (error)
      throw InputError(folder + " " + shown +
                       " is a symbolic link to a missing folder (cgad writes "
                       "through a link only to an existing folder)");
    absolute = resolved;
  }
  target_ = absolute;
  const fs::path cwd = fs::weakly_canonical(fs::current_path(error), error);
  if (target_ == target_.root_path() || within(cwd, fs::weakly_canonical(target_, error))) {
    throw InputError(folder + " " + shown +
                     " is the current directory or one above it: cgad replaces "
                     "the folder it writes as a whole; give it a folder of its own");
  }
  exists_ = ::lstat(target_.c_str(), &st) == 0;
  if (exists_ && !S_ISDIR(st.st_mode)) throw InputError(folder + " " + shown + " exists and is not a folder");
  if (exists_) {
    mode_ = st.st_mode & 07777;
    uid_ = st.st_uid;
    gid_ = st.st_gid;
  }
  const fs::path parent = target_.parent_path();
  fs::create_directories(parent, error);
  if (error || !fs::is_directory(parent)) {
    throw InputError("cannot create the folder '" + parent.string() + "' for the " + what_ + ": " + error.message());
  }
  const Directory parent_dir(parent);
  if (parent_dir.fd < 0) throw InputError("cannot open the folder '" + parent.string() + "': " + why(errno));
  const std::string name = target_.filename().string();
  MountOf mount;
  if (!mount_of(parent_dir.fd, ".", mount)) throw InputError("cannot examine '" + parent.string() + "': " + why(errno));
  mount_device_ = mount.device;
  mount_id_ = mount.mount;
  // The swap renames the folder and moves what the user keeps in it: a mount point cannot be renamed, and
  // nothing cgad removes may lie on another filesystem. Refused before anything is written.
  if (exists_) {
    const std::string mounted = crossing_mount(parent_dir.fd, name, mount);
    if (!mounted.empty()) {
      throw InputError(
          folder + " " + shown + " " +
          (mounted == name ? "is a mount point" : "holds a mount point, '" + (parent / mounted).string() + "'") +
          ": cgad replaces the folder as a whole and never moves or removes anything across a "
          "mount; unmount it or give the " +
          what_ + " another folder");
    }
  }
  remove_stale_builds(parent_dir.fd, name, mount);
  build_ = parent / fresh_temporary_name(name);
  if (::mkdir(build_.c_str(), 0700) != 0) {
    throw InputError("cannot create a temporary " + what_ + " folder in '" + parent.string() + "': " + why(errno));
  }
  built_ = true;
  // The new folder gets the old one's owner and group now (where permitted: another owner needs privilege), so
  // that with a setgid bit (set below) the files written into it get the group, as they would in the old folder.
  if (exists_ && (uid_ != ::geteuid() || gid_ != ::getegid())) {
    if (::chown(build_.c_str(), uid_, gid_) != 0) (void)!::chown(build_.c_str(), static_cast<uid_t>(-1), gid_);
  }
  if (exists_ && (mode_ & S_ISGID) != 0) (void)!::chmod(build_.c_str(), 0700 | S_ISGID);
  std::ofstream(build_ / kBuildingMarker) << "cgad is writing this folder; a dead run's copy is removed\n";
}

AtomicFolder::~AtomicFolder() {
  const std::lock_guard<std::mutex> lock(mutex_);
  discard();
}

void AtomicFolder::abandon() noexcept {
  const std::lock_guard<std::mutex> lock(mutex_);
  if (!built_) return;
  // The writer may add a file between the listing and the folder's own removal (ENOTEMPTY): list again. Once the
  // folder is gone nothing can be created in it.
  const Directory parent(build_.parent_path());
  const std::string name = build_.filename().string();
  for (int attempt = 0; attempt < 100 && parent.fd >= 0; ++attempt) {
    if (remove_tree(parent.fd, name, {mount_device_, mount_id_})) break;
  }
  built_ = false;
}

void AtomicFolder::discard() noexcept {
  if (!built_) return;
  built_ = false;
  const Directory parent(build_.parent_path());
  if (parent.fd >= 0) remove_tree(parent.fd, build_.filename().string(), {mount_device_, mount_id_});
}

void AtomicFolder::write_file(const std::string& name, const std::string& contents) const {
  AtomicFile file(build_ / name);
  file.stream() << contents;
  file.commit();
}

void AtomicFolder::commit() {
  const std::lock_guard<std::mutex> lock(mutex_);
  const std::string shown = "'" + target_.string() + "'";
  const auto fail = [&](const std::string& what, int error) {
    discard();
    throw InputError("cannot put the " + what_ + " in place at " + shown + ": " + what +
                     (error != 0 ? ": " + why(error) : std::string()));
  };
  struct stat st;
  const bool exists = ::lstat(target_.c_str(), &st) == 0;
  if (exists != exists_ || (exists && (!S_ISDIR(st.st_mode) || st.st_uid != uid_ || st.st_gid != gid_))) {
    fail("it was created, removed or replaced while the " + what_ + " was written", 0);
  }
  // The folder gets the old one's mode (setgid and sticky bits included), or what mkdir would give a new one.
  const ::mode_t mode = exists ? mode_ : (0777 & ~process_umask());
  if (::chmod(build_.c_str(), mode) != 0) fail("setting its mode", errno);
  const std::string marker = (build_ / kBuildingMarker).string();
  if (::unlink(marker.c_str()) != 0 && errno != ENOENT) fail("removing its marker", errno);
  if (!exists) {
    if (::rename(build_.c_str(), target_.c_str()) != 0) fail("rename", errno);
    built_ = false;
    return;
  }
  // The old folder ends up under the build folder's name: atomically where the filesystem can exchange the two.
  fs::path old = build_;
  if (::renameat2(AT_FDCWD, build_.c_str(), AT_FDCWD, target_.c_str(), RENAME_EXCHANGE) != 0) {
    if (errno != EINVAL && errno != ENOSYS) fail("exchanging it with the old folder", errno);
    old = target_.parent_path() / (fresh_temporary_name(target_.filename().string()) + ".old");
    if (::rename(target_.c_str(), old.c_str()) != 0) fail("moving the old folder aside", errno);
    if (::rename(build_.c_str(), target_.c_str()) != 0) {
      const int error = errno;
      if (::rename(old.c_str(), target_.c_str()) != 0) {
        built_ = false;  // the temporary is the new folder, whole; the old one is kept under `old`
        throw InputError("cannot put the " + what_ + " in place at " + shown + ": rename: " + why(error) +
                         "; the old folder could not be put back either and is kept, whole, as '" + old.string() + "'");
      }
      fail("rename", error);
    }
  }
  built_ = false;  // from here the temporary's name holds the old folder, the user's
  // What the old folder held besides the new one's files is the user's: move it into the new folder. What the
  // new folder replaces goes, removed without following a link or crossing a mount.
  const Directory old_dir(old);
  const Directory new_dir(target_);
  if (old_dir.fd < 0 || new_dir.fd < 0) {
    throw InputError("the " + what_ + " is in place at " + shown + ", but the old folder, kept as '" + old.string() +
                     "', cannot be opened to move its other files into it: " + why(errno));
  }
  std::vector<std::string> kept;
  for (const std::string& name : entries(old_dir.fd)) {
    struct stat existing;
    const bool replaced = ::fstatat(new_dir.fd, name.c_str(), &existing, AT_SYMLINK_NOFOLLOW) == 0;
    const bool gone = replaced ? remove_tree(old_dir.fd, name, {mount_device_, mount_id_})
                               : ::renameat(old_dir.fd, name.c_str(), new_dir.fd, name.c_str()) == 0;
    if (!gone) {
      kept.push_back(name);
    }
  }
  const Directory parent(old.parent_path());
  if (kept.empty() && parent.fd >= 0 && ::unlinkat(parent.fd, old.filename().c_str(), AT_REMOVEDIR) == 0) return;
  std::string names;
  for (const std::string& name : kept) names += (names.empty() ? "'" : ", '") + name + "'";
  throw InputError("the " + what_ + " is in place at " + shown + ", but the old folder's " +
                   (names.empty() ? std::string("remains") : names) + " could not be moved into it or removed; " +
                   "nothing is lost: the old folder is kept as '" + old.string() + "'");
}

}  // namespace cgad::io
