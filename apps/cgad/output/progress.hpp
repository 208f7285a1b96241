#pragma once
// A one-line progress bar on stderr for long runs (verify-bound, bound, noise). It draws only when stderr is a
// terminal, so CI logs and redirected output stay clean; it erases itself when done.
#include <string>

namespace cgad::cli {

class ProgressBar {
 public:
  explicit ProgressBar(std::string label);
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;
  void update(long done, long total);

 private:
  std::string label_;
  bool enabled_;
  bool drawn_ = false;
};

}  // namespace cgad::cli
