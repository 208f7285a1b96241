#include "cgad/io/input_file.hpp"

#include "cgad/core/errors.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

namespace cgad::io {
namespace {

using core::InputError;

std::string why(int error) {
  return std::strerror(error);
}

}  // namespace

class InputFile::Buffer : public std::streambuf {
 public:
  Buffer(int fd, std::string path, std::vector<char> first) : fd_(fd), path_(std::move(path)), data_(std::move(first)) {
    const std::size_t filled = data_.size();
    data_.resize(std::max<std::size_t>(filled, 1 << 16));
    setg(data_.data(), data_.data(), data_.data() + filled);
  }

 protected:
  int_type underflow() override {
    if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
    for (;;) {
      const ssize_t n = ::read(fd_, data_.data(), data_.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw InputError("cannot read input '" + path_ + "': " + why(errno));
      if (n == 0) return traits_type::eof();
      setg(data_.data(), data_.data(), data_.data() + n);
      return traits_type::to_int_type(*gptr());
    }
  }

 private:
  int fd_;
  std::string path_;
  std::vector<char> data_;
};

InputFile::InputFile(const std::string& path) {
  const std::string shown = "'" + path + "'";
  if (path.empty()) throw InputError("the input path is empty");
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) throw InputError("cannot open input file " + shown + ": " + why(errno));
  if (S_ISDIR(st.st_mode)) throw InputError("input " + shown + " is a directory");
  if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode)) {
    throw InputError("input " + shown + " is not a regular file, pipe or FIFO (a device or socket)");
  }
  // Non-blocking: opening a FIFO for reading would otherwise wait for a writer, without end if none comes.
  fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd_ < 0) throw InputError("cannot open input file " + shown + ": " + why(errno));
  try {
    if (::fstat(fd_, &st) != 0 || (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode))) {
      throw InputError("input " + shown + " is not a regular file, pipe or FIFO");
    }
    regular_ = S_ISREG(st.st_mode);
    device_ = st.st_dev;
    inode_ = st.st_ino;
    std::vector<char> first;
    if (!regular_) {
      // An empty FIFO reads 0 (end of file) while no process has it open for writing, and fails with EAGAIN while
      // one has it open without having written: either way nothing came yet. Wait for the first byte at most
      // kFifoWriterWait seconds (a writer that opens the FIFO and never writes is refused as one that never came).
      std::vector<char> chunk(1 << 16);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kFifoWriterWait);
      for (;;) {
        const ssize_t n = ::read(fd_, chunk.data(), chunk.size());
        if (n > 0) {
          first.assign(chunk.begin(), chunk.begin() + n);
          break;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
          throw InputError("cannot read input " + shown + ": " + why(errno));
        }
        if (std::chrono::steady_clock::now() >= deadline) {
          throw InputError("input " + shown + " is a pipe or FIFO that no process wrote to within " +
                           std::to_string(kFifoWriterWait) + " s (no writer, one that closed it empty, or one that " +
                           "holds it open without writing)");
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
    // From here on (the first byte came), reads wait for data as long as a writer has the FIFO open.
    const int flags = ::fcntl(fd_, F_GETFL);
    if (flags < 0 || ::fcntl(fd_, F_SETFL, flags & ~O_NONBLOCK) != 0) {
      throw InputError("cannot read input " + shown + ": " + why(errno));
    }
    buffer_ = std::make_unique<Buffer>(fd_, path, std::move(first));
    stream_ = std::make_unique<std::istream>(buffer_.get());
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

InputFile::~InputFile() {
  stream_.reset();
  buffer_.reset();
  if (fd_ >= 0) ::close(fd_);
}

std::istream& InputFile::stream() {
  return *stream_;
}

}  // namespace cgad::io
