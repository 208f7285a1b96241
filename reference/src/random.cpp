// PhiloxStream's transforms (random.hpp has the algorithm and what is exact where).
#include "cgad/reference/random.hpp"

#include <cmath>
#include <cstdint>
#include <numbers>

namespace cgad::reference {

double PhiloxStream::normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  const r123::Philox4x32::ctr_type out = draw();
  const double u1 = (static_cast<double>(bits53(out.v[0], out.v[1])) + 1.0) * 0x1p-53;  // (0, 1]
  const double u2 = static_cast<double>(bits53(out.v[2], out.v[3])) * 0x1p-53;          // [0, 1)
  const double r = std::sqrt(-2.0 * std::log(u1));
  const double angle = 2.0 * std::numbers::pi * u2;
  spare_ = r * std::sin(angle);
  has_spare_ = true;
  return r * std::cos(angle);
}

double PhiloxStream::uniform() {
  const r123::Philox4x32::ctr_type out = draw();
  return static_cast<double>(bits53(out.v[0], out.v[1])) * 0x1p-53;
}

}  // namespace cgad::reference
