#pragma once
// Generators of pseudo-gradient streams for the reference optimizer properties. Values are doubles converted
// exactly to the scalar under test, spread over magnitudes 2^-30 … 2^10 with both signs and exact zeros of both signs,
// so the same stream can be replayed bit-for-bit in float, double and MPFR.
#include <rapidcheck.h>

#include <cmath>
#include <cstdint>
#include <ostream>
#include <vector>

namespace cgad::proptests {

struct StreamStep {
  std::vector<double> grad;
  std::int64_t tau = 0;
};

struct Stream {
  std::vector<double> params;
  std::vector<StreamStep> steps;
};

inline rc::Gen<double> gen_value() {
  return rc::gen::weightedOneOf<double>({
      {1, rc::gen::element(0.0, -0.0)},
      {8, rc::gen::map(
              rc::gen::tuple(rc::gen::inRange(-(1 << 20), 1 << 20), rc::gen::inRange(-30, 11)),
              [](const std::tuple<int, int>& t) { return std::ldexp(double(std::get<0>(t)), std::get<1>(t) - 20); })},
  });
}

// `max_tau` bounds the staleness; `max_len` the number of parameters.
inline rc::Gen<Stream> gen_stream(std::int64_t max_tau, int max_len = 8, int max_steps = 40) {
  return rc::gen::mapcat(
      rc::gen::pair(rc::gen::inRange(1, max_len + 1), rc::gen::inRange(1, max_steps + 1)),
      [max_tau](const std::pair<int, int>& shape) {
        const auto [n, steps] = shape;
        const auto gen_step = rc::gen::build<StreamStep>(
            rc::gen::set(&StreamStep::grad, rc::gen::container<std::vector<double>>(n, gen_value())),
            rc::gen::set(&StreamStep::tau, rc::gen::inRange<std::int64_t>(0, max_tau + 1)));
        return rc::gen::build<Stream>(
            rc::gen::set(&Stream::params, rc::gen::container<std::vector<double>>(n, gen_value())),
            rc::gen::set(&Stream::steps, rc::gen::container<std::vector<StreamStep>>(steps, gen_step)));
      });
}

// Counterexamples print every value as hexfloat, so a failure can be replayed exactly.
inline void showValue(const Stream& stream, std::ostream& os) {
  os << std::hexfloat << "params:";
  for (double x : stream.params) os << ' ' << x;
  for (std::size_t k = 0; k < stream.steps.size(); ++k) {
    os << "\n  step " << k << " tau " << stream.steps[k].tau << " grad:";
    for (double x : stream.steps[k].grad) os << ' ' << x;
  }
  os << std::defaultfloat;
}

template <class Real>
std::vector<Real> to_real(const std::vector<double>& values) {
  return std::vector<Real>(values.begin(), values.end());
}

}  // namespace cgad::proptests
