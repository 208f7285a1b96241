#include "cgad/io/atomic_file.hpp"

#include "cgad/core/errors.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace cgad::io {
namespace {

using core::InputError;

std::string why(int error) {
  return std::strerror(error);
}

// The host part of a temporary's name: the hostname, cut to 64 characters, with anything but [A-Za-z0-9-_]
// replaced by '_' so that the name stays one path component and parses back unambiguously.
std::string host_tag() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "unknown";
  std::string tag;
  for (const char* c = name; *c != '\0' && tag.size() < 64; ++c) {
    const bool plain =
        (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '-' || *c == '_';
    tag += plain ? *c : '_';
  }
  return tag;
}

// The target's name as it appears in a temporary's name: at most 100 bytes of it, so that the temporary's name
// stays under NAME_MAX (255) for any target name.
std::string stem_of(const std::string& target_name) {
  return target_name.substr(0, 100);
}

// write_all (atomic_file.hpp), keeping the first error in `error` and writing nothing after one.
void write_all(int fd, const char* data, std::size_t size, int& error) {
  if (error == 0 && !cgad::io::write_all(fd, data, size)) error = errno;
}

bool process_alive(long pid) {
  if (pid <= 0) return true;  // not a pid we could have written: never treat it as stale
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH;
}

// Removes, in `dir_fd`, the regular files of the temporary pattern for `target_name` left by dead processes of
// this host.
void remove_stale_temporaries(int dir_fd, const std::string& target_name) {
  const int scan_fd = ::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (scan_fd < 0) return;
  DIR* dir = ::fdopendir(scan_fd);
  if (dir == nullptr) {
    ::close(scan_fd);
    return;
  }
  const std::string prefix = temporary_prefix(target_name);
  std::vector<std::string> stale;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string name = entry->d_name;
    if (name.compare(0, prefix.size(), prefix) == 0 && is_stale_temporary(name, target_name)) stale.push_back(name);
  }
  ::closedir(dir);
  for (const std::string& name : stale) {
    struct stat st;
    if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
        st.st_uid == ::geteuid()) {
      ::unlinkat(dir_fd, name.c_str(), 0);
    }
  }
}

}  // namespace

