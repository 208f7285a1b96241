#include "fragment_progress.hpp"

namespace cgad::simulate {

JobCopies::JobCopies(FragmentProgress mode, std::size_t workers, const core::FragmentLayout& layout,
                     WorkerRounding round)
    // With one fragment keep is discard (fragment_progress.hpp), which needs no copy per worker.
    : keep_(mode == FragmentProgress::keep && layout.fragments() > 1),
      workers_(workers),
      layout_(layout),
      round_(round),
      copies_(keep_ ? workers : 1) {}

double JobCopies::bytes_per_parameter(FragmentProgress mode, std::size_t workers, std::size_t fragments) {
  // x^k and o^k per worker in float (keep), or the one shared pair (discard), which the engine's estimate already
  // counts among its run vectors.
  return mode == FragmentProgress::keep && fragments > 1 ? 2.0 * 4.0 * static_cast<double>(workers) : 0.0;
}

std::size_t JobCopies::fragment(std::int64_t r) const {
  const auto rounds = static_cast<std::uint64_t>(r);
  if (!keep_) return static_cast<std::size_t>(rounds % layout_.fragments());
  const std::uint64_t k = rounds % workers_, j = rounds / workers_;
  return static_cast<std::size_t>((j + k) % layout_.fragments());
}

std::span<float> JobCopies::begin(std::size_t k, std::span<const float> snapshot) {
  Copy& copy = copies_[keep_ ? k : 0];
  const auto take = [&](std::size_t from, std::size_t size) {
    for (std::size_t i = from; i < from + size; ++i) copy.local[i] = copy.base[i] = round_(snapshot[i]);
  };
  if (copy.local.empty()) {
    copy.local.resize(snapshot.size());
    copy.base.resize(snapshot.size());
  }
  if (!keep_ || !copy.previous) {
    take(0, snapshot.size());
  } else {
    take(layout_.offset(*copy.previous), layout_.size(*copy.previous));
  }
  return copy.local;
}

void JobCopies::end(std::size_t k, std::size_t fragment, std::span<float> delta) {
  Copy& copy = copies_[keep_ ? k : 0];
  const std::size_t offset = layout_.offset(fragment);
  for (std::size_t i = 0; i < delta.size(); ++i) delta[i] = round_(copy.base[offset + i] - copy.local[offset + i]);
  copy.previous = fragment;
}

}  // namespace cgad::simulate
