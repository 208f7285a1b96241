#include "signal_cleanup.hpp"

#include "cgad/core/errors.hpp"

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

namespace cgad::cli {

SignalCleanup::SignalCleanup(std::function<void()> cleanup) : cleanup_(std::move(cleanup)) {
  sigemptyset(&watched_);
  for (const int signal : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction current {};
    if (::sigaction(signal, nullptr, &current) == 0 && current.sa_handler != SIG_IGN) sigaddset(&watched_, signal);
  }
  stop_fd_ = ::eventfd(0, EFD_CLOEXEC);
  if (stop_fd_ < 0) throw core::InputError("cannot watch for signals: " + std::string(std::strerror(errno)));
  // Blocked first, so that none arrives between the two calls and kills the process the old way.
  ::pthread_sigmask(SIG_BLOCK, &watched_, &previous_mask_);
  signal_fd_ = ::signalfd(-1, &watched_, SFD_CLOEXEC);
  if (signal_fd_ < 0) {
    const int error = errno;
    ::pthread_sigmask(SIG_SETMASK, &previous_mask_, nullptr);
    ::close(stop_fd_);
    throw core::InputError("cannot watch for signals: " + std::string(std::strerror(error)));
  }
  watcher_ = std::thread([this] { watch(); });
}

SignalCleanup::~SignalCleanup() {
  const std::uint64_t one = 1;
  (void)!::write(stop_fd_, &one, sizeof one);
  watcher_.join();
  ::close(signal_fd_);
  ::close(stop_fd_);
  // A signal that came after the watcher stopped is still pending: unblocking delivers it, the old way.
  ::pthread_sigmask(SIG_SETMASK, &previous_mask_, nullptr);
}

void SignalCleanup::watch() {
  pollfd fds[2] = {{signal_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
  for (;;) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    signalfd_siginfo info{};
    if (::read(signal_fd_, &info, sizeof info) != static_cast<ssize_t>(sizeof info)) continue;
    cleanup_();
    // End the process by the same signal: its default action, unblocked in this thread only (raise() sends it
    // to the calling thread).
    const int signal = static_cast<int>(info.ssi_signo);
    struct sigaction default_action {};
    default_action.sa_handler = SIG_DFL;
    ::sigaction(signal, &default_action, nullptr);
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, signal);
    ::pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
    ::raise(signal);
    return;  // not reached: the default action of all three ends the process
  }
}

}  // namespace cgad::cli
