#pragma once
// What a command leaves behind when it is stopped by SIGINT (Ctrl-C), SIGTERM (kill, a batch scheduler's
// time limit) or SIGHUP (a closed terminal): while a SignalCleanup lives, those signals are taken by a thread of
// its own (signalfd), which runs the cleanup and then ends the process by the same signal, with its default
// action -- so the caller sees what it would have seen without it (a shell: 128 + the signal's number). A
// signal that was ignored when cgad started (nohup, a background job of a non-interactive shell) stays ignored.
//
// Construct it before the command starts any thread: the signals are blocked in the constructing thread, and
// threads started later inherit that (a signal then reaches the watcher, never a worker). Child processes are
// started with an empty signal mask (plot.cpp), so gnuplot can still be stopped.
#include <functional>
#include <thread>

#include <signal.h>

namespace cgad::cli {

class SignalCleanup {
 public:
  // `cleanup` runs on the watcher thread, concurrently with the command; it must be safe to call from there.
  explicit SignalCleanup(std::function<void()> cleanup);
  ~SignalCleanup();
  SignalCleanup(const SignalCleanup&) = delete;
  SignalCleanup& operator=(const SignalCleanup&) = delete;

 private:
  void watch();

  std::function<void()> cleanup_;
  sigset_t watched_{};
  sigset_t previous_mask_{};
  int signal_fd_ = -1;
  int stop_fd_ = -1;  // an eventfd: the destructor ends the watcher through it
  std::thread watcher_;
};

}  // namespace cgad::cli
