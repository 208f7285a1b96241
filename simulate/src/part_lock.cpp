#include "cgad/simulate/part_lock.hpp"

#include "cgad/core/errors.hpp"

#include <cerrno>
#include <string>
#include <cstring>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace cgad::simulate {

std::filesystem::path PartLock::lock_path(const std::filesystem::path& target) {
  std::error_code ignored;  // a target that does not exist yet resolves as far as it exists
  const std::filesystem::path resolved = std::filesystem::weakly_canonical(std::filesystem::absolute(target), ignored);
  const std::filesystem::path& path = resolved.empty() ? target : resolved;
  return path.parent_path() / ("." + path.filename().string() + ".cgad-lock");
}

namespace {

// Why the lock file could not be made or locked, in the user's terms: every cause is the place the user chose for
// --out (a read-only filesystem, no permission, a folder or a link where the lock goes, a name too long to take
// the lock's prefix and suffix), so each is bad input, one line, not an internal error.
[[noreturn]] void refuse(const std::filesystem::path& target, const std::filesystem::path& lock, int error) {
  std::string why = std::strerror(error);
  if (error == ELOOP) why = "it is a symbolic link, which a lock file may not be";
  if (error == ENAMETOOLONG)
    why = "the name is too long: the lock adds 11 characters to the file's name, past the filesystem's limit";
  throw core::InputError("cannot make the lock file " + lock.string() + " that guards " + target.string() + ": " + why);
}

}  // namespace

PartLock::PartLock(const std::filesystem::path& target) : path_(lock_path(target)) {
  for (;;) {
    const int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) refuse(target, path_, errno);
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int error = errno;
      char pid[32] = {};
      const ssize_t got = ::pread(fd, pid, sizeof pid - 1, 0);
      ::close(fd);
      if (error != EWOULDBLOCK) refuse(target, path_, error);
      throw core::InputError("another cgad is writing " + target.string() +
                             (got > 0 ? " (pid " + std::string(pid, static_cast<std::size_t>(got)) + ")" : "") +
                             ": give each shard its own --out");
    }
    // Still the file at that path? A holder that has just released it unlinked it after this open.
    struct stat held {
    }, named{};
    if (::fstat(fd, &held) == 0 && ::stat(path_.c_str(), &named) == 0 && held.st_dev == named.st_dev &&
        held.st_ino == named.st_ino) {
      const std::string pid = std::to_string(::getpid());
      if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) < 0) {
        // The pid only improves the message of a refused writer; the lock holds without it.
      }
      fd_ = fd;
      return;
    }
    ::close(fd);
  }
}

PartLock::~PartLock() {
  ::unlink(path_.c_str());
  ::close(fd_);
}

}  // namespace cgad::simulate
