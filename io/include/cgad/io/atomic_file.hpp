#pragma once
// The one way cgad replaces a file (every command's output, the fast path's state files, report figures): the
// new contents go to a temporary in the target's own directory, are flushed and fsync'ed, and the temporary is
// renamed over the target, then the directory is fsync'ed. A reader sees the old file or the new one, never a
// mix; a failure at any point leaves the old file as it was.
//
// What may be replaced, decided before anything is written (InputError, exit status 2 on the command line):
//   - a missing file in an existing directory: created with the mode a plain open() would give it
//     (0666 less the umask);
//   - an existing regular file: replaced, keeping its mode (and, where permitted, its owner and group);
//   - a symbolic link to an existing regular file: written THROUGH. The file the link points to is replaced,
//     atomically, in that file's own directory, and the link stays a link. That is what `> link` does in a
//     shell, so a link into a results folder keeps working; a dangling link is refused (it would create a file
//     somewhere the user never named);
//   - anything else is refused: an empty path, a directory, and every existing non-regular file -- device node,
//     FIFO, socket. Renaming over one would replace `/dev/null` by a regular file (run as root) or silently turn a
//     FIFO someone reads into a file nobody does. ("-" for standard output is the callers' business.)
//
// Temporaries. Where the filesystem allows it (Linux O_TMPFILE, with /proc mounted), the data are written to an
// unnamed file in the target's directory, which is given a name only for the instant between linkat() and
// rename(): a crash, kill -9 included, while the data are written leaves nothing behind. Elsewhere the temporary
// is created with O_CREAT | O_EXCL | O_NOFOLLOW under an unpredictable name (64 random bits), so a file or
// symlink planted at that name is never followed or reused. Either way the name follows one pattern,
//     .<target name>.cgad-tmp.<host>.<pid>.<16 hex digits>
// and before each write cgad removes the temporaries of that pattern, beside the same target, that were left by
// a process of this host that no longer runs. Nothing else is ever removed: a name of that pattern whose process
// is alive, or that was made on another host (a shared filesystem), is left alone.
#include <sys/types.h>

#include <cstddef>
#include <filesystem>
#include <memory>
#include <ostream>
#include <streambuf>
#include <string>

namespace cgad::io {

// An ostream over a file descriptor (not owned), buffered; the first failing write(2) sets badbit and is kept
// as error() (an errno value), so that a caller can say why.
class FdOutputStream : public std::ostream {
 public:
  explicit FdOutputStream(int fd);
  ~FdOutputStream() override;
  FdOutputStream(const FdOutputStream&) = delete;
  FdOutputStream& operator=(const FdOutputStream&) = delete;
  // 0, or the errno of the first failed write.
  int error() const;

 private:
  class Buffer;
  std::unique_ptr<Buffer> buffer_;
};

// Writes all of [data, data + size) to `fd`, retrying interrupted and short writes; false (errno set) on an error.
bool write_all(int fd, const void* data, std::size_t size);

class AtomicFile {
 public:
  // Checks and resolves `target` as described above and creates the temporary; InputError otherwise.
  explicit AtomicFile(const std::filesystem::path& target);
  // Without commit(), the temporary is removed and the target is untouched.
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // The file that commit() replaces (symbolic links resolved) and, if it exists, its identity, so that a caller
  // can refuse to overwrite its own input.
  const std::filesystem::path& target() const { return target_; }
  bool replaces_existing() const { return exists_; }
  bool replaces(dev_t device, ino_t inode) const { return exists_ && device == device_ && inode == inode_; }

  // The temporary's contents so far; buffered.
  std::ostream& stream();
  void write(const void* data, std::size_t size);
  // The temporary's descriptor, for a child process to write into (flush stream() first); open for reading too,
  // so that the caller can check what the child wrote before committing it (plot.cpp).
  int fd() const { return fd_; }

  // Flushes, fsyncs, gives the temporary the target's mode and renames it over the target; InputError naming
  // the target (and why) if any step fails, after which the target is as it was.
  void commit();

 private:
  void discard() noexcept;

  std::filesystem::path target_;  // resolved
  std::string name_;              // target_.filename()
  std::filesystem::path dir_;     // target_'s directory
  int dir_fd_ = -1;
  int fd_ = -1;
  bool unnamed_ = false;   // O_TMPFILE: no name until commit()
  std::string temporary_;  // the temporary's name in dir_ (named mode; during commit for unnamed)
  bool exists_ = false;
  dev_t device_ = 0;
  ino_t inode_ = 0;
  ::mode_t mode_ = 0;
  uid_t uid_ = 0;
  gid_t gid_ = 0;
  bool committed_ = false;
  std::unique_ptr<FdOutputStream> stream_;
};

// The whole file at once.
void write_file_atomically(const std::filesystem::path& target, const void* data, std::size_t size);

// The temporary-name pattern above, shared with the report folder (which builds a whole directory beside its
// target): the prefix ".<name>.cgad-tmp.", a fresh unpredictable name with it, and whether a name of that
// pattern was left by a process of this host that no longer runs.
std::string temporary_prefix(const std::string& target_name);
std::string fresh_temporary_name(const std::string& target_name);
bool is_stale_temporary(const std::string& entry_name, const std::string& target_name);

// The process's umask, read without changing it (where /proc allows), and the mode a newly created file gets:
// 0666 less it.
::mode_t process_umask();
::mode_t default_file_mode();

}  // namespace cgad::io
