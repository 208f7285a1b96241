#pragma once
// One writer per part file: two shards given the same --out both ran and both replaced the
// file, and the first one's runs were lost without a word. `cgad simulate --out FILE` holds this lock from before
// its first run until its part is committed, so a second writer of the same FILE is refused at its start.
//
// The lock is flock(2) (exclusive, non-blocking) on a lock file beside the target, `.<name>.cgad-lock` in the
// target's directory (symlinks resolved first, so two names of one file share one lock). It is released by
// unlinking the lock file while still holding it, then closing it; a writer that opened the old file before the
// unlink re-checks after locking that its descriptor is still the file at that path, and retries otherwise — so
// the lock file never outlives its holder and two holders can never coexist. flock works across processes of
// one host; on NFS it is emulated by fcntl locks (Linux ≥ 2.6.12), which NFS servers honour.
#include <filesystem>
#include <string>

namespace cgad::simulate {

class PartLock {
 public:
  // InputError when another process holds it ("another cgad is writing FILE (pid N)"), and when the lock file
  // cannot be made or locked (naming it and why).
  explicit PartLock(const std::filesystem::path& target);
  ~PartLock();
  PartLock(const PartLock&) = delete;
  PartLock& operator=(const PartLock&) = delete;

  static std::filesystem::path lock_path(const std::filesystem::path& target);

 private:
  std::filesystem::path path_;
  int fd_ = -1;
};

}  // namespace cgad::simulate