bool write_all(int fd, const void* data, std::size_t size) {
  const char* bytes = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, bytes, size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    bytes += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

// --- FdOutputStream ---------------------------------------------------------------------------------------------

class FdOutputStream::Buffer : public std::streambuf {
 public:
  explicit Buffer(int fd) : fd_(fd), data_(1 << 16) { setp(data_.data(), data_.data() + data_.size()); }
  int error() const { return error_; }

 protected:
  int_type overflow(int_type c) override {
    if (!drain()) return traits_type::eof();
    if (!traits_type::eq_int_type(c, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(c);
      pbump(1);
    }
    return traits_type::not_eof(c);
  }
  int sync() override { return drain() ? 0 : -1; }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    if (n >= static_cast<std::streamsize>(data_.size())) {  // large writes go straight through
      if (!drain()) return 0;
      write_all(fd_, s, static_cast<std::size_t>(n), error_);
      return error_ == 0 ? n : 0;
    }
    return std::streambuf::xsputn(s, n);
  }

 private:
  bool drain() {
    write_all(fd_, pbase(), static_cast<std::size_t>(pptr() - pbase()), error_);
    setp(data_.data(), data_.data() + data_.size());
    return error_ == 0;
  }
  int fd_;
  std::vector<char> data_;
  int error_ = 0;
};

FdOutputStream::FdOutputStream(int fd) : std::ostream(nullptr), buffer_(std::make_unique<Buffer>(fd)) {
  rdbuf(buffer_.get());
}
FdOutputStream::~FdOutputStream() = default;
int FdOutputStream::error() const {
  return buffer_->error();
}

// --- names ------------------------------------------------------------------------------------------------------

std::string temporary_prefix(const std::string& target_name) {
  return "." + stem_of(target_name) + ".cgad-tmp.";
}

std::string fresh_temporary_name(const std::string& target_name) {
  unsigned long long random = 0;
  std::size_t got = 0;
  while (got < sizeof random) {
    const ssize_t n = ::getrandom(reinterpret_cast<char*>(&random) + got, sizeof random - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw InputError("cannot draw random bits for a temporary file name: " + why(errno));
    got += static_cast<std::size_t>(n);
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", random);
  return temporary_prefix(target_name) + host_tag() + "." + std::to_string(::getpid()) + "." + hex;
}

bool is_stale_temporary(const std::string& entry_name, const std::string& target_name) {
  const std::string prefix = temporary_prefix(target_name) + host_tag() + ".";
  if (entry_name.compare(0, prefix.size(), prefix) != 0) return false;
  const std::string rest = entry_name.substr(prefix.size());  // <pid>.<16 hex>
  const std::size_t dot = rest.find('.');
  if (dot == std::string::npos || dot == 0 || dot > 10 || rest.size() - dot - 1 != 16) return false;
  long pid = 0;
  for (std::size_t i = 0; i < dot; ++i) {
    if (rest[i] < '0' || rest[i] > '9') return false;
    pid = pid * 10 + (rest[i] - '0');
  }
  for (std::size_t i = dot + 1; i < rest.size(); ++i) {
    if (!std::isxdigit(static_cast<unsigned char>(rest[i]))) return false;
  }
  return !process_alive(pid);
}

::mode_t process_umask() {
  // /proc/self/status says the umask without changing it; umask(2) can only read it by setting it, which would
  // race with another thread creating a file.
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("Umask:", 0) == 0) return static_cast<::mode_t>(std::stoul(line.substr(6), nullptr, 8)) & 0777;
  }
  const ::mode_t mask = ::umask(0);
  ::umask(mask);
  return mask;
}

::mode_t default_file_mode() {
  return 0666 & ~process_umask();
}

// --- AtomicFile -------------------------------------------------------------------------------------------------

AtomicFile::AtomicFile(const std::filesystem::path& target) {
  namespace fs = std::filesystem;
  if (target.empty()) throw InputError("the output path is empty");
  const std::string shown = "'" + target.string() + "'";
  struct stat st;
  fs::path resolved = target;
  if (::lstat(target.c_str(), &st) == 0) {
    if (S_ISLNK(st.st_mode)) {
      std::error_code error;
      resolved = fs::canonical(target, error);
      if (!error && ::lstat(resolved.c_str(), &st) != 0) error = std::error_code(errno, std::generic_category());
      if (error == std::errc::too_many_symbolic_link_levels) {
        throw InputError("output " + shown +
                         " is a symbolic link in a loop (links that lead back to themselves, "
                         "never to a file)");
      }
      if (error == std::errc::no_such_file_or_directory) {
        throw InputError("output " + shown +
                         " is a symbolic link to a missing file (cgad writes through a link "
                         "only to an existing regular file)");
      }
      if (error) throw InputError("cannot follow the symbolic link " + shown + ": " + why(error.value()));
    }
    if (S_ISDIR(st.st_mode)) throw InputError("output " + shown + " is a directory");
    if (!S_ISREG(st.st_mode)) {
      throw InputError("output " + shown +
                       " exists and is not a regular file (a device, FIFO or socket); cgad "
                       "replaces only regular files");
    }
    exists_ = true;
    device_ = st.st_dev;
    inode_ = st.st_ino;
    mode_ = st.st_mode & 07777;
    uid_ = st.st_uid;
    gid_ = st.st_gid;
  } else if (errno == ENOENT) {
    mode_ = default_file_mode();
  } else {
    throw InputError("cannot use " + shown + " as an output: " + why(errno));
  }
  if (resolved.filename().empty() || resolved.filename() == "." || resolved.filename() == "..") {
    throw InputError("output " + shown + " names no file");
  }
  target_ = resolved;
  name_ = resolved.filename().string();
  dir_ = resolved.has_parent_path() ? resolved.parent_path() : fs::path(".");
  dir_fd_ = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd_ < 0) {
    const int error = errno;
    throw InputError((error == ENOENT || error == ENOTDIR
                          ? "no such directory: '" + dir_.string() + "'"
                          : "cannot open directory '" + dir_.string() + "': " + why(error)) +
                     " (for output " + shown + ")");
  }
  remove_stale_temporaries(dir_fd_, name_);
  // An unnamed temporary needs /proc/self/fd to be given a name at the end (linkat without CAP_DAC_READ_SEARCH).
  if (::access("/proc/self/fd", X_OK) == 0) {
    fd_ = ::openat(dir_fd_, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    unnamed_ = fd_ >= 0;
  }
  for (int attempt = 0; fd_ < 0 && attempt < 16; ++attempt) {
    temporary_ = fresh_temporary_name(name_);
    fd_ = ::openat(dir_fd_, temporary_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd_ < 0 && errno != EEXIST) break;
  }
  if (fd_ < 0) {
    const int error = errno;
    temporary_.clear();
    ::close(dir_fd_);
    dir_fd_ = -1;
    throw InputError("cannot create a temporary file in '" + dir_.string() + "' (for output " + shown +
                     "): " + why(error));
  }
  stream_ = std::make_unique<FdOutputStream>(fd_);
}

AtomicFile::~AtomicFile() {
  discard();
}

void AtomicFile::discard() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!committed_ && !temporary_.empty() && dir_fd_ >= 0) ::unlinkat(dir_fd_, temporary_.c_str(), 0);
  temporary_.clear();
  if (dir_fd_ >= 0) ::close(dir_fd_);
  dir_fd_ = -1;
}

