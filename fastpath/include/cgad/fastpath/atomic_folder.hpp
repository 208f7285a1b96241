#pragma once
// A folder of files written as one (the `report/` folder of `cgad report`): built in a fresh temporary folder
// beside the target (named as atomic_file.hpp names temporaries, with a `.cgad-building` marker inside) and
// swapped in whole by commit(): atomically (renameat2 RENAME_EXCHANGE) where the target exists, by one rename
// where it does not. So a run killed half-way leaves the previous folder exactly as it was -- never a new
// gate.csv beside an old report.md -- and the next run removes the half-built folder (a stale temporary of a dead
// process, still marked as building). Files of the old folder that the new one does not hold (the user's own
// notes) are moved into the new one, never lost; the ones it replaces go. The target may not be a file, the
// current directory or a folder above it.
#include <filesystem>
#include <string>

namespace cgad::fastpath {

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
  // Swaps the folder in; InputError naming the target and why if it cannot, after which the target is as it was.
  void commit();

 private:
  std::filesystem::path shown_;   // the target as the caller named it
  std::string what_;
  std::filesystem::path target_;  // absolute
  std::filesystem::path build_;
  bool committed_ = false;
};

}  // namespace cgad::fastpath
