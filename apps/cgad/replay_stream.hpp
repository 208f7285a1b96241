#pragma once
// The pseudo-gradient stream `cgad replay` reads (DESIGN.md §7): JSON lines, the first
// {"params": [...], "tensors": [n0, n1, ...]} ("tensors" optional: the sizes of the tensors the parameters are
// made of, summing to their count; q8 blocks restart at each, as bitsandbytes quantizes each tensor
// separately), then one event per line {"grad": [...], "tau": k, "fragment": f}.
// Numbers are kept as the text the user wrote (JSON numbers or decimal strings), so that each backend rounds
// them once, correctly, to its own format: 0.1 reaches an MPFR run as 0.1, not as the double nearest to it.
#include "cgad/reference/real.hpp"

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace cgad::cli {

struct StreamEvent {
  std::vector<std::string> grad;
  std::int64_t tau = 0;
  std::size_t fragment = 0;
  std::size_t line = 0;  // 1-based line of the input it came from, for error messages
};

struct PseudoGradientStream {
  std::vector<std::string> params;
  std::vector<std::size_t> tensors;  // empty: one tensor
  std::vector<StreamEvent> events;
};

// The stream's numbers, each rounded once (correctly) to Real; InputError naming `what`[i] otherwise.
template <reference::RealScalar Real>
std::vector<Real> parse_numbers(const std::vector<std::string>& text, const std::string& what) {
  std::vector<Real> out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    out.push_back(reference::parse_real<Real>(text[i], what + "[" + std::to_string(i) + "]"));
  }
  return out;
}

// Reads and checks the whole stream. Malformed, truncated or mismatched input throws InputError naming
// `source`, the line and what is wrong. Blank lines are ignored.
PseudoGradientStream read_stream(std::istream& in, const std::string& source);

}  // namespace cgad::cli
