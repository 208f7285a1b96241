#pragma once
// A folder of files written as one (the `report/` folder of `cgad report`): built in a fresh temporary folder
// beside the target (named as atomic_file.hpp names temporaries, with a `.cgad-building` marker inside) and
// swapped in whole by commit(): atomically (renameat2 RENAME_EXCHANGE) where the target exists, by one rename
// where it does not. So a run killed half-way leaves the previous folder exactly as it was -- never a new
// gate.csv beside an old report.md -- and the next run removes the half-built folder (a stale temporary of a dead
// process, still marked as building). Files of the old folder that the new one does not hold (the user's own
// notes) are moved into the new one, never lost; the ones it replaces go.
//
// What is never done, whatever the folder holds:
//   - remove or move anything across a mount: a target that is, or holds, a mount point (a bind mount or another
//     filesystem, found by mount id, not following links) is refused before anything is written, and every
//     removal stops at a folder on another mount and keeps it;
//   - follow a symbolic link while removing (a link is removed as a link). A target that is itself a link to a
//     folder is written through, as AtomicFile writes through a link to a file: the folder it points to is
//     replaced and the link stays a link;
//   - lose the old folder's owner, group or mode: the new one gets them (the owner where permitted; the group
//     and a setgid bit from the start, so files written into it get the group as they would in the old one);
//   - ignore a failed rename, or leave a temporary behind on an error: the half-built folder is removed, and
//     if the user's files cannot all be moved into the new folder, the old one is kept, whole, under a name the
//     error message gives.
// The target may not be a file, the current directory or a folder above it.
#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <mutex>
#include <string>

namespace cgad::io {

class AtomicFolder {
 public:
  // `what` names the folder in error messages ("report": "the report folder '...' exists and is not a folder").
  AtomicFolder(std::filesystem::path target, std::string what);
  // Without commit() (an exception), the temporary folder is removed and the target is untouched.
  ~AtomicFolder();
  AtomicFolder(const AtomicFolder&) = delete;
  AtomicFolder& operator=(const AtomicFolder&) = delete;
  // Where the files go: the temporary folder until commit().
  const std::filesystem::path& dir() const { return build_; }
  // The target as the caller named it.
  const std::filesystem::path& target() const { return shown_; }
  // Writes `name` inside the folder (atomic_file.hpp's AtomicFile).
  void write_file(const std::string& name, const std::string& contents) const;
  // Swaps the folder in; InputError naming the target and why if it cannot, after which the target is as it was
  // (or, where the new folder is in place but not every file of the old one could be moved into it, the old
  // folder is kept whole under the name the message gives).
  void commit();
  // Removes the temporary folder, from any thread, while the writer may still be writing into it (a signal
  // ends the process: the command's interrupt handling calls this first). A commit under way is finished
  // first, so the old folder is never caught half-merged; after this the target is as it was.
  void abandon() noexcept;

 private:
  void discard() noexcept;  // removes the temporary folder, if it is still ours; the caller holds mutex_

  std::filesystem::path shown_;  // the target as the caller named it
  std::string what_;
  std::filesystem::path target_;  // absolute, a symbolic link resolved
  std::filesystem::path build_;
  bool built_ = false;   // build_ exists and holds the new folder, not yet swapped in
  bool exists_ = false;  // the target existed when the build began, with these:
  ::mode_t mode_ = 0;
  uid_t uid_ = 0;
  gid_t gid_ = 0;
  dev_t mount_device_ = 0;  // the mount of the target's parent: nothing is removed across another
  std::uint64_t mount_id_ = 0;
  std::mutex mutex_;  // commit() and the removal of the temporary, which abandon() may do from another thread
};

}  // namespace cgad::io