std::ostream& AtomicFile::stream() {
  return *stream_;
}

void AtomicFile::write(const void* data, std::size_t size) {
  stream_->write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
}

void AtomicFile::commit() {
  const std::string shown = "'" + target_.string() + "'";
  stream_->flush();
  if (!*stream_) {
    const int error = stream_->error();
    discard();
    throw InputError("cannot write " + shown + ": " + (error != 0 ? why(error) : "stream error"));
  }
  const auto fail = [&](const std::string& what) {
    const int error = errno;
    discard();
    throw InputError("cannot write " + shown + ": " + what + ": " + why(error));
  };
  if (exists_ && (uid_ != ::geteuid() || gid_ != ::getegid())) {
    // Best effort (needs privilege for another owner): the mode below is set either way.
    if (::fchown(fd_, uid_, gid_) != 0) (void)::fchown(fd_, static_cast<uid_t>(-1), gid_);
  }
  if (::fchmod(fd_, mode_) != 0) fail("setting its mode");
  if (::fsync(fd_) != 0) fail("fsync");
  if (unnamed_) {
    const std::string self = "/proc/self/fd/" + std::to_string(fd_);
    for (int attempt = 0;; ++attempt) {
      temporary_ = fresh_temporary_name(name_);
      if (::linkat(AT_FDCWD, self.c_str(), dir_fd_, temporary_.c_str(), AT_SYMLINK_FOLLOW) == 0) break;
      if (errno != EEXIST || attempt >= 16) {
        temporary_.clear();
        fail("naming the temporary");
      }
    }
  }
  // The target may have changed since the checks: never rename over something that is not a regular file now.
  struct stat st;
  if (::fstatat(dir_fd_, name_.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(st.st_mode)) {
    discard();
    throw InputError("cannot write " + shown + ": it is no longer a regular file");
  }
  if (::renameat(dir_fd_, temporary_.c_str(), dir_fd_, name_.c_str()) != 0) fail("rename");
  committed_ = true;
  temporary_.clear();
  ::fsync(dir_fd_);  // the rename itself durable; a filesystem that cannot fsync a directory has nothing to do
  discard();
}

void write_file_atomically(const std::filesystem::path& target, const void* data, std::size_t size) {
  AtomicFile file(target);
  file.write(data, size);
  file.commit();
}

}  // namespace cgad::io
