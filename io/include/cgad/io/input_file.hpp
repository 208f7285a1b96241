#pragma once
// How cgad opens a file it reads as a stream (a replay stream, a noise study's recorded stream, part files).
#include <sys/types.h>

#include <istream>
#include <memory>
#include <string>

namespace cgad::io {

// An input file, under one rule for every command that reads a stream (replay --input):
//   - a regular file is read as it is;
//   - a pipe or a FIFO -- /dev/stdin on a pipe, bash's <(...) process substitution, a named FIFO -- is read once,
//     front to back, as a stream, with no assumption about its size. Opening it never blocks: cgad waits for its
//     first byte at most kFifoWriterWait seconds and then refuses the input (exit status 2), so a FIFO nobody
//     writes to -- no writer, or one that holds it open and writes nothing -- is a clear error, not a hang; once
//     the first byte came, cgad reads for as long as a writer holds it open (a slow producer is not cut off);
//   - anything else -- a directory, a device node (/dev/zero would never end), a socket -- is refused.
// Read errors are InputErrors naming the input.
class InputFile {
 public:
  static constexpr int kFifoWriterWait = 3;
  explicit InputFile(const std::string& path);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  std::istream& stream();
  bool regular() const { return regular_; }
  dev_t device() const { return device_; }
  ino_t inode() const { return inode_; }

 private:
  class Buffer;
  int fd_ = -1;
  bool regular_ = false;
  dev_t device_ = 0;
  ino_t inode_ = 0;
  std::unique_ptr<Buffer> buffer_;
  std::unique_ptr<std::istream> stream_;
};

}  // namespace cgad::io
