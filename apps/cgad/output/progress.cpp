#include "progress.hpp"

#include <cstdio>
#include <unistd.h>

namespace cgad::cli {

ProgressBar::ProgressBar(std::string label) : label_(std::move(label)), enabled_(::isatty(STDERR_FILENO) == 1) {}

ProgressBar::~ProgressBar() {
  if (drawn_) std::fprintf(stderr, "\r\033[K");
}

void ProgressBar::update(long done, long total) {
  if (!enabled_ || total <= 0) return;
  constexpr int kWidth = 40;
  const int filled = static_cast<int>(kWidth * done / total);
  std::fprintf(stderr, "\r%s [%.*s%*s] %3ld%% (%ld/%ld)", label_.c_str(), filled,
               "########################################", kWidth - filled, "", 100 * done / total, done, total);
  std::fflush(stderr);
  drawn_ = true;
}

}  // namespace cgad::cli
