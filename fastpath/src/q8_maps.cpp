#include "cgad/fastpath/q8_maps.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

namespace cgad::fastpath {

void torch_linspace_f32(float start, float end, int points, float* out) {
  if (points == 1) {
    out[0] = start;
    return;
  }
  // ATen: step = (end − start) / (steps − 1) in float, the integer converted to float.
  const float step = (end - start) / static_cast<float>(points - 1);
  const int halfway = points / 2;
  for (int idx = 0; idx < points; ++idx) {
    out[idx] = idx < halfway ? start + step * static_cast<float>(idx)
                             : end - step * static_cast<float>(points - idx - 1);
  }
}

namespace {

Q8Map build_dynamic_map(bool is_signed) {
  std::vector<float> values;
  for (int i = 0; i < 7; ++i) {
    const int points = is_signed ? (1 << i) + 1 : (1 << (i + 1)) + 1;
    std::vector<float> grid(static_cast<std::size_t>(points));
    torch_linspace_f32(0.1f, 1.0f, points, grid.data());
    // Python's 10 ** (i − 6) is a double; the tensor product casts it to float32 before multiplying.
    const float scale = static_cast<float>(std::pow(10.0, i - 6));
    for (int j = 0; j + 1 < points; ++j) {
      const float mean = (grid[j] + grid[j + 1]) / 2.0f;
      values.push_back(scale * mean);
      if (is_signed) values.push_back(-(scale * mean));
    }
  }
  values.push_back(0.0f);
  values.push_back(1.0f);
  std::sort(values.begin(), values.end());
  if (values.size() != kQ8Codes || std::adjacent_find(values.begin(), values.end()) != values.end()) {
    throw std::logic_error("dynamic map: expected 256 distinct codes");
  }
  Q8Map map{};
  for (int k = 0; k < kQ8Codes; ++k) map.code[k] = values[static_cast<std::size_t>(k)];
  for (int k = 0; k + 1 < kQ8Codes; ++k) {
    map.midpoint[k] = (static_cast<double>(map.code[k]) + static_cast<double>(map.code[k + 1])) / 2.0;
    float below = static_cast<float>(map.midpoint[k]);
    if (static_cast<double>(below) > map.midpoint[k]) below = std::nextafter(below, -std::numeric_limits<float>::infinity());
    map.threshold[k] = below;
  }
  map.midpoint[kQ8Codes - 1] = std::numeric_limits<double>::infinity();
  map.threshold[kQ8Codes - 1] = std::numeric_limits<float>::infinity();
  return map;
}

}  // namespace

const Q8Map& dynamic_map(Q8MapKind kind) {
  static const Q8Map signed_map = build_dynamic_map(true);
  static const Q8Map unsigned_map = build_dynamic_map(false);
  return kind == Q8MapKind::signed_map ? signed_map : unsigned_map;
}

}  // namespace cgad::fastpath
