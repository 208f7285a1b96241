#include "cgad/simulate/part_lock.hpp"

#include "cgad/core/errors.hpp"

#include <cerrno>
#include <string>
#include <system_error>

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

PartLock::PartLock(const std::filesystem::path& target) : path_(lock_path(target)) {
  for (;;) {
    const int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) throw std::system_error(errno, std::generic_category(), "cannot create the lock " + path_.string());
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int error = errno;
      char pid[32] = {};
      const ssize_t got = ::pread(fd, pid, sizeof pid - 1, 0);
      ::close(fd);
      if (error != EWOULDBLOCK)
        throw std::system_error(error, std::generic_category(), "cannot lock " + path_.string());
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
